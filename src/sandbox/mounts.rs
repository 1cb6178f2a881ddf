//! The probe's view of the file system (reaper side). The reaper, pid 1 of
//! the probe's pid namespace and alone in its fresh mount namespace, makes
//! mount events stop there (`MS_SLAVE`), takes handles on the host's view
//! of every path the plan names, then carries out the plan
//! ([`super::walls`]) wall by wall, in order, before it forks the child;
//! last it carries the parent's files into the probe's folder
//! (`super::carry`).

use super::spawn::Step;
use super::walls::{Plan, Wall};
use nix::errno::Errno;
use nix::fcntl::{OFlag, open};
use nix::mount::{MsFlags, mount};
use nix::sys::stat::Mode;
use serde::{Deserialize, Serialize};
use std::collections::{BTreeMap, BTreeSet};
use std::ffi::{CString, OsStr, OsString};
use std::fs::{self, File};
use std::io;
use std::os::fd::{AsRawFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::{DirBuilderExt, PermissionsExt};
use std::path::{Path, PathBuf};

mod layers;

/// The probe's working directory inside the sandbox's folder.
pub(crate) const WORK: &str = "work";
const SHM: &str = ".preflight-shm";
const EMPTY_DIR: &str = ".preflight-empty";
const EMPTY_FILE: &str = ".preflight-empty-file";
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
    /// The walls, in order.
    pub(crate) plan: Plan,
    /// Take every overlay as refused (`super::flat::REFUSE_OVERLAY_FOR_TESTS`).
    #[serde(default)]
    pub(crate) refuse_overlay: bool,
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
    /// The sandbox's working directory on the host, on a mount of its own
    /// that stays writable (the copy back goes there).
    pub(super) host: OwnedFd,
    /// The same path, now the scratch's.
    pub(super) dir: PathBuf,
    /// Names bound from the host (FIFOs and the like): never copied back.
    pub(super) bound: BTreeSet<OsString>,
    /// Regular files copied in, with their size and mtime then: copied
    /// back only when changed.
    pub(super) copied: Vec<(OsString, u64, i64, i64)>,
    /// The host's `/proc`, until the child has read its own pid there.
    pub(super) host_proc: Option<OwnedFd>,
    /// Why an overlay was refused and became a private folder.
    pub(super) flat: Option<String>,
}

/// What carrying out the plan keeps between walls.
struct Builder {
    /// Handles on the host's view of every path the plan reads from,
    /// taken before anything covers it.
    host: BTreeMap<PathBuf, OwnedFd>,
    /// The scratch, once mounted, and the names made in it so far.
    scratch: Option<OwnedFd>,
    made: usize,
    root: PathBuf,
    work: Option<OwnedFd>,
    /// Overlays are known to be refused: no overlay is tried.
    flat: bool,
    /// A test's refusal stands in for Linux's.
    refuse: bool,
    /// Why the first overlay tried was refused.
    refused: Option<String>,
    /// Where the walls mount something (and the sandbox's folder): below a
    /// refused overlay these get places of their own, not the host's.
    targets: Vec<PathBuf>,
}

/// Builds the probe's view of the file system; see the module docs.
pub(crate) fn build(layout: &Layout) -> Result<Built, Failed> {
    let root = layout.root.path().to_path_buf();
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
    // Only where the folder above exists: a path of a cache long removed
    // is not made again. Made now, while the host is still writable.
    for wall in &layout.plan.walls {
        if let Wall::Hide { path, make: true } = wall {
            let _ = fs::DirBuilder::new().mode(0o700).create(path.path());
        }
    }
    let mut builder = Builder {
        host: handles(&layout.plan),
        scratch: None,
        made: 0,
        root,
        work: None,
        flat: layout.plan.flat.is_some(),
        refuse: layout.refuse_overlay,
        refused: None,
        targets: targets(&layout.plan, layout.root.path()),
    };
    for wall in &layout.plan.walls {
        builder.raise(wall)?;
    }
    let host = builder.work.take().ok_or(Failed {
        step: Step::MountScratch,
        errno: Errno::ENOENT,
    })?;
    let mut built = Built {
        host,
        dir: builder.root.join(WORK),
        bound: BTreeSet::new(),
        copied: Vec::new(),
        host_proc,
        flat: builder.refused.take(),
    };
    built.carry_in().map_err(io_at(Step::CopyIn))?;
    nix::unistd::chdir(&built.dir).map_err(at(Step::WorkingDir))?;
    Ok(built)
}

/// The paths the walls mount something on, and the sandbox's folder.
fn targets(plan: &Plan, root: &Path) -> Vec<PathBuf> {
    let mut targets = vec![root.to_path_buf()];
    for wall in &plan.walls {
        match wall {
            Wall::ReadOnly(p)
            | Wall::Private(p)
            | Wall::Bind { target: p, .. }
            | Wall::Hide { path: p, .. } => targets.push(p.path().to_path_buf()),
            _ => {}
        }
    }
    targets
}

