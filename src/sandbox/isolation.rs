//! Which isolation a probe gets: its own pid and mount namespaces (and a
//! user namespace when `preflight` is not root), or, where Linux refuses
//! them, only a session of its own. Found out once per process, by the
//! first sandbox that needs it; a refusal found by a later run holds for
//! every run after it.

use nix::sched::CloneFlags;
use serde::Serialize;
use std::sync::Mutex;

/// How a sandboxed probe is kept apart from the rest of the machine.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Isolation {
    /// Each probe in a pid namespace of its own (its reaper is the init)
    /// and a mount namespace of its own: a fresh `/proc`, a private bounded
    /// `/tmp`, the outcome cache and hub token out of sight, the variant's
    /// files read-only.
    Namespaces {
        /// Whether a user namespace holds them (preflight is not root, or
        /// root lacks the capability to make namespaces directly).
        user_namespace: bool,
    },
    /// Linux refused the namespaces: each probe runs in a session and
    /// process group of its own, and can see and reach what its user can.
    Session {
        /// Why there are no namespaces (`clone: Operation not permitted`).
        reason: String,
    },
}

/// What a probe can do when it has no namespaces of its own, one phrase
/// each: the warning names them.
pub const MISSING_WITHOUT_NAMESPACES: &[&str] = &[
    "see preflight and every other process of this user",
    "read this user's files, the hub token among them",
    "rewrite the outcome cache and other probes' results",
    "kill or stop its reaper and leave processes behind",
];

impl Isolation {
    /// The one warning to print when probes run without namespaces; `None`
    /// when they have them.
    pub fn warning(&self) -> Option<String> {
        match self {
            Isolation::Namespaces { .. } => None,
            Isolation::Session { reason } => Some(format!(
                "probes run without namespaces ({reason}): a probe can {}; \
                 its result is evidence against a broken kernel, not a hostile one",
                MISSING_WITHOUT_NAMESPACES.join(", ")
            )),
        }
    }

    /// A short phrase for tables: `pid, mount and user namespaces`.
    pub fn describe(&self) -> String {
        match self {
            Isolation::Namespaces {
                user_namespace: true,
            } => "pid, mount and user namespaces".to_owned(),
            Isolation::Namespaces {
                user_namespace: false,
            } => "pid and mount namespaces".to_owned(),
            Isolation::Session { reason } => format!("own session only ({reason})"),
        }
    }
}

/// How the namespaces of a probe are made.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Mode {
    /// preflight is root with the capabilities to make pid and mount
    /// namespaces itself.
    Root,
    /// A user namespace first, in which the reaper is root.
    User,
}

impl Mode {
    /// The `clone` flags that put the reaper into the probe's namespaces.
    pub(crate) fn flags(self) -> CloneFlags {
        let ns = CloneFlags::CLONE_NEWPID | CloneFlags::CLONE_NEWNS;
        match self {
            Mode::Root => ns,
            Mode::User => ns | CloneFlags::CLONE_NEWUSER,
        }
    }
}

/// What this process knows so far.
#[derive(Debug, Clone, PartialEq, Eq)]
enum State {
    /// No sandbox has tried yet.
    Unknown,
    /// This mode worked.
    Works(Mode),
    /// Refused, and why.
    Refused(String),
}

static STATE: Mutex<State> = Mutex::new(State::Unknown);

fn state() -> State {
    STATE.lock().map_or(State::Unknown, |s| s.clone())
}

fn set(new: State) {
    if let Ok(mut state) = STATE.lock() {
        *state = new;
    }
}

/// The modes to try, best first: none once namespaces were refused.
pub(crate) fn candidates() -> Vec<Mode> {
    match state() {
        State::Works(mode) => vec![mode],
        State::Refused(_) => Vec::new(),
        State::Unknown if nix::unistd::geteuid().is_root() => vec![Mode::Root, Mode::User],
        State::Unknown => vec![Mode::User],
    }
}

/// Records that `mode` made a working sandbox.
pub(crate) fn worked(mode: Mode) {
    if state() == State::Unknown {
        set(State::Works(mode));
    }
}

/// Records that namespaces cannot be had here, and why; from now on every
/// probe runs in a session of its own, and this process is made
/// non-dumpable so that probes of its user cannot read its memory,
/// environment or descriptors through `/proc`.
pub(crate) fn refuse(reason: String) {
    let _ = nix::sys::prctl::set_dumpable(false);
    set(State::Refused(reason));
}

/// The isolation new sandboxes get. Before any sandbox ran, this tries
/// once to make the namespaces (a child that exits at once), so that a
/// command whose answers all came from the cache can still say it; `None`
/// when that try failed for a reason that may pass (no process could be
/// made at all), so that nothing is known.
pub fn isolation() -> Option<Isolation> {
    if state() == State::Unknown {
        try_modes();
    }
    match state() {
        State::Works(mode) => Some(Isolation::Namespaces {
            user_namespace: mode == Mode::User,
        }),
        State::Refused(reason) => Some(Isolation::Session { reason }),
        State::Unknown => None,
    }
}

/// Whether `clone` failing with `errno` means that the namespaces cannot
/// be had here (rather than that no process could be made right now).
pub(crate) fn refusal(errno: nix::errno::Errno) -> bool {
    use nix::errno::Errno;
    matches!(
        errno,
        Errno::EPERM | Errno::EINVAL | Errno::ENOSPC | Errno::EUSERS | Errno::ENOSYS
    )
}

/// Clones a child that exits at once in each candidate mode: the first
/// that the kernel allows is recorded, or the refusal of the last.
fn try_modes() {
    let mut last = None;
    for mode in candidates() {
        let mut stack = vec![0u8; 16 * 1024];
        // SAFETY: the child calls `_exit` only.
        let cloned = unsafe {
            nix::sched::clone(
                Box::new(|| libc::_exit(0)),
                &mut stack,
                mode.flags(),
                Some(libc::SIGCHLD),
            )
        };
        match cloned {
            Ok(pid) => {
                let _ = nix::sys::wait::waitpid(pid, None);
                worked(mode);
                return;
            }
            Err(e) if refusal(e) => last = Some(e),
            Err(_) => return,
        }
    }
    if let Some(errno) = last {
        refuse(format!("clone: {}", errno.desc()));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_warning_names_every_missing_guarantee() {
        let session = Isolation::Session {
            reason: "clone: Operation not permitted".into(),
        };
        let warning = session.warning().expect("a warning");
        for missing in MISSING_WITHOUT_NAMESPACES {
            assert!(warning.contains(missing), "{warning}");
        }
        assert!(warning.contains("clone: Operation not permitted"));
        assert_eq!(
            Isolation::Namespaces {
                user_namespace: true
            }
            .warning(),
            None
        );
    }

    #[test]
    fn json_names_the_kind() {
        let json = serde_json::to_value(Isolation::Namespaces {
            user_namespace: false,
        })
        .expect("json");
        assert_eq!(
            json,
            serde_json::json!({"kind": "namespaces", "user_namespace": false})
        );
    }
}
