//! Cancellation: a flag that every running sandbox watches, set by the
//! caller or by SIGINT / SIGTERM / SIGHUP.

use nix::sys::signal::{SaFlags, SigAction, SigHandler, SigSet, Signal, sigaction};
use std::sync::atomic::{AtomicI32, AtomicPtr, Ordering};
use std::sync::{Arc, OnceLock};

#[derive(Debug, Default)]
struct Flag {
    /// 0 while not cancelled; the signal number when a signal cancelled;
    /// [`BY_CALLER`] when [`Cancel::cancel`] did.
    state: AtomicI32,
}

const BY_CALLER: i32 = -1;

/// A shared cancellation flag: once set, every sandbox run that watches it
/// kills its process group and returns `Termination::Cancelled`.
///
/// Cheap to clone; all clones share one flag. Cancellation cannot be undone.
#[derive(Debug, Clone, Default)]
pub struct Cancel(Arc<Flag>);

impl Cancel {
    /// A flag that is not set.
    pub fn new() -> Cancel {
        Cancel::default()
    }

    /// Sets the flag; running sandboxes notice within a few tens of milliseconds.
    pub fn cancel(&self) {
        // A signal number recorded first is kept.
        let _ = self
            .0
            .state
            .compare_exchange(0, BY_CALLER, Ordering::SeqCst, Ordering::SeqCst);
    }

    /// Whether the flag is set.
    pub fn is_cancelled(&self) -> bool {
        self.0.state.load(Ordering::SeqCst) != 0
    }

    /// The signal that set the flag (`SIGINT` = 2, …), if a signal did.
    ///
    /// Lets the command line exit as the shell expects (128 + signal).
    pub fn signal(&self) -> Option<i32> {
        match self.0.state.load(Ordering::SeqCst) {
            s if s > 0 => Some(s),
            _ => None,
        }
    }
}

static INTERRUPT: OnceLock<Cancel> = OnceLock::new();
/// The flag the signal handler sets; points into `INTERRUPT`, which lives
/// for the rest of the process.
static HANDLER_FLAG: AtomicPtr<Flag> = AtomicPtr::new(std::ptr::null_mut());

extern "C" fn on_interrupt(signal: libc::c_int) {
    // Async-signal-safe: one atomic load and one atomic compare-exchange.
    let flag = HANDLER_FLAG.load(Ordering::SeqCst);
    if !flag.is_null() {
        // SAFETY: the pointer comes from an Arc kept alive by `INTERRUPT`.
        let flag = unsafe { &*flag };
        let _ = flag
            .state
            .compare_exchange(0, signal, Ordering::SeqCst, Ordering::SeqCst);
    }
}

/// Makes SIGINT, SIGTERM and SIGHUP cancel every sandbox watching the
/// returned flag, instead of killing the parent outright.
///
/// Calling it again returns the same flag. The handler only sets an atomic
/// flag; the supervision loops notice it, kill their process groups and
/// return. Each handler is installed with `SA_RESETHAND`, so a second Ctrl-C
/// kills the parent the ordinary way if it is stuck. Children never see the
/// terminal's Ctrl-C themselves: each runs in its own session.
pub fn install_interrupt_handler() -> Cancel {
    INTERRUPT
        .get_or_init(|| {
            let cancel = Cancel::new();
            HANDLER_FLAG.store(Arc::as_ptr(&cancel.0).cast_mut(), Ordering::SeqCst);
            let action = SigAction::new(
                SigHandler::Handler(on_interrupt),
                SaFlags::SA_RESTART | SaFlags::SA_RESETHAND,
                SigSet::empty(),
            );
            for signal in [Signal::SIGINT, Signal::SIGTERM, Signal::SIGHUP] {
                // SAFETY: the handler is async-signal-safe (see above). It
                // cannot fail for these valid, catchable signals.
                let _ = unsafe { sigaction(signal, &action) };
            }
            cancel
        })
        .clone()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cancel_is_shared_by_clones() {
        let a = Cancel::new();
        let b = a.clone();
        assert!(!b.is_cancelled());
        a.cancel();
        assert!(b.is_cancelled());
        assert_eq!(b.signal(), None);
    }
}
