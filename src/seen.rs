//! What this process read, when it was asked to remember: every input an
//! answer depended on, so that another process can tell, without running
//! this binary, whether the same question would get the same answer now.
//!
//! `check --cached --ticket FILE` records while it answers and writes the
//! record beside its answer (a *ticket*); the Python package's flag reads
//! the ticket and re-checks each read in-process (`kernel_preflight/
//! _ticket.py`), so that a warm `get_kernel` starts no child at all
//! (docs/flag.md, "The warm path").
//!
//! Every read that can decide an answer goes through the recording helpers
//! ([`crate::fs`], [`crate::fingerprint::Sources`]'s variables); the test
//! `tests/ticket.rs` compares a ticket with what `strace` saw the same run
//! do, so a read that bypasses them is found. A read is kept as what
//! proves it unchanged most cheaply:
//!
//! - an ordinary file or folder: its `stat` (size, modification and status
//!   change times, inode, device), trusted only when taken well after the
//!   file last changed ([`RACY_NS`]);
//! - under `/sys`, `/proc` and `/dev` (or their test stand-ins), whose
//!   times say nothing of their content: the bytes read, the names listed,
//!   the kind of file found;
//! - `/proc/cpuinfo`, whose first processor's block includes its clock:
//!   the boot's id, since a CPU's model and flags do not change within one
//!   boot;
//! - a variable: its value, or that it was unset.
//!
//! Anything that cannot be re-checked that way (a child process that
//! measured something, a remote store, a path that is not UTF-8) *taints*
//! the record, and no ticket is written.

use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::ffi::OsString;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, Ordering};

/// Format of a [`Read`] list; a reader that knows another one ignores the
/// ticket.
pub const SCHEMA: u32 = 1;

/// A `stat` taken this soon after its file changed is not trusted (git's
/// "racy" rule): a change within one tick of the file system's clock could
/// hide behind an equal modification time. The outcome cache's warm
/// records follow the same rule.
pub const RACY_NS: i128 = 2_000_000_000;

/// The wall clock in ns since the epoch, as file times count.
pub fn now_ns() -> i128 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos() as i128)
}

/// One read and what it found.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "read", rename_all = "snake_case")]
pub enum Read {
    /// A `stat` (links followed) of an ordinary file or folder; `seen`:
    /// `None` when there was nothing there.
    Stat {
        /// The path as it was asked.
        path: String,
        /// What the `stat` showed.
        seen: Option<Seen>,
    },
    /// A live file's content (base64): `None` when it could not be read.
    Content {
        /// The path as it was asked.
        path: String,
        /// The bytes, base64.
        bytes: Option<String>,
    },
    /// A live folder's entries, sorted; `None` when it could not be listed.
    Listing {
        /// The path as it was asked.
        path: String,
        /// The names.
        names: Option<Vec<String>>,
    },
    /// The kind of a live path (`file`, `dir`, `other`); `None`: absent.
    Kind {
        /// The path as it was asked.
        path: String,
        /// What it was.
        kind: Option<String>,
    },
    /// Where a path leads with every link resolved; `None`: nowhere.
    Resolved {
        /// The path as it was asked.
        path: String,
        /// The absolute path it leads to.
        to: Option<String>,
    },
    /// An environment variable's value; `None`: unset.
    Var {
        /// Its name.
        name: String,
        /// Its value.
        value: Option<String>,
    },
    /// Every environment variable whose name starts with `prefix`.
    Prefix {
        /// The prefix.
        prefix: String,
        /// Those set, with their values.
        vars: BTreeMap<String, String>,
    },
}

/// What identifies a file's (or a folder's) content without reading it:
/// what a ticket keeps of an ordinary file, and what the outcome cache's
/// warm records keep of theirs (`cache::warm`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Seen {
    /// Size in bytes; `None` for a folder, whose listing the modification
    /// time and inode vouch for.
    pub size: Option<u64>,
    /// Modification time (ns since the epoch).
    pub mtime_ns: i128,
    /// Inode: a file replaced by a rename (an atomic write) is another one.
    pub ino: u64,
    /// Status change time (ns since the epoch): a file rewritten in place
    /// with its size and modification time put back still shows here,
    /// since no call sets it.
    #[serde(default)]
    pub ctime_ns: i128,
    /// The device: the same inode number on another file system is
    /// another file.
    #[serde(default)]
    pub dev: u64,
}

