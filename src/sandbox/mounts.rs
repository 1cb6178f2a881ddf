//! The probe's view of the file system (reaper side). The reaper, pid 1 of
//! the probe's pid namespace and alone in its fresh mount namespace, builds
//! it before it forks the child, from a [`Layout`] the sandbox sends:
//!
//! - mount events no longer travel from here to the host (`MS_SLAVE`);
//! - a fresh `/proc` of the new pid namespace;
//! - one size-bounded tmpfs, the *scratch*, on the sandbox's folder: the
//!   probe's working directory lives in it, and so do the private upper
//!   layers of `/tmp` and `TMPDIR` (overlays: the probe reads what is
//!   there, and what it writes stays in its scratch) and its `/dev/shm`;
//! - the parent's files in the working directory carried in (regular files
//!   copied, FIFOs bound, so both ends meet);
//! - read-only binds of what must not change (the variant's files),
//!   writable binds of what must (the JIT caches, where an overlay covers
//!   them), empty read-only binds over what must not be seen (the outcome
//!   cache, the hub token);
//! - as root of the machine, `/proc/sys`, `/proc/sysrq-trigger` and `/sys`
//!   read-only as well.
//!
//! When the probe is over, [`Built::copy_back`] brings what it left in its
//! working directory to the sandbox's folder on the host, within a bound.

use super::spawn::Step;
use nix::errno::Errno;
use nix::fcntl::{OFlag, open};
use nix::mount::{MsFlags, mount};
use nix::sys::stat::Mode;
use serde::{Deserialize, Serialize};
use std::collections::BTreeSet;
use std::ffi::{CString, OsStr, OsString};
use std::fs::{self, File, OpenOptions};
use std::io::{self, Read};
use std::os::fd::{AsRawFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::{DirBuilderExt, MetadataExt, OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};

/// The probe's working directory inside the sandbox's folder.
pub(crate) const WORK: &str = "work";
const SHM: &str = ".preflight-shm";
const EMPTY_DIR: &str = ".preflight-empty";
const EMPTY_FILE: &str = ".preflight-empty-file";
/// Most bytes copied back to the host after a probe: far more than any
/// result, far less than a probe could write.
const COPY_BACK_BYTES: u64 = 64 << 20;
/// Most entries copied back, and the deepest folder.
const COPY_BACK_ENTRIES: usize = 4096;
const COPY_BACK_DEPTH: usize = 8;
/// Inodes of the scratch: plenty for a JIT cache, not millions.
const SCRATCH_INODES: u64 = 256 * 1024;

/// A path as raw bytes: JSON has no other spelling for one that is not UTF-8.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
pub(crate) struct RawPath(Vec<u8>);

impl RawPath {
    pub(crate) fn path(&self) -> &Path {
        Path::new(OsStr::from_bytes(&self.0))
    }
}

impl From<&Path> for RawPath {
    fn from(path: &Path) -> RawPath {
        RawPath(path.as_os_str().as_bytes().to_vec())
    }
}

/// What the probe sees, as the sandbox asks for it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct Layout {
    /// The sandbox's folder on the host; the scratch is mounted on it.
    pub(crate) root: RawPath,
    /// Bytes of the scratch: the probe's folder, `/tmp`, `TMPDIR` and
    /// `/dev/shm` together.
    pub(crate) scratch_bytes: u64,
    /// Directories whose writes go to a private layer (`/tmp`, `TMPDIR`).
    pub(crate) temp: Vec<RawPath>,
    /// Bound read-only.
    pub(crate) read_only: Vec<RawPath>,
    /// Bound read-write from the host, where a private layer covers them.
    pub(crate) writable: Vec<RawPath>,
    /// Covered by something empty and read-only.
    pub(crate) hidden: Vec<RawPath>,
    /// Folders to hide that do not exist yet: made (empty, 0700, where the
    /// folder above exists) first, so that the probe cannot make them and
    /// leave something there.
    pub(crate) hidden_missing: Vec<RawPath>,
    /// The reaper is root of the machine: the kernel's knobs read-only too.
    pub(crate) harden: bool,
}

/// A set-up step that failed, and how.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Failed {
    pub(crate) step: Step,
    pub(crate) errno: Errno,
}

fn at(step: Step) -> impl Fn(Errno) -> Failed {
    move |errno| Failed { step, errno }
}

fn io_at(step: Step) -> impl Fn(io::Error) -> Failed {
    move |e| Failed {
        step,
        errno: Errno::from_raw(e.raw_os_error().unwrap_or(libc::EIO)),
    }
}

