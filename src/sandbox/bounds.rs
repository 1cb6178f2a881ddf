//! How many processes, and how much memory, one probe may take: a cgroup
//! of its own below preflight's, where Linux lets this process make one
//! (cgroup v1's `pids` and `memory` hierarchies, or v2 where preflight's
//! cgroup may enable both controllers for its children), and the
//! `RLIMIT_NPROC` of the probe's own user namespace besides (see
//! `reaper`). A probe that forks until refused, or fills memory, meets
//! its own bound before the run's: the other probes and preflight go on.
//!
//! The bound is at most what [`super::Limits`] allows, and at most half of
//! what the cgroups around preflight leave when the probe starts (their
//! `pids.max` and memory limit, less what they hold), so that a probe
//! that exhausts its own leaves room for the rest of the run.

use std::fs;
use std::os::fd::OwnedFd;
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};
use std::sync::OnceLock;
use std::sync::atomic::{AtomicU64, Ordering};

/// Fewest processes a probe is given, however little the cgroups around
/// preflight leave: an interpreter and a compiler's few.
const MIN_PIDS: u64 = 16;
/// Least memory a probe is given: an interpreter with torch imported.
const MIN_MEMORY: u64 = 256 << 20;
/// What cgroup v1 writes for "no limit" is above this.
const UNLIMITED: u64 = 1 << 62;

/// A bound of one probe that it reached.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(tag = "bound", rename_all = "snake_case")]
pub enum Exhausted {
    /// A fork or a thread was refused: the probe held all the processes
    /// it may (threads count).
    Pids {
        /// The probe's bound.
        max: u64,
    },
    /// The kernel's out-of-memory killer killed a process of the probe
    /// at its memory bound.
    Memory {
        /// The probe's bound, in bytes.
        max: u64,
    },
}

impl std::fmt::Display for Exhausted {
    /// `its bound of 64 processes`, `its memory bound of 512 MiB`.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Exhausted::Pids { max } => write!(f, "its bound of {max} processes and threads"),
            Exhausted::Memory { max } => write!(f, "its memory bound of {} MiB", max >> 20),
        }
    }
}

/// One controller's hierarchy as this process sees it.
#[derive(Debug, Clone)]
struct Hierarchy {
    /// This process's cgroup in it (the folder).
    own: PathBuf,
    /// Where the hierarchy is mounted: the cgroups above `own` up to it
    /// bound it too.
    mount: PathBuf,
    /// cgroup v2 (one hierarchy for both controllers).
    unified: bool,
}

/// The hierarchies of `pids` and `memory` as far as they were found, and
/// whether cgroups can be made in both (or why not).
#[derive(Debug, Clone)]
struct Found {
    pids: Option<Hierarchy>,
    memory: Option<Hierarchy>,
    usable: Result<(), String>,
}

fn found() -> &'static Found {
    static FOUND: OnceLock<Found> = OnceLock::new();
    FOUND.get_or_init(|| {
        let cgroups = fs::read_to_string("/proc/self/cgroup").unwrap_or_default();
        let mountinfo = fs::read_to_string("/proc/self/mountinfo").unwrap_or_default();
        let pids = hierarchy(&cgroups, &mountinfo, "pids");
        let memory = hierarchy(&cgroups, &mountinfo, "memory");
        for own in pids.iter().chain(&memory).map(|h| &h.own) {
            sweep(own);
        }
        let usable = match (&pids, &memory) {
            (Ok(pids), Ok(memory)) => {
                writable(pids, "pids").and_then(|()| writable(memory, "memory"))
            }
            (Err(why), _) | (_, Err(why)) => Err(why.clone()),
        };
        Found {
            pids: pids.ok(),
            memory: memory.ok(),
            usable,
        }
    })
}

/// The bounds a probe started now gets under `limits`, as `doctor`
/// says them.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct ProbeBounds {
    /// Processes and threads (its cgroup's `pids.max`, else the
    /// `RLIMIT_NPROC` of its user namespace); `None` when nothing bounds
    /// them (root, with no cgroup to make: root is never counted).
    pub pids: Option<u64>,
    /// Bytes of memory, where a cgroup of its own holds them.
    pub memory: Option<u64>,
    /// Why a probe gets no cgroup of its own here, if it does not.
    pub no_cgroup: Option<String>,
}

