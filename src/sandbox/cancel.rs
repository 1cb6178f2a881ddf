//! Cancellation: a flag that every running sandbox watches, set by the
//! caller or by SIGINT / SIGTERM / SIGHUP — but never by a signal that a
//! probe sent. In namespaces a probe cannot see this process at all;
//! without them the handler looks at who sent the signal and ignores it
//! when the sender descends from a running sandbox ([`ProbeSession`]).

use nix::sys::signal::{SaFlags, SigAction, SigHandler, SigSet, Signal, sigaction};
use std::sync::atomic::{AtomicI32, AtomicPtr, AtomicU32, Ordering};
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

/// Genuine interrupts received so far: the second one ends the process.
static RECEIVED: AtomicU32 = AtomicU32::new(0);

/// The pids that lead running sandboxes without a pid namespace (their
/// reapers, or children without one): a signal from one of them or from a
/// descendant is a probe's.
static PROBE_SESSIONS: [AtomicI32; 256] = [const { AtomicI32::new(0) }; 256];

/// A running sandbox whose processes the interrupt handler does not obey;
/// dropping it forgets the sandbox.
pub(crate) struct ProbeSession(Option<usize>);

impl ProbeSession {
    /// Registers `pid` (a sandbox's reaper, or its child without one).
    pub(crate) fn register(pid: i32) -> ProbeSession {
        let slot = PROBE_SESSIONS.iter().position(|s| {
            s.compare_exchange(0, pid, Ordering::SeqCst, Ordering::SeqCst)
                .is_ok()
        });
        ProbeSession(slot)
    }
}

impl Drop for ProbeSession {
    fn drop(&mut self) {
        if let Some(slot) = self.0 {
            PROBE_SESSIONS[slot].store(0, Ordering::SeqCst);
        }
    }
}

/// Whether `pid` or one of its ancestors leads a running sandbox.
/// Async-signal-safe: reads `/proc/PID/stat` with raw system calls into a
/// buffer on the stack. A sender that is already gone cannot be placed
/// and counts as no probe.
fn sent_by_probe(mut pid: i32) -> bool {
    for _ in 0..64 {
        if pid <= 1 {
            return false;
        }
        if PROBE_SESSIONS
            .iter()
            .any(|s| s.load(Ordering::SeqCst) == pid)
        {
            return true;
        }
        match parent_of(pid) {
            Some(parent) => pid = parent,
            None => return false,
        }
    }
    false
}

/// The parent of `pid` from `/proc/PID/stat` ("pid (comm) S ppid …"),
/// async-signal-safe.
fn parent_of(pid: i32) -> Option<i32> {
    let mut path = *b"/proc/\0\0\0\0\0\0\0\0\0\0\0/stat\0";
    let mut digits = [0u8; 11];
    let mut n = 0;
    let mut rest = pid;
    while rest > 0 && n < digits.len() {
        digits[n] = b'0' + (rest % 10) as u8;
        rest /= 10;
        n += 1;
    }
    let mut at = 6;
    for i in (0..n).rev() {
        path[at] = digits[i];
        at += 1;
    }
    for &b in b"/stat\0" {
        path[at] = b;
        at += 1;
    }
    let mut buf = [0u8; 512];
    // SAFETY: a NUL-terminated path and a buffer of the size given.
    let read = unsafe {
        let fd = libc::open(path.as_ptr().cast(), libc::O_RDONLY | libc::O_CLOEXEC);
        if fd < 0 {
            return None;
        }
        let read = libc::read(fd, buf.as_mut_ptr().cast(), buf.len());
        libc::close(fd);
        read
    };
    let text = buf.get(..usize::try_from(read).ok()?)?;
    let close = text.iter().rposition(|b| *b == b')')?;
    // ") S ppid"
    let mut ppid: i32 = 0;
    let mut seen = false;
    for &b in text.get(close + 4..)? {
        match b {
            b'0'..=b'9' => {
                ppid = ppid.checked_mul(10)?.checked_add(i32::from(b - b'0'))?;
                seen = true;
            }
            _ if seen => break,
            _ => return None,
        }
    }
    seen.then_some(ppid)
}

extern "C" fn on_interrupt(
    signal: libc::c_int,
    info: *mut libc::siginfo_t,
    _context: *mut libc::c_void,
) {
    // SAFETY: the kernel hands a valid siginfo to an SA_SIGINFO handler.
    let (code, sender) = unsafe {
        match info.as_ref() {
            Some(info) => (info.si_code, info.si_pid()),
            None => (0, 0),
        }
    };
    // si_code <= 0: sent by a process (kill, sigqueue, tgkill), which
    // si_pid names; a terminal's Ctrl-C comes from the kernel.
    if code <= 0 && sender > 0 && sent_by_probe(sender) {
        return;
    }
    if RECEIVED.fetch_add(1, Ordering::SeqCst) >= 1 {
        // The second one: end the process the ordinary way.
        // SAFETY: async-signal-safe calls.
        unsafe {
            libc::signal(signal, libc::SIG_DFL);
            libc::raise(signal);
        }
        return;
    }
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
/// return. A second Ctrl-C kills the parent the ordinary way if it is
/// stuck. Children never see the terminal's Ctrl-C themselves: each runs
/// in its own session. A signal sent by a probe (a process that descends
/// from a running sandbox) changes nothing.
pub fn install_interrupt_handler() -> Cancel {
    INTERRUPT
        .get_or_init(|| {
            let cancel = Cancel::new();
            HANDLER_FLAG.store(Arc::as_ptr(&cancel.0).cast_mut(), Ordering::SeqCst);
            let action = SigAction::new(
                SigHandler::SigAction(on_interrupt),
                SaFlags::SA_RESTART | SaFlags::SA_SIGINFO,
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
    fn parents_are_read_from_proc() {
        let me = std::process::id() as i32;
        assert_eq!(parent_of(me), Some(nix::unistd::getppid().as_raw()));
        assert_eq!(parent_of(i32::MAX), None);
        let session = ProbeSession::register(nix::unistd::getppid().as_raw());
        assert!(sent_by_probe(me));
        drop(session);
        assert!(!sent_by_probe(me));
    }

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