impl Seen {
    /// What `meta` (a `stat` following links) shows; a folder's size is
    /// left out.
    pub fn of(meta: &std::fs::Metadata) -> Seen {
        let ns = |s: i64, n: i64| i128::from(s) * 1_000_000_000 + i128::from(n);
        Seen {
            size: (!meta.is_dir()).then_some(meta.len()),
            mtime_ns: ns(meta.mtime(), meta.mtime_nsec()),
            ino: meta.ino(),
            ctime_ns: ns(meta.ctime(), meta.ctime_nsec()),
            dev: meta.dev(),
        }
    }
}

/// The record being made.
#[derive(Debug, Default)]
struct Record {
    reads: Vec<Read>,
    /// Folders whose files' times say nothing of their content.
    live: Vec<PathBuf>,
    /// Why no ticket may be made of this record, once something said so.
    tainted: Option<String>,
}

static RECORDING: AtomicBool = AtomicBool::new(false);
static RECORD: Mutex<Option<Record>> = Mutex::new(None);

/// Start recording what this process reads: from now on, every recorded
/// read is kept. `/sys`, `/proc` and `/dev` are live, and so are `live`
/// (their stand-ins, where the fingerprint is pointed elsewhere).
pub fn start(live: &[PathBuf]) {
    let mut roots: Vec<PathBuf> = ["/sys", "/proc", "/dev"].map(PathBuf::from).into();
    roots.extend(live.iter().cloned());
    *lock() = Some(Record {
        live: roots,
        ..Record::default()
    });
    RECORDING.store(true, Ordering::Release);
}

/// Stop recording: the reads made since [`start`], each once, or why they
/// cannot make a ticket. `Err` too when nothing was recording, and when an
/// ordinary file was seen too soon after it changed for its `stat` to
/// vouch for it (`now_ns`: when the answer was complete).
pub fn finish(now_ns: i128) -> Result<Vec<Read>, String> {
    RECORDING.store(false, Ordering::Release);
    let record = lock().take().ok_or("nothing was recorded")?;
    if let Some(why) = record.tainted {
        return Err(why);
    }
    let mut out: Vec<Read> = Vec::with_capacity(record.reads.len());
    for read in record.reads {
        if let Read::Stat {
            path,
            seen: Some(s),
        } = &read
            && now_ns - s.mtime_ns < RACY_NS
        {
            return Err(format!("{path} changed too recently to be vouched for"));
        }
        if !out.contains(&read) {
            out.push(read);
        }
    }
    Ok(out)
}

fn lock() -> std::sync::MutexGuard<'static, Option<Record>> {
    RECORD
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// Whether a record is being made (one atomic load: the helpers ask it
/// first, so that recording costs nothing when no ticket is wanted).
pub fn recording() -> bool {
    RECORDING.load(Ordering::Acquire)
}

/// Keep what `f` makes of the record and the path (as UTF-8), when
/// recording; a path that is not UTF-8 taints the record.
fn with(path: &Path, f: impl FnOnce(&Record, String) -> Read) {
    push(|record| match path.to_str() {
        Some(text) => Ok(f(record, text.to_string())),
        None => Err(format!("{} is not UTF-8", path.display())),
    });
}

/// Keep the read `f` makes of the record, or taint it with `f`'s reason,
/// when recording.
fn push(f: impl FnOnce(&Record) -> Result<Read, String>) {
    if !recording() {
        return;
    }
    let mut guard = lock();
    let Some(record) = guard.as_mut() else {
        return;
    };
    match f(record) {
        Ok(read) => record.reads.push(read),
        Err(why) => taint_record(record, why),
    }
}

fn taint_record(record: &mut Record, why: String) {
    record.tainted.get_or_insert(why);
}

/// Nothing read from now on can make a ticket, for the reason given (a
/// child measured the machine; a remote store answered).
pub fn taint(why: &str) {
    if !recording() {
        return;
    }
    if let Some(record) = lock().as_mut() {
        taint_record(record, why.to_string());
    }
}

impl Record {
    fn is_live(&self, path: &Path) -> bool {
        self.live.iter().any(|root| path.starts_with(root))
    }
}

fn kind(meta: &std::fs::Metadata) -> String {
    match () {
        () if meta.is_dir() => "dir",
        () if meta.is_file() => "file",
        () => "other",
    }
    .into()
}

