//! Processes that outlived their probe: what each one was, where it had
//! gone, and a summary for reports.

use super::procfs::{self, Stat};
use serde::{Deserialize, Serialize};
use std::fmt;

/// A process that outlived the probe's child (or left its process group
/// while the child was still running) and was found when the run ended.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Leak {
    /// Its pid when it was found.
    pub pid: i32,
    /// Its command line, arguments joined by spaces (at most 1 KiB).
    pub cmdline: String,
    /// Where it was relative to the child.
    pub place: Place,
    /// Whether it still held the child's stdout or stderr open.
    pub held_output: bool,
    /// Whether the sandbox killed it. Always true under a reaper; without
    /// one, a process outside the child's process group that still held
    /// the output is found but left running.
    pub killed: bool,
}

/// Where a leaked process was, relative to the child.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Place {
    /// Still in the child's process group (a plain background process).
    ChildGroup,
    /// In a process group of its own (`setpgid`, Python's `process_group=0`:
    /// compile servers, worker pools).
    OwnGroup,
    /// In a session of its own (`setsid`, a daemon).
    OwnSession,
}

impl Leak {
    /// Describes the live process `stat` against the child's process group
    /// and session; `pipes` are the inodes of the child's output pipes.
    pub(crate) fn observe(stat: &Stat, child: Placement, pipes: &[u64], killed: bool) -> Leak {
        let place = if stat.pgrp == child.pgrp {
            Place::ChildGroup
        } else if stat.session == child.session {
            Place::OwnGroup
        } else {
            Place::OwnSession
        };
        Leak {
            pid: stat.pid,
            // A probe's process names itself: shown, never obeyed.
            cmdline: crate::text::printable_line(&procfs::cmdline(stat.pid)).into_owned(),
            place,
            held_output: procfs::holds_pipe(stat.pid, pipes),
            killed,
        }
    }
}

/// The child's process group and session, against which a leak is placed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Placement {
    pub(crate) pgrp: i32,
    pub(crate) session: i32,
}

impl fmt::Display for Place {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Place::ChildGroup => "in the child's process group",
            Place::OwnGroup => "in a process group of its own",
            Place::OwnSession => "in a session of its own",
        })
    }
}

impl fmt::Display for Leak {
    /// `pid 4242 (sleep 300): in a process group of its own, held the output open, killed`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "pid {} ({}): {}", self.pid, self.cmdline, self.place)?;
        if self.held_output {
            f.write_str(", held the output open")?;
        }
        f.write_str(if self.killed {
            ", killed"
        } else {
            ", still running"
        })
    }
}

/// One line for reports: every leak, in the order found; `None` when there
/// is none.
pub(crate) fn summary(leaks: &[Leak]) -> Option<String> {
    match leaks {
        [] => None,
        [one] => Some(format!("1 process outlived the probe: {one}")),
        many => Some(format!(
            "{} processes outlived the probe: {}",
            many.len(),
            many.iter()
                .map(Leak::to_string)
                .collect::<Vec<_>>()
                .join("; ")
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn leak(pid: i32, place: Place, held_output: bool, killed: bool) -> Leak {
        Leak {
            pid,
            cmdline: "sleep 300".into(),
            place,
            held_output,
            killed,
        }
    }

    #[test]
    fn summary_names_every_process() {
        assert_eq!(summary(&[]), None);
        assert_eq!(
            summary(&[leak(7, Place::OwnGroup, false, true)]).as_deref(),
            Some(
                "1 process outlived the probe: pid 7 (sleep 300): in a process group of its own, killed"
            )
        );
        let two = summary(&[
            leak(7, Place::ChildGroup, true, true),
            leak(8, Place::OwnSession, true, false),
        ])
        .expect("a summary");
        assert_eq!(
            two,
            "2 processes outlived the probe: \
             pid 7 (sleep 300): in the child's process group, held the output open, killed; \
             pid 8 (sleep 300): in a session of its own, held the output open, still running"
        );
    }

    #[test]
    fn placed_against_the_childs_group_and_session() {
        let me = procfs::stat(std::process::id() as i32).expect("own stat");
        let at = |pgrp, session| Leak::observe(&me, Placement { pgrp, session }, &[], true).place;
        assert_eq!(at(me.pgrp, me.session), Place::ChildGroup);
        assert_eq!(at(-1, me.session), Place::OwnGroup);
        assert_eq!(at(-1, -1), Place::OwnSession);
    }

    #[test]
    fn json_form_is_stable() {
        let json = serde_json::to_value(leak(7, Place::OwnSession, false, true)).expect("json");
        assert_eq!(
            json,
            serde_json::json!({
                "pid": 7, "cmdline": "sleep 300", "place": "own_session",
                "held_output": false, "killed": true,
            })
        );
    }
}