impl ProbeBounds {
    /// One line: `4096 processes and threads, 11 GiB of memory (a cgroup
    /// per probe)`.
    pub fn describe(&self) -> String {
        let pids = match self.pids {
            Some(n) => format!("{n} processes and threads"),
            None => "no bound on processes".to_owned(),
        };
        match (&self.memory, &self.no_cgroup) {
            (Some(bytes), _) => {
                format!("{pids}, {} MiB of memory (a cgroup per probe)", bytes >> 20)
            }
            (None, why) => format!(
                "{pids} ({}), memory only as bounded around preflight (no cgroup per probe: {})",
                if self.pids.is_some() {
                    "RLIMIT_NPROC of its user namespace"
                } else {
                    "root is not counted against RLIMIT_NPROC"
                },
                why.as_deref().unwrap_or("none made")
            ),
        }
    }
}

/// The bounds a probe started now gets under `limits`.
pub fn probe_bounds(limits: &super::Limits) -> ProbeBounds {
    let no_cgroup = found().usable.clone().err();
    let counted = !nix::unistd::getuid().is_root();
    ProbeBounds {
        pids: (no_cgroup.is_none() || counted).then(|| pid_bound(limits.pids)),
        memory: no_cgroup.is_none().then(|| memory_bound(limits.memory)),
        no_cgroup,
    }
}

/// This process's cgroup folder in the hierarchy that holds `controller`
/// (`pids` or `memory`), where that hierarchy is mounted: where the
/// cgroups of its probes are made.
pub fn own_cgroup(controller: &str) -> Option<PathBuf> {
    let hierarchy = match controller {
        "pids" => found().pids.as_ref(),
        "memory" => found().memory.as_ref(),
        _ => None,
    };
    hierarchy.map(|h| h.own.clone())
}

/// Removes the cgroups in `own` that a `preflight` no longer running made
/// (`preflight-PID-N`: one killed before it could): `rmdir` removes only
/// an empty cgroup, so none that still holds a process goes.
fn sweep(own: &Path) {
    let Ok(entries) = fs::read_dir(own) else {
        return;
    };
    for entry in entries.flatten() {
        let name = entry.file_name();
        let owner = name
            .to_str()
            .and_then(|n| n.strip_prefix("preflight-"))
            .and_then(|rest| rest.split('-').next())
            .and_then(|pid| pid.parse::<u32>().ok());
        if owner.is_some_and(|pid| !Path::new(&format!("/proc/{pid}")).exists()) {
            let _ = fs::remove_dir(entry.path());
        }
    }
}

/// The processes a probe may hold: at most `max`, and at most half of
/// what the cgroups around preflight leave now.
pub(crate) fn pid_bound(max: u64) -> u64 {
    let room = found()
        .pids
        .as_ref()
        .map_or(u64::MAX, |h| room(h, Counter::Pids));
    max.min((room / 2).max(MIN_PIDS))
}

/// The memory a probe may hold, as [`pid_bound`].
fn memory_bound(max: u64) -> u64 {
    let room = found()
        .memory
        .as_ref()
        .map_or_else(machine_memory, |h| room(h, Counter::Memory));
    max.min((room / 2).max(MIN_MEMORY))
}

/// Whether a cgroup can be made in `h` for `controller`, or why not.
fn writable(h: &Hierarchy, controller: &str) -> Result<(), String> {
    if h.unified && !enables(&h.own, controller) {
        return Err(format!(
            "cgroup v2: {} does not enable `{controller}` for its children (a cgroup with processes of its own cannot)",
            h.own.display()
        ));
    }
    let probe = h
        .own
        .join(format!("preflight-{}-check", std::process::id()));
    fs::create_dir(&probe)
        .and_then(|()| fs::remove_dir(&probe))
        .map_err(|e| format!("cannot make a cgroup in {}: {e}", h.own.display()))
}

/// The hierarchy holding `controller`, from `/proc/self/cgroup` and
/// `/proc/self/mountinfo`, checked writable enough to make a cgroup in.
fn hierarchy(cgroups: &str, mountinfo: &str, controller: &str) -> Result<Hierarchy, String> {
    let v1 = cgroups.lines().find_map(|line| {
        let mut fields = line.splitn(3, ':');
        let (_, list, path) = (fields.next()?, fields.next()?, fields.next()?);
        list.split(',').any(|c| c == controller).then_some(path)
    });
    let v2 = cgroups.lines().find_map(|line| line.strip_prefix("0::"));
    let (path, unified) = match (v1, v2) {
        (Some(path), _) => (path, false),
        (None, Some(path)) => (path, true),
        (None, None) => return Err(format!("no cgroup hierarchy holds `{controller}`")),
    };
    let (mount, root) = mountinfo
        .lines()
        .find_map(|line| cgroup_mount(line, controller, unified))
        .ok_or_else(|| format!("the `{controller}` cgroup hierarchy is not mounted"))?;
    // The path is from the root of the hierarchy; the mount may show a
    // folder of it (a container's).
    let path = Path::new(path);
    let relative = path
        .strip_prefix(&root)
        .or_else(|_| path.strip_prefix("/"))
        .unwrap_or(path);
    Ok(Hierarchy {
        own: mount.join(relative),
        mount,
        unified,
    })
}