fn text(name: &std::ffi::OsStr) -> Option<String> {
    name.to_str().map(str::to_string)
}

/// A `stat` of `path` (links followed) and what it found.
pub fn stat(path: &Path, meta: Option<&std::fs::Metadata>) {
    with(path, |record, path_text| {
        if record.is_live(Path::new(&path_text)) {
            Read::Kind {
                path: path_text,
                kind: meta.map(kind),
            }
        } else {
            Read::Stat {
                path: path_text,
                seen: meta.map(Seen::of),
            }
        }
    });
}

/// The content of the file at `path` was read: `found` is its `stat`
/// (taken on the open file) and its bytes, or `None` when it could not be
/// read.
pub fn content(path: &Path, found: Option<(&std::fs::Metadata, &[u8])>) {
    use base64::Engine;
    with(path, |record, path_text| {
        if record.is_live(Path::new(&path_text)) {
            Read::Content {
                path: path_text,
                bytes: found.map(|(_, b)| base64::engine::general_purpose::STANDARD.encode(b)),
            }
        } else {
            // Not read (a folder, a FIFO, nothing): what is there now.
            let seen = match found {
                Some((m, _)) => Some(Seen::of(m)),
                None => std::fs::metadata(&path_text).ok().map(|m| Seen::of(&m)),
            };
            Read::Stat {
                path: path_text,
                seen,
            }
        }
    });
}

/// The folder `path` was listed: its entries' names, or `None`.
pub fn listing(path: &Path, names: Option<&[OsString]>) {
    if !recording() {
        return;
    }
    // An ordinary folder's listing is vouched for by its own `stat`
    // (adding, removing or renaming an entry changes its times), taken
    // now: a change since the listing is too recent to be trusted.
    let live = lock().as_ref().is_some_and(|r| r.is_live(path));
    if !live {
        stat(path, std::fs::metadata(path).ok().as_ref());
        return;
    }
    let names = names.map(|n| n.iter().map(|n| text(n)).collect::<Option<Vec<String>>>());
    if let Some(None) = names {
        taint(&format!(
            "{} holds a name that is not UTF-8",
            path.display()
        ));
        return;
    }
    let mut names = names.flatten();
    if let Some(n) = names.as_mut() {
        n.sort();
    }
    with(path, |_, path| Read::Listing { path, names });
}

/// `path` was resolved to `to` (links followed), or to nothing.
pub fn resolved(path: &Path, to: Option<&Path>) {
    if !recording() {
        return;
    }
    let to = match to.map(|t| t.to_str()) {
        Some(None) => {
            taint(&format!(
                "{} resolves to a path that is not UTF-8",
                path.display()
            ));
            return;
        }
        other => other.flatten().map(str::to_string),
    };
    with(path, |_, path| Read::Resolved { path, to });
}

/// The variable `name` was read and held `value`.
pub fn var(name: &str, value: Option<&str>) {
    push(|_| {
        Ok(Read::Var {
            name: name.to_string(),
            value: value.map(str::to_string),
        })
    });
}

/// Every variable whose name starts with `prefix` was read: `all` is the
/// whole environment they were picked from.
pub fn prefix(prefix: &str, all: &BTreeMap<String, String>) {
    push(|_| {
        Ok(Read::Prefix {
            prefix: prefix.to_string(),
            vars: all
                .iter()
                .filter(|(k, _)| k.starts_with(prefix))
                .map(|(k, v)| (k.clone(), v.clone()))
                .collect(),
        })
    });
}

/// [`std::env::var_os`], recorded; a value that is not UTF-8 taints the
/// record.
pub fn env_var_os(name: &str) -> Option<OsString> {
    let value = std::env::var_os(name);
    if recording() {
        match value.as_ref().map(|v| v.to_str()) {
            Some(None) => taint(&format!("${name} is not UTF-8")),
            other => var(name, other.flatten()),
        }
    }
    value
}

/// [`std::fs::metadata`], recorded.
pub fn metadata(path: &Path) -> std::io::Result<std::fs::Metadata> {
    let meta = std::fs::metadata(path);
    stat(path, meta.as_ref().ok());
    meta
}

/// Whether `path` is a regular file (links followed), recorded.
pub fn is_file(path: &Path) -> bool {
    metadata(path).is_ok_and(|m| m.is_file())
}

/// Whether `path` is a folder (links followed), recorded.
pub fn is_dir(path: &Path) -> bool {
    metadata(path).is_ok_and(|m| m.is_dir())
}