/// Handles on every host path the plan binds, overlays or reads from.
fn handles(plan: &Plan) -> BTreeMap<PathBuf, OwnedFd> {
    let mut paths: Vec<PathBuf> = Vec::new();
    for wall in &plan.walls {
        match wall {
            Wall::Overlay(p) | Wall::ReadOnly(p) | Wall::Bind { source: p, .. } => {
                paths.push(p.path().to_path_buf())
            }
            Wall::Dev { nodes } => {
                paths.extend(nodes.iter().map(|n| Path::new("/dev").join(n.path())))
            }
            _ => {}
        }
    }
    paths
        .into_iter()
        .filter_map(|p| {
            let fd = open(&p, OFlag::O_PATH | OFlag::O_CLOEXEC, Mode::empty()).ok()?;
            Some((p, fd))
        })
        .collect()
}

impl Builder {
    fn handle(&self, path: &Path) -> Option<PathBuf> {
        self.host.get(path).map(fd_path)
    }

    /// A new empty folder (or file) of the scratch, by its path.
    fn fresh(&mut self, what: &str, mode: u32, dir: bool) -> io::Result<PathBuf> {
        let scratch = self.scratch.as_ref().ok_or(io::ErrorKind::NotFound)?;
        self.made += 1;
        let path = fd_path(scratch).join(format!(".preflight-{what}-{}", self.made));
        if dir {
            fs::create_dir(&path)?;
        } else {
            File::create(&path)?;
        }
        fs::set_permissions(&path, fs::Permissions::from_mode(mode))?;
        Ok(path)
    }

    fn in_scratch(&self, name: &str) -> Option<PathBuf> {
        self.scratch.as_ref().map(|s| fd_path(s).join(name))
    }

    fn raise(&mut self, wall: &Wall) -> Result<(), Failed> {
        match wall {
            Wall::ReadOnlyHost => {
                set_attr(Path::new("/"), libc::MOUNT_ATTR_RDONLY, 0, true)
                    .map_err(at(Step::MountWalls))?;
            }
            Wall::Proc => mount(
                Some("proc"),
                "/proc",
                Some("proc"),
                MsFlags::MS_NOSUID | MsFlags::MS_NODEV | MsFlags::MS_NOEXEC,
                None::<&str>,
            )
            .map_err(at(Step::MountProc))?,
            Wall::Dev { nodes } => self.dev(nodes).map_err(at(Step::MountWalls))?,
            Wall::Scratch { root, bytes } => self.scratch(root.path(), *bytes)?,
            Wall::Overlay(path) => self.overlay(path.path())?,
            Wall::Shm => {
                if let Some(shm) = self.in_scratch(SHM)
                    && Path::new("/dev/shm").is_dir()
                {
                    let _ = bind(&shm, Path::new("/dev/shm"));
                }
            }
            Wall::ReadOnly(path) => {
                if let Some(source) = self.handle(path.path())
                    && layers::make_place(&source, path.path())
                    && bind_rec(&source, path.path()).is_ok()
                {
                    let _ = set_read_only(path.path());
                }
            }
            Wall::Bind { source, target } => {
                let target = target.path();
                if let Some(source) = self.handle(source.path()) {
                    let _ = fs::DirBuilder::new().recursive(true).create(target);
                    if bind_rec(&source, target).is_ok() {
                        let _ = set_attr(target, 0, libc::MOUNT_ATTR_RDONLY, false);
                    }
                }
            }
            Wall::Private(path) => {
                let empty = self
                    .fresh("private", 0o700, true)
                    .map_err(io_at(Step::MountScratch))?;
                let _ = fs::DirBuilder::new().recursive(true).create(path.path());
                let _ = bind(&empty, path.path());
            }
            Wall::Hide { path, .. } => {
                let path = path.path();
                let Ok(meta) = fs::metadata(path) else {
                    return Ok(());
                };
                let name = if meta.is_dir() { EMPTY_DIR } else { EMPTY_FILE };
                if let Some(empty) = self.in_scratch(name)
                    && bind(&empty, path).is_ok()
                {
                    let _ = set_read_only(path);
                }
            }
            Wall::Harden => {
                for knob in ["/proc/sys", "/proc/sysrq-trigger"] {
                    let knob = Path::new(knob);
                    if bind(knob, knob).is_ok() {
                        let _ = set_read_only(knob);
                    }
                }
            }
        }
        Ok(())
    }

