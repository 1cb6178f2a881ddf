//! What the fingerprint keeps between calls, and the seam through which it
//! keeps it: versions that tools printed, keyed by the tool's `stat`, and
//! measured facts, keyed by the fast fingerprint.
//!
//! The fingerprint sits below the cache in the layers, so it never knows
//! where or how facts are stored: it is handed a [`FactStore`] from above
//! (the cache implements it; [`NoStore`] remembers nothing).

use super::full::Measured;
use serde::{Deserialize, Serialize};
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

/// Where slow-to-learn facts about this machine are kept between calls.
///
/// Keeping is best effort: a store that cannot write (a read-only cache)
/// forgets, and the fact is measured again next time.
pub trait FactStore: Sync {
    /// The measured facts for the machine whose fast fingerprint hashes to
    /// `fast_hash`, if kept.
    fn measured(&self, fast_hash: &str) -> Option<MeasuredFacts>;
    /// Keep measured facts under `fast_hash`.
    fn keep_measured(&self, fast_hash: &str, facts: &MeasuredFacts);
    /// Every environment's measured facts kept, in no order.
    fn every_measured(&self) -> Vec<MeasuredFacts> {
        Vec::new()
    }
    /// What `tool` (a canonical path) answered when last asked, if kept.
    fn tool_answer(&self, tool: &Path) -> Option<ToolAnswer>;
    /// Keep what `tool` (a canonical path) answered.
    fn keep_tool_answer(&self, tool: &Path, answer: &ToolAnswer);
}

/// A store that remembers nothing: every fact is found out again.
#[derive(Debug, Clone, Copy, Default)]
pub struct NoStore;

impl FactStore for NoStore {
    fn measured(&self, _: &str) -> Option<MeasuredFacts> {
        None
    }
    fn keep_measured(&self, _: &str, _: &MeasuredFacts) {}
    fn tool_answer(&self, _: &Path) -> Option<ToolAnswer> {
        None
    }
    fn keep_tool_answer(&self, _: &Path, _: &ToolAnswer) {}
}

/// Measured facts with the `stat` of the interpreter and of the driver
/// library (`PREFLIGHT_LIBCUDA`) that told them, so that a replaced one is
/// asked again.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct MeasuredFacts {
    /// The interpreter's `stat` then; `None`: there was none.
    pub interpreter: Option<Stat>,
    /// The `stat` of the driver library named by `PREFLIGHT_LIBCUDA` then;
    /// `None`: none was named (the system's `libcuda.so.1`).
    pub libcuda: Option<Stat>,
    /// What the measuring children reported.
    pub measured: Measured,
    /// The interpreter as it was named (its path); `None`: none, or kept
    /// before the path was: what `labels` names when another environment
    /// of this machine has the verdicts.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub interpreter_path: Option<PathBuf>,
}

/// What identifies a file's content without reading it.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Stat {
    size: u64,
    mtime_ns: i128,
    ctime_ns: i128,
    inode: u64,
    device: u64,
}

impl Stat {
    /// The `stat` of a file, following symbolic links.
    pub fn of(path: &Path) -> Option<Stat> {
        let m = crate::seen::metadata(path).ok()?;
        Some(Stat {
            size: m.size(),
            mtime_ns: i128::from(m.mtime()) * 1_000_000_000 + i128::from(m.mtime_nsec()),
            ctime_ns: i128::from(m.ctime()) * 1_000_000_000 + i128::from(m.ctime_nsec()),
            inode: m.ino(),
            device: m.dev(),
        })
    }
}

/// What a tool said about its version, and the `stat` it had then.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ToolAnswer {
    /// The tool's `stat` when it was asked.
    pub stat: Stat,
    /// The version it printed, if it printed one.
    pub version: Option<String>,
    /// Why it gave none (failed to start, exit status, unreadable output).
    pub problem: Option<String>,
}

/// What asking a tool for its version gave.
pub(crate) enum Asked {
    /// It printed this version.
    Version(String),
    /// It cannot say (exit status, unreadable output): a fact about it.
    Failed(String),
    /// It could not be asked this time (did not start in time, timed out).
    Inconclusive(String),
}

/// Tool answers through a [`FactStore`], by canonical path.
pub(crate) struct ToolAnswers<'a> {
    store: &'a dyn FactStore,
}

impl<'a> ToolAnswers<'a> {
    pub(crate) fn new(store: &'a dyn FactStore) -> Self {
        ToolAnswers { store }
    }

    /// The answer for `tool` if its `stat` is unchanged; otherwise ask
    /// `measure` and keep what it said, unless the answer was inconclusive
    /// (a timeout says nothing about the tool).
    pub(crate) fn answer(&self, tool: &Path, measure: impl FnOnce() -> Asked) -> ToolAnswer {
        let canonical: PathBuf =
            crate::fs::canonicalize(tool).unwrap_or_else(|_| tool.to_path_buf());
        let stat = Stat::of(tool);
        if let Some(stat) = &stat
            && let Some(hit) = self.store.tool_answer(&canonical)
            && &hit.stat == stat
        {
            return hit;
        }
        crate::seen::taint("a tool was asked its version");
        let (version, problem, keep) = match measure() {
            Asked::Version(v) => (Some(v), None, true),
            Asked::Failed(e) => (None, Some(e), true),
            Asked::Inconclusive(e) => (None, Some(e), false),
        };
        let answer = ToolAnswer {
            stat: stat.clone().unwrap_or_default(),
            version,
            problem,
        };
        if keep && stat.is_some() {
            self.store.keep_tool_answer(&canonical, &answer);
        }
        answer
    }
}