/// Whether something is at `path` (links followed), recorded.
pub fn exists(path: &Path) -> bool {
    metadata(path).is_ok()
}

/// The names of the entries of the folder `path`, unsorted; empty when it
/// cannot be listed. Recorded.
pub fn names(path: &Path) -> Vec<OsString> {
    let found: Option<Vec<OsString>> = std::fs::read_dir(path)
        .ok()
        .map(|entries| entries.flatten().map(|e| e.file_name()).collect());
    listing(path, found.as_deref());
    found.unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The recorder is one per process: the tests that record take turns.
    /// (Other tests of this binary may read through the helpers meanwhile,
    /// or run a child: a record is looked at only for its own folder, and
    /// a refusal only for being one.)
    static TURN: Mutex<()> = Mutex::new(());

    fn recorded(live: &[PathBuf], f: impl FnOnce()) -> Result<Vec<Read>, String> {
        let _turn = TURN
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        start(live);
        f();
        finish(super::now_ns())
    }

    fn path_of(read: &Read) -> Option<&str> {
        match read {
            Read::Stat { path, .. }
            | Read::Content { path, .. }
            | Read::Listing { path, .. }
            | Read::Kind { path, .. }
            | Read::Resolved { path, .. } => Some(path),
            Read::Var { .. } | Read::Prefix { .. } => None,
        }
    }

    fn aged(path: &Path) {
        let ago = std::time::SystemTime::now() - std::time::Duration::from_secs(60);
        std::fs::File::options()
            .write(true)
            .open(path)
            .or_else(|_| std::fs::File::open(path))
            .unwrap()
            .set_modified(ago)
            .unwrap();
    }

    #[test]
    fn an_ordinary_file_is_kept_by_its_stat_a_live_one_by_its_bytes() {
        let dir = tempfile::tempdir().unwrap();
        let live = dir.path().join("sys");
        std::fs::create_dir_all(live.join("b")).unwrap();
        std::fs::write(live.join("a"), "550.54\n").unwrap();
        let plain = dir.path().join("plain");
        std::fs::write(&plain, "x").unwrap();
        aged(&plain);
        let reads = recorded(std::slice::from_ref(&live), || {
            crate::fs::read_small(&plain).unwrap();
            crate::fs::read_small(&live.join("a")).unwrap();
            assert!(is_dir(&live.join("b")));
            names(&live);
            // Twice: kept once.
            crate::fs::read_small(&plain).unwrap();
            let _ = crate::fs::read_small(&dir.path().join("absent"));
        })
        .unwrap();
        let root = dir.path().to_str().unwrap();
        let reads: Vec<Read> = reads
            .into_iter()
            .filter(|r| path_of(r).is_some_and(|p| p.starts_with(root)))
            .collect();
        let text = |p: &Path| p.to_str().unwrap().to_string();
        assert_eq!(reads.len(), 5, "{reads:#?}");
        assert!(
            matches!(&reads[0], Read::Stat { path, seen: Some(s) } if *path == text(&plain) && s.size == Some(1))
        );
        assert_eq!(
            reads[1],
            Read::Content {
                path: text(&live.join("a")),
                bytes: Some("NTUwLjU0Cg==".into())
            }
        );
        assert_eq!(
            reads[2],
            Read::Kind {
                path: text(&live.join("b")),
                kind: Some("dir".into())
            }
        );
        assert_eq!(
            reads[3],
            Read::Listing {
                path: text(&live),
                names: Some(vec!["a".into(), "b".into()])
            }
        );
        assert!(matches!(&reads[4], Read::Stat { seen: None, .. }));
    }

    #[test]
    fn a_fresh_file_a_taint_or_nothing_recorded_makes_no_record() {
        let dir = tempfile::tempdir().unwrap();
        let fresh = dir.path().join("fresh");
        std::fs::write(&fresh, "x").unwrap();
        let found = recorded(&[], || {
            crate::fs::read_small(&fresh).unwrap();
        });
        assert!(found.is_err(), "{found:?}");
        let found = recorded(&[], || taint("a child process ran"));
        assert!(found.is_err(), "{found:?}");
        let _turn = TURN
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        assert!(finish(0).is_err(), "not recording");
        // Not recording: the helpers only read.
        assert!(!recording());
        assert!(is_file(&fresh));
    }
}