    /// The scratch on the sandbox's folder; first the working directory
    /// on a mount of its own that stays writable, for the copy back.
    fn scratch(&mut self, root: &Path, bytes: u64) -> Result<(), Failed> {
        let dir = root.join(WORK);
        bind(&dir, &dir).map_err(at(Step::MountScratch))?;
        set_attr(&dir, 0, libc::MOUNT_ATTR_RDONLY, false).map_err(at(Step::MountScratch))?;
        self.work = Some(
            open(
                &dir,
                OFlag::O_RDONLY | OFlag::O_DIRECTORY | OFlag::O_CLOEXEC,
                Mode::empty(),
            )
            .map_err(at(Step::MountScratch))?,
        );
        let options = format!(
            "size={},nr_inodes={SCRATCH_INODES},mode=0700",
            bytes.max(1 << 20)
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
        let made = |name: &str, mode: u32| -> io::Result<()> {
            let path = fd_path(&scratch).join(name);
            fs::create_dir(&path)?;
            fs::set_permissions(&path, fs::Permissions::from_mode(mode))
        };
        made(WORK, 0o700)
            .and_then(|()| made(SHM, 0o1777))
            .and_then(|()| made(EMPTY_DIR, 0o555))
            .and_then(|()| {
                let file = File::create(fd_path(&scratch).join(EMPTY_FILE))?;
                file.set_permissions(fs::Permissions::from_mode(0o444))
            })
            .map_err(io_at(Step::MountScratch))?;
        self.scratch = Some(scratch);
        Ok(())
    }

    /// A fresh `/dev`: a small tmpfs with the host's `nodes` bound in,
    /// `pts` (a new instance), `shm`, and the links a program expects;
    /// read-only once made.
    fn dev(&mut self, nodes: &[RawPath]) -> Result<(), Errno> {
        let dev = Path::new("/dev");
        mount(
            Some("tmpfs"),
            dev,
            Some("tmpfs"),
            MsFlags::MS_NOSUID | MsFlags::MS_NOEXEC,
            Some("mode=0755,size=1m,nr_inodes=4096"),
        )?;
        for node in nodes {
            let target = dev.join(node.path());
            let Some(source) = self.handle(&target) else {
                continue;
            };
            let made = if source.is_dir() {
                fs::create_dir(&target)
            } else {
                File::create(&target).map(drop)
            };
            if made.is_ok() {
                let _ = bind_rec(&source, &target);
            }
        }
        for (link, to) in [
            ("fd", "/proc/self/fd"),
            ("stdin", "/proc/self/fd/0"),
            ("stdout", "/proc/self/fd/1"),
            ("stderr", "/proc/self/fd/2"),
            ("ptmx", "pts/ptmx"),
        ] {
            let _ = std::os::unix::fs::symlink(to, dev.join(link));
        }
        for (name, mode) in [("shm", 0o1777), ("pts", 0o755)] {
            fs::create_dir(dev.join(name))
                .map_err(|e| Errno::from_raw(e.raw_os_error().unwrap_or(libc::EIO)))?;
            let _ = fs::set_permissions(dev.join(name), fs::Permissions::from_mode(mode));
        }
        let _ = mount(
            Some("devpts"),
            &dev.join("pts"),
            Some("devpts"),
            MsFlags::MS_NOSUID | MsFlags::MS_NOEXEC,
            Some("newinstance,ptmxmode=0666,mode=0620"),
        );
        set_attr(dev, libc::MOUNT_ATTR_RDONLY, 0, false)
    }
}

/// The path that names what `fd` refers to, in this process.
pub(super) fn fd_path(fd: &OwnedFd) -> PathBuf {
    PathBuf::from(format!("/proc/self/fd/{}", fd.as_raw_fd()))
}

pub(super) fn bind(source: &Path, target: &Path) -> Result<(), Errno> {
    mount(
        Some(source),
        target,
        None::<&str>,
        MsFlags::MS_BIND,
        None::<&str>,
    )
}

pub(super) fn bind_rec(source: &Path, target: &Path) -> Result<(), Errno> {
    mount(
        Some(source),
        target,
        None::<&str>,
        MsFlags::MS_BIND | MsFlags::MS_REC,
        None::<&str>,
    )
}

/// Makes the mount at `path` and every mount below it read-only.
pub(super) fn set_read_only(path: &Path) -> Result<(), Errno> {
    set_attr(path, libc::MOUNT_ATTR_RDONLY, 0, true)
}

/// Sets and clears attributes of the mount at `path` (and every mount
/// below it, `recursive`), keeping its other flags (which a remount would
/// have to restate, and which a user namespace may not clear).
fn set_attr(path: &Path, set: u64, clear: u64, recursive: bool) -> Result<(), Errno> {
    let path = CString::new(path.as_os_str().as_bytes()).map_err(|_| Errno::EINVAL)?;
    let attr = libc::mount_attr {
        attr_set: set,
        attr_clr: clear,
        propagation: 0,
        userns_fd: 0,
    };
    let flags = if recursive { libc::AT_RECURSIVE } else { 0 };
    // SAFETY: a valid path and attribute struct of the size given.
    let rc = unsafe {
        libc::syscall(
            libc::SYS_mount_setattr,
            libc::AT_FDCWD,
            path.as_ptr(),
            flags as libc::c_uint,
            &attr as *const libc::mount_attr,
            std::mem::size_of::<libc::mount_attr>(),
        )
    };
    Errno::result(rc).map(drop)
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