/// The probe's working directory as built, with what came from the host.
pub(crate) struct Built {
    /// The sandbox's working directory on the host.
    host: OwnedFd,
    /// The same path, now the scratch's.
    dir: PathBuf,
    /// Names bound from the host (FIFOs and the like): never copied back.
    bound: BTreeSet<OsString>,
    /// Regular files copied in, with their size and mtime then: copied
    /// back only when changed.
    copied: Vec<(OsString, u64, i64, i64)>,
    /// The host's `/proc`, until the child has read its own pid there.
    host_proc: Option<OwnedFd>,
}

/// Builds the probe's view of the file system; see the module docs.
pub(crate) fn build(layout: &Layout) -> Result<Built, Failed> {
    let root = layout.root.path();
    let dir = root.join(WORK);
    mount(
        None::<&str>,
        "/",
        None::<&str>,
        MsFlags::MS_REC | MsFlags::MS_SLAVE,
        None::<&str>,
    )
    .map_err(at(Step::MountPropagation))?;
    let host_proc = open(
        "/proc",
        OFlag::O_PATH | OFlag::O_DIRECTORY | OFlag::O_CLOEXEC,
        Mode::empty(),
    )
    .ok();
    mount(
        Some("proc"),
        "/proc",
        Some("proc"),
        MsFlags::MS_NOSUID | MsFlags::MS_NODEV | MsFlags::MS_NOEXEC,
        None::<&str>,
    )
    .map_err(at(Step::MountProc))?;

    // Handles on the host's view, taken before anything covers it.
    let host = open(
        &dir,
        OFlag::O_RDONLY | OFlag::O_DIRECTORY | OFlag::O_CLOEXEC,
        Mode::empty(),
    )
    .map_err(at(Step::MountScratch))?;
    let handle = |path: &Path| open(path, OFlag::O_PATH | OFlag::O_CLOEXEC, Mode::empty()).ok();
    let temps: Vec<(&Path, Option<OwnedFd>)> = layout
        .temp
        .iter()
        .map(|t| (t.path(), handle(t.path())))
        .collect();
    let read_only: Vec<(&Path, OwnedFd)> = handles(&layout.read_only, handle);
    let writable: Vec<(&Path, OwnedFd)> = handles(&layout.writable, handle);

    let options = format!(
        "size={},nr_inodes={SCRATCH_INODES},mode=0700",
        layout.scratch_bytes.max(1 << 20)
    );
    mount(
        Some("tmpfs"),
        root,
        Some("tmpfs"),
        MsFlags::MS_NOSUID | MsFlags::MS_NODEV,
        Some(options.as_str()),
    )
    .map_err(at(Step::MountScratch))?;
    let scratch = open(
        root,
        OFlag::O_PATH | OFlag::O_DIRECTORY | OFlag::O_CLOEXEC,
        Mode::empty(),
    )
    .map_err(at(Step::MountScratch))?;
    let in_scratch = |name: &str| fd_path(&scratch).join(name);
    let mkdir = |name: &str, mode: u32| {
        let path = in_scratch(name);
        fs::create_dir(&path)?;
        fs::set_permissions(&path, fs::Permissions::from_mode(mode))
    };
    mkdir(WORK, 0o700).map_err(io_at(Step::MountScratch))?;
    mkdir(SHM, 0o1777).map_err(io_at(Step::MountScratch))?;
    mkdir(EMPTY_DIR, 0o555).map_err(io_at(Step::MountScratch))?;
    File::create(in_scratch(EMPTY_FILE))
        .and_then(|f| f.set_permissions(fs::Permissions::from_mode(0o444)))
        .map_err(io_at(Step::MountScratch))?;

    for (i, (path, lower)) in temps.iter().enumerate() {
        let (upper, work) = (
            format!(".preflight-upper-{i}"),
            format!(".preflight-work-{i}"),
        );
        let mode = lower
            .as_ref()
            .and_then(|fd| nix::sys::stat::fstat(fd).ok())
            .map_or(0o1777, |s| s.st_mode & 0o7777);
        mkdir(&upper, mode).map_err(io_at(Step::MountScratch))?;
        mkdir(&work, 0o700).map_err(io_at(Step::MountScratch))?;
        let overlaid = lower.as_ref().is_some_and(|lower| {
            let options = format!(
                "lowerdir={},upperdir={},workdir={}",
                fd_path(lower).display(),
                in_scratch(&upper).display(),
                in_scratch(&work).display()
            );
            mount(
                Some("overlay"),
                *path,
                Some("overlay"),
                MsFlags::MS_NOSUID | MsFlags::MS_NODEV,
                Some(options.as_str()),
            )
            .is_ok()
        });
        // Where the overlay is refused the directory is private and empty.
        if !overlaid && path.is_dir() {
            bind(&in_scratch(&upper), path).map_err(at(Step::MountScratch))?;
        }
    }
    // An overlay on the folder holding the sandbox shows the host's copy
    // of it: the scratch goes back on top.
    if temps.iter().any(|(t, _)| root.starts_with(t)) {
        bind(&fd_path(&scratch), root).map_err(at(Step::MountScratch))?;
    }
    if Path::new("/dev/shm").is_dir() {
        let _ = bind(&in_scratch(SHM), Path::new("/dev/shm"));
    }

    let mut built = Built {
        host,
        dir,
        bound: BTreeSet::new(),
        copied: Vec::new(),
        host_proc,
    };
    built.carry_in().map_err(io_at(Step::CopyIn))?;

    for (path, fd) in &read_only {
        if bind_rec(&fd_path(fd), path).is_ok() {
            let _ = set_read_only(path);
        }
    }
    for (path, fd) in &writable {
        if temps.iter().any(|(t, _)| path.starts_with(t))
            || read_only.iter().any(|(r, _)| path.starts_with(r))
        {
            let _ = bind_rec(&fd_path(fd), path);
        }
    }
    // Only where the folder above exists: a path of a cache long removed
    // is not made again.
    for missing in &layout.hidden_missing {
        let _ = fs::DirBuilder::new().mode(0o700).create(missing.path());
    }
    for hidden in layout.hidden.iter().chain(&layout.hidden_missing) {
        let path = hidden.path();
        let Ok(meta) = fs::metadata(path) else {
            continue;
        };
        let empty = in_scratch(if meta.is_dir() { EMPTY_DIR } else { EMPTY_FILE });
        if bind(&empty, path).is_ok() {
            let _ = set_read_only(path);
        }
    }
    if layout.harden {
        for knob in ["/proc/sys", "/proc/sysrq-trigger"] {
            let knob = Path::new(knob);
            if bind(knob, knob).is_ok() {
                let _ = set_read_only(knob);
            }
        }
        let _ = set_read_only(Path::new("/sys"));
    }
    nix::unistd::chdir(&built.dir).map_err(at(Step::WorkingDir))?;
    Ok(built)
}