/// The mount point and root of `line` of mountinfo when it mounts the
/// hierarchy of `controller`.
fn cgroup_mount(line: &str, controller: &str, unified: bool) -> Option<(PathBuf, PathBuf)> {
    let (before, after) = line.split_once(" - ")?;
    let fields: Vec<&str> = before.split(' ').collect();
    let mut after = after.split(' ');
    let (kind, _, options) = (after.next()?, after.next()?, after.next().unwrap_or(""));
    let matches = match kind {
        "cgroup2" => unified,
        "cgroup" => !unified && options.split(',').any(|o| o == controller),
        _ => false,
    };
    let unescape = |s: &str| s.replace("\\040", " ");
    matches.then(|| {
        (
            PathBuf::from(unescape(fields.get(4).copied().unwrap_or("/"))),
            PathBuf::from(unescape(fields.get(3).copied().unwrap_or("/"))),
        )
    })
}

/// Whether the v2 cgroup `dir` gives `controller` to its children, after
/// asking it to once.
fn enables(dir: &Path, controller: &str) -> bool {
    let on = |dir: &Path| {
        fs::read_to_string(dir.join("cgroup.subtree_control"))
            .is_ok_and(|text| text.split_whitespace().any(|c| c == controller))
    };
    if !on(dir) {
        let _ = fs::write(dir.join("cgroup.subtree_control"), format!("+{controller}"));
    }
    on(dir)
}

/// The cgroups made for one probe, removed when dropped (once every
/// process in them is gone).
#[derive(Debug)]
pub(crate) struct ProbeCgroups {
    dirs: Vec<PathBuf>,
    /// Their `cgroup.procs`, opened here: the child writes `0` into each
    /// before its `execve` (the opener's credentials are the ones checked).
    procs: Vec<OwnedFd>,
    pids: u64,
    memory: u64,
    /// cgroup v2: one folder, and its own names for the counters.
    unified: bool,
}

impl ProbeCgroups {
    /// Cgroups for one probe bounded by `max_pids` and `max_memory` (and
    /// by half of what the cgroups around preflight leave); `None` where
    /// they cannot be made ([`unbounded_reason`]).
    pub(crate) fn make(max_pids: u64, max_memory: u64) -> Option<ProbeCgroups> {
        let found = found();
        let (Ok(()), Some(pids), Some(memory)) = (&found.usable, &found.pids, &found.memory) else {
            return None;
        };
        static NEXT: AtomicU64 = AtomicU64::new(0);
        let name = format!(
            "preflight-{}-{}",
            std::process::id(),
            NEXT.fetch_add(1, Ordering::Relaxed)
        );
        let pid_bound = pid_bound(max_pids);
        let memory_bound = memory_bound(max_memory);
        let mut made = ProbeCgroups {
            dirs: Vec::new(),
            procs: Vec::new(),
            pids: pid_bound,
            memory: memory_bound,
            unified: pids.unified,
        };
        let mut dirs = vec![pids.own.join(&name)];
        if !memory.unified {
            dirs.push(memory.own.join(&name));
        }
        for dir in dirs {
            fs::create_dir(&dir).ok()?;
            made.dirs.push(dir);
        }
        let pids_dir = &made.dirs[0];
        let memory_dir = made.dirs.last()?;
        fs::write(pids_dir.join("pids.max"), pid_bound.to_string()).ok()?;
        if memory.unified {
            fs::write(memory_dir.join("memory.max"), memory_bound.to_string()).ok()?;
            // Swap would let a probe past its bound, slowly.
            let _ = fs::write(memory_dir.join("memory.swap.max"), "0");
        } else {
            fs::write(
                memory_dir.join("memory.limit_in_bytes"),
                memory_bound.to_string(),
            )
            .ok()?;
            let _ = fs::write(
                memory_dir.join("memory.memsw.limit_in_bytes"),
                memory_bound.to_string(),
            );
        }
        for dir in &made.dirs {
            let file = fs::OpenOptions::new()
                .write(true)
                .custom_flags(libc::O_CLOEXEC)
                .open(dir.join("cgroup.procs"))
                .ok()?;
            made.procs.push(file.into());
        }
        Some(made)
    }

    /// The `cgroup.procs` descriptors the child joins.
    pub(crate) fn procs(&self) -> impl Iterator<Item = &OwnedFd> {
        self.procs.iter()
    }

    /// The bounds the probe reached, once its run is over.
    pub(crate) fn exhausted(&self) -> Vec<Exhausted> {
        let count = |file: &Path, key: &str| -> u64 {
            fs::read_to_string(file)
                .unwrap_or_default()
                .lines()
                .find_map(|line| line.strip_prefix(key)?.trim().parse().ok())
                .unwrap_or(0)
        };
        let pids_dir = &self.dirs[0];
        let memory_dir = self.dirs.last().unwrap_or(pids_dir);
        let mut reached = Vec::new();
        if count(&pids_dir.join("pids.events"), "max ") > 0 {
            reached.push(Exhausted::Pids { max: self.pids });
        }
        let events = if self.unified {
            memory_dir.join("memory.events")
        } else {
            memory_dir.join("memory.oom_control")
        };
        if count(&events, "oom_kill ") > 0 {
            reached.push(Exhausted::Memory { max: self.memory });
        }
        reached
    }
}

impl Drop for ProbeCgroups {
    fn drop(&mut self) {
        self.procs.clear();
        for dir in &self.dirs {
            // Its last process may still be on its way out of it.
            for _ in 0..50 {
                match fs::remove_dir(dir) {
                    Err(e) if e.raw_os_error() == Some(libc::EBUSY) => {
                        std::thread::sleep(std::time::Duration::from_millis(10));
                    }
                    _ => break,
                }
            }
        }
    }
}

#[derive(Clone, Copy)]
enum Counter {
    Pids,
    Memory,
}

/// What the cgroups from `h`'s own up to its mount leave of `counter`:
/// the least of their limits less what they hold (the machine's memory
/// where none limits it).
fn room(h: &Hierarchy, counter: Counter) -> u64 {
    let (max, current) = match (counter, h.unified) {
        (Counter::Pids, _) => ("pids.max", "pids.current"),
        (Counter::Memory, true) => ("memory.max", "memory.current"),
        (Counter::Memory, false) => ("memory.limit_in_bytes", "memory.usage_in_bytes"),
    };
    let read = |path: PathBuf| -> Option<u64> {
        let text = fs::read_to_string(path).ok()?;
        let text = text.trim();
        if text == "max" {
            return None;
        }
        text.parse().ok().filter(|n| *n < UNLIMITED)
    };
    let mut left = match counter {
        Counter::Pids => u64::MAX,
        Counter::Memory => machine_memory(),
    };
    let mut dir = Some(h.own.as_path());
    while let Some(here) = dir.filter(|d| d.starts_with(&h.mount)) {
        if let Some(limit) = read(here.join(max)) {
            let held = read(here.join(current)).unwrap_or(0);
            left = left.min(limit.saturating_sub(held));
        }
        dir = here.parent();
    }
    left
}

/// The machine's memory, from `/proc/meminfo`.
fn machine_memory() -> u64 {
    fs::read_to_string("/proc/meminfo")
        .unwrap_or_default()
        .lines()
        .find_map(|line| {
            let kib: u64 = line
                .strip_prefix("MemTotal:")?
                .trim()
                .strip_suffix("kB")?
                .trim()
                .parse()
                .ok()?;
            Some(kib << 10)
        })
        .unwrap_or(u64::MAX)
}

/// Writes `0` (the caller) into each of `procs`; whether all took it.
///
/// # Safety
/// Async-signal-safe: for a child between `fork` and `execve`.
pub(crate) unsafe fn join(procs: &[libc::c_int]) -> bool {
    procs
        .iter()
        .all(|fd| unsafe { libc::write(*fd, c"0".as_ptr().cast(), 1) } == 1)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_v1_controller_is_found_in_its_own_mount() {
        let cgroups = "8:pids:/a/b\n4:memory:/m\n0::/\n";
        let mountinfo = "31 23 0:28 / /sys/fs/cgroup rw - tmpfs tmpfs rw\n\
                         39 31 0:36 / /sys/fs/cgroup/pids rw,relatime - cgroup cgroup rw,pids\n\
                         40 31 0:37 /m /sys/fs/cgroup/memory rw - cgroup cgroup rw,memory\n";
        let pids = mountinfo
            .lines()
            .find_map(|l| cgroup_mount(l, "pids", false))
            .expect("pids");
        assert_eq!(pids.0, Path::new("/sys/fs/cgroup/pids"));
        let memory = mountinfo
            .lines()
            .find_map(|l| cgroup_mount(l, "memory", false))
            .expect("memory");
        assert_eq!(
            memory,
            (PathBuf::from("/sys/fs/cgroup/memory"), "/m".into())
        );
        let found = hierarchy(cgroups, "", "pids");
        assert_eq!(
            found.err().as_deref(),
            Some("the `pids` cgroup hierarchy is not mounted")
        );
        assert_eq!(
            Exhausted::Memory { max: 512 << 20 }.to_string(),
            "its memory bound of 512 MiB"
        );
    }
}