/// Handles on the paths that exist, by path.
fn handles(paths: &[RawPath], handle: impl Fn(&Path) -> Option<OwnedFd>) -> Vec<(&Path, OwnedFd)> {
    paths
        .iter()
        .filter_map(|p| handle(p.path()).map(|fd| (p.path(), fd)))
        .collect()
}

/// The path that names what `fd` refers to, in this process.
fn fd_path(fd: &OwnedFd) -> PathBuf {
    PathBuf::from(format!("/proc/self/fd/{}", fd.as_raw_fd()))
}

fn bind(source: &Path, target: &Path) -> Result<(), Errno> {
    mount(
        Some(source),
        target,
        None::<&str>,
        MsFlags::MS_BIND,
        None::<&str>,
    )
}

fn bind_rec(source: &Path, target: &Path) -> Result<(), Errno> {
    mount(
        Some(source),
        target,
        None::<&str>,
        MsFlags::MS_BIND | MsFlags::MS_REC,
        None::<&str>,
    )
}

/// Makes the mount at `path` and every mount below it read-only, keeping
/// its other flags (which a remount would have to restate, and which a
/// user namespace may not clear).
fn set_read_only(path: &Path) -> Result<(), Errno> {
    let path = CString::new(path.as_os_str().as_bytes()).map_err(|_| Errno::EINVAL)?;
    let attr = libc::mount_attr {
        attr_set: libc::MOUNT_ATTR_RDONLY,
        attr_clr: 0,
        propagation: 0,
        userns_fd: 0,
    };
    // SAFETY: a valid path and attribute struct of the size given.
    let rc = unsafe {
        libc::syscall(
            libc::SYS_mount_setattr,
            libc::AT_FDCWD,
            path.as_ptr(),
            libc::AT_RECURSIVE as libc::c_uint,
            &attr as *const libc::mount_attr,
            std::mem::size_of::<libc::mount_attr>(),
        )
    };
    Errno::result(rc).map(drop)
}

impl Built {
    /// The host's `/proc`, once: the child reads its pid there (the number
    /// the parent knows it by), then nothing in the probe's namespaces
    /// keeps a view of the host's processes.
    pub(crate) fn take_host_proc(&mut self) -> Option<OwnedFd> {
        self.host_proc.take()
    }

    fn host_path(&self, name: &OsStr) -> PathBuf {
        fd_path(&self.host).join(name)
    }

    /// What the parent put into the working directory, into the scratch:
    /// regular files and symbolic links copied, everything else (FIFOs,
    /// sockets) bound so that both sides reach the same one, folders bound
    /// read-only.
    fn carry_in(&mut self) -> io::Result<()> {
        for entry in fs::read_dir(fd_path(&self.host))? {
            let entry = entry?;
            let name = entry.file_name();
            let from = self.host_path(&name);
            let to = self.dir.join(&name);
            let kind = entry.file_type()?;
            if kind.is_file() {
                let mut source = OpenOptions::new()
                    .read(true)
                    .custom_flags(libc::O_NOFOLLOW)
                    .open(&from)?;
                let mode = source.metadata()?.permissions().mode();
                let mut target = OpenOptions::new()
                    .write(true)
                    .create_new(true)
                    .mode(mode & 0o777)
                    .open(&to)?;
                io::copy(&mut source, &mut target)?;
                let meta = target.metadata()?;
                self.copied
                    .push((name, meta.len(), meta.mtime(), meta.mtime_nsec()));
            } else if kind.is_symlink() {
                std::os::unix::fs::symlink(fs::read_link(&from)?, &to)?;
                self.bound.insert(name);
            } else if kind.is_dir() {
                fs::create_dir(&to)?;
                bind_rec(&from, &to).map_err(io::Error::from)?;
                let _ = set_read_only(&to);
                self.bound.insert(name);
            } else {
                File::create(&to)?;
                bind(&from, &to).map_err(io::Error::from)?;
                self.bound.insert(name);
            }
        }
        Ok(())
    }

    /// Copies what the probe left in its working directory (new or changed
    /// regular files and folders; never links, FIFOs or devices) to the
    /// sandbox's folder on the host, at most [`COPY_BACK_BYTES`]: a file
    /// that would pass the bound stays behind.
    pub(crate) fn copy_back(&self) {
        let mut budget = Budget {
            bytes: COPY_BACK_BYTES,
            entries: COPY_BACK_ENTRIES,
        };
        let Ok(entries) = fs::read_dir(&self.dir) else {
            return;
        };
        for entry in entries.flatten() {
            let name = entry.file_name();
            if self.bound.contains(&name) {
                continue;
            }
            let Ok(meta) = entry.metadata() else { continue };
            let unchanged = self.copied.iter().any(|(n, len, s, ns)| {
                *n == name && meta.len() == *len && meta.mtime() == *s && meta.mtime_nsec() == *ns
            });
            if !unchanged {
                copy_entry(&entry.path(), &self.host_path(&name), &meta, &mut budget, 0);
            }
        }
    }
}

struct Budget {
    bytes: u64,
    entries: usize,
}

/// Copies one regular file or folder (recursively) from the scratch to the
/// host, within `budget`.
fn copy_entry(from: &Path, to: &Path, meta: &fs::Metadata, budget: &mut Budget, depth: usize) {
    if budget.entries == 0 {
        return;
    }
    budget.entries -= 1;
    if meta.is_file() {
        if meta.len() > budget.bytes {
            return;
        }
        let source = OpenOptions::new()
            .read(true)
            .custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK)
            .open(from);
        let target = OpenOptions::new()
            .write(true)
            .create(true)
            .truncate(true)
            .mode(0o600)
            .custom_flags(libc::O_NOFOLLOW)
            .open(to);
        if let (Ok(source), Ok(mut target)) = (source, target) {
            // The file may have grown since it was measured.
            let mut limited = source.take(budget.bytes);
            if let Ok(n) = io::copy(&mut limited, &mut target) {
                budget.bytes -= n;
            }
        }
    } else if meta.is_dir() && depth < COPY_BACK_DEPTH {
        if fs::create_dir(to).is_err() && !fs::symlink_metadata(to).is_ok_and(|m| m.is_dir()) {
            return;
        }
        let Ok(entries) = fs::read_dir(from) else {
            return;
        };
        for entry in entries.flatten() {
            if let Ok(meta) = entry.metadata() {
                copy_entry(
                    &entry.path(),
                    &to.join(entry.file_name()),
                    &meta,
                    budget,
                    depth + 1,
                );
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn raw_paths_keep_bytes_that_are_not_utf8() {
        let path = RawPath(b"/tmp/caf\xe9".to_vec());
        let json = serde_json::to_string(&path).expect("json");
        let back: RawPath = serde_json::from_str(&json).expect("parse");
        assert_eq!(back.path().as_os_str().as_bytes(), b"/tmp/caf\xe9");
    }
}
