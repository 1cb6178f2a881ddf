//! The walls of a probe's file system: one ordered, declarative plan, read
//! as a bubblewrap command line reads (`--ro-bind / /`, then the few paths
//! a probe may write), made by the parent ([`super::Sandbox::plan`]) and
//! carried out in that order by the reaper (`mounts::build`). This is the
//! one place to audit what a probe can change: `preflight doctor` prints
//! the plan, and `tests/sandbox_walls.rs` compares it with what a probe
//! finds in its `/proc/self/mountinfo`.
//!
//! Everything of the host is read-only (every mount, recursively); a probe
//! writes only into its scratch (a bounded tmpfs, gone with the probe):
//! its folder, the private upper layers of `/tmp`, `TMPDIR` and `$HOME`,
//! its `/dev/shm`, and its kernel's JIT caches. `/dev` is a fresh one with
//! the few device nodes a probe needs.

use super::mounts::RawPath;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::ffi::{OsStr, OsString};
use std::fmt;
use std::path::{Path, PathBuf};

/// Device nodes (and folders of them) every probe gets, where the host has
/// them: what a Python process, torch and a terminal-less program open.
const DEVICES: &[&str] = &["null", "zero", "full", "random", "urandom", "tty"];

/// Host device names a probe gets besides [`DEVICES`]: the GPUs' nodes
/// (NVIDIA's `nvidia*` and `nvidia-caps`, the DRM render nodes, AMD's
/// `kfd`). Nothing else: no disk, no loop device, no `mem`.
fn is_accelerator(name: &str) -> bool {
    name.starts_with("nvidia") || name == "dri" || name == "kfd"
}

/// One wall, in the order the plan lists them.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub(crate) enum Wall {
    /// `--ro-bind / /`: every mount of the host read-only, recursively.
    ReadOnlyHost,
    /// `--proc /proc`: a fresh `/proc` of the probe's pid namespace.
    Proc,
    /// `--dev /dev`: a fresh, read-only `/dev` holding only these nodes
    /// (names below `/dev`) of the host's, bound, and `/dev/pts`,
    /// `/dev/shm`, the `fd`/`stdin`/`stdout`/`stderr` links.
    Dev { nodes: Vec<RawPath> },
    /// `--tmpfs ROOT`: the scratch, on the sandbox's folder; the parent's
    /// files in the working directory are carried in.
    Scratch { root: RawPath, bytes: u64 },
    /// `--overlay PATH`: reads see the host's files, writes go to a
    /// private upper layer in the scratch.
    Overlay(RawPath),
    /// `--bind SCRATCH /dev/shm`.
    Shm,
    /// `--ro-bind PATH PATH`, inside an overlay as well.
    ReadOnly(RawPath),
    /// `--bind SOURCE TARGET`: read-write from the host (a kernel's own
    /// JIT cache; a folder the caller asked for).
    Bind { source: RawPath, target: RawPath },
    /// An empty folder of the scratch over `PATH` (a JIT cache of no
    /// kernel's: private, gone with the probe).
    Private(RawPath),
    /// Something empty and read-only over `PATH`; `make`: the folder does
    /// not exist yet, and is made empty (0700) first so that the probe
    /// cannot make it and leave something there.
    Hide { path: RawPath, make: bool },
    /// As root of the machine: `/proc/sys` and `/proc/sysrq-trigger`
    /// read-only too.
    Harden,
}

/// The walls of one probe, in order. Its `Display` is the plan as
/// `preflight doctor` prints it, one wall a line.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Plan {
    pub(crate) walls: Vec<Wall>,
    /// Why overlays are refused here, when they are ([`super::flat`]):
    /// each overlay is then a private folder of the host's entries,
    /// read-only.
    #[serde(default)]
    pub(crate) flat: Option<String>,
}

impl Plan {
    /// The places a probe can write that are not the host's read-only
    /// view: the targets of the scratch, overlays, binds and private
    /// folders, `/proc`, `/dev/shm` and `/dev/pts`.
    pub fn writable(&self) -> Vec<PathBuf> {
        let mut places = Vec::new();
        for wall in &self.walls {
            match wall {
                Wall::Proc => places.push(PathBuf::from("/proc")),
                Wall::Dev { .. } => places.push(PathBuf::from("/dev/pts")),
                Wall::Shm => places.push(PathBuf::from("/dev/shm")),
                Wall::Scratch { root, .. } => places.push(root.path().to_path_buf()),
                Wall::Overlay(p) | Wall::Private(p) | Wall::Bind { target: p, .. } => {
                    places.push(p.path().to_path_buf())
                }
                _ => {}
            }
        }
        places
    }

    /// The names below `/dev` a probe finds.
    pub fn devices(&self) -> Vec<PathBuf> {
        self.walls
            .iter()
            .filter_map(|w| match w {
                Wall::Dev { nodes } => Some(nodes.iter().map(|n| n.path().to_path_buf())),
                _ => None,
            })
            .flatten()
            .collect()
    }

    /// The paths covered by something empty.
    pub fn hidden(&self) -> Vec<PathBuf> {
        self.walls
            .iter()
            .filter_map(|w| match w {
                Wall::Hide { path, .. } => Some(path.path().to_path_buf()),
                _ => None,
            })
            .collect()
    }
}

impl fmt::Display for Plan {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for wall in &self.walls {
            match wall {
                Wall::ReadOnlyHost => writeln!(f, "--ro-bind / /")?,
                Wall::Proc => writeln!(f, "--proc /proc")?,
                Wall::Dev { nodes } => {
                    writeln!(f, "--dev /dev  (read-only; pts, shm, fd)")?;
                    for node in nodes {
                        let path = Path::new("/dev").join(node.path());
                        writeln!(f, "--dev-bind {0} {0}", path.display())?;
                    }
                }
                Wall::Scratch { root, bytes } => writeln!(
                    f,
                    "--tmpfs {}  (the scratch: {} MiB, the probe's folder and every upper layer)",
                    root.path().display(),
                    bytes >> 20
                )?,
                Wall::Overlay(p) => match &self.flat {
                    None => writeln!(
                        f,
                        "--overlay {}  (writes into the scratch)",
                        p.path().display()
                    )?,
                    Some(why) => writeln!(
                        f,
                        "--bind SCRATCH {}  (the host's entries read-only, new names gone with the probe: overlayfs refused, {why})",
                        p.path().display()
                    )?,
                },
                Wall::Shm => writeln!(f, "--bind SCRATCH /dev/shm")?,
                Wall::ReadOnly(p) => writeln!(f, "--ro-bind {0} {0}", p.path().display())?,
                Wall::Bind { source, target } => writeln!(
                    f,
                    "--bind {} {}",
                    source.path().display(),
                    target.path().display()
                )?,
                Wall::Private(p) => writeln!(
                    f,
                    "--bind SCRATCH {}  (empty, gone with the probe)",
                    p.path().display()
                )?,
                Wall::Hide { path, .. } => writeln!(f, "--hide {}", path.path().display())?,
                Wall::Harden => writeln!(f, "--remount-ro /proc/sys /proc/sysrq-trigger")?,
            }
        }
        Ok(())
    }
}

/// The host's device nodes a probe gets (names below `/dev`, sorted):
/// [`DEVICES`] and the accelerators', where they exist.
pub(crate) fn device_nodes() -> Vec<RawPath> {
    let mut names: Vec<String> = DEVICES
        .iter()
        .filter(|n| Path::new("/dev").join(n).exists())
        .map(|n| n.to_string())
        .collect();
    if let Ok(entries) = std::fs::read_dir("/dev") {
        names.extend(
            entries
                .flatten()
                .filter_map(|e| e.file_name().into_string().ok())
                .filter(|n| is_accelerator(n)),
        );
    }
    names.sort();
    names.dedup();
    names.iter().map(|n| RawPath::from(Path::new(n))).collect()
}

/// What one sandbox asks of its walls; [`plan`] orders them.
pub(crate) struct Wanted<'a> {
    /// The sandbox's folder (canonical): the scratch goes on it.
    pub(crate) root: &'a Path,
    /// Bytes of the scratch.
    pub(crate) scratch: u64,
    /// The child's environment: where its home, JIT caches and token
    /// files are.
    pub(crate) env: &'a BTreeMap<OsString, OsString>,
    /// Folders whose writes go to a private layer: `/tmp`, `TMPDIR`.
    pub(crate) temp: &'a [PathBuf],
    /// Kept read-only inside the private layers too.
    pub(crate) read_only: &'a [PathBuf],
    /// Bound read-write from the host, as the caller asked.
    pub(crate) writable: &'a [PathBuf],
    /// Covered by something empty; made (an empty folder) first where
    /// missing, so that the probe cannot make it.
    pub(crate) hidden: &'a [PathBuf],
    /// Covered by something empty where they exist (the hub token files:
    /// a folder made in their place would break the next login).
    pub(crate) secrets: &'a [PathBuf],
    /// Where this probe's kernel keeps its JIT caches, if it has a store.
    pub(crate) jit_store: Option<&'a super::jit::KernelJit>,
    /// The reaper is root of the machine.
    pub(crate) harden: bool,
}

/// The walls of one probe, in order: the host read-only, a fresh `/proc`
/// and `/dev`, the scratch, the private layers (`/tmp`, `TMPDIR`, the home
/// folder), `/dev/shm`, the read-only binds, the JIT caches (the kernel's
/// own store, else private), CUDA's MPS pipes read-only, the caller's
/// writable binds, the hidden paths, the kernel's knobs as root.
pub(crate) fn plan(wanted: &Wanted) -> Plan {
    let canonical = |p: &Path| std::fs::canonicalize(p).ok();
    let existing = |paths: &mut dyn Iterator<Item = &Path>| -> Vec<RawPath> {
        let mut found: Vec<RawPath> = paths
            .filter_map(canonical)
            .map(|p| RawPath::from(p.as_path()))
            .collect();
        found.sort();
        found.dedup();
        found
    };
    let mut walls = vec![
        Wall::ReadOnlyHost,
        Wall::Proc,
        Wall::Dev {
            nodes: device_nodes(),
        },
        Wall::Scratch {
            root: RawPath::from(wanted.root),
            bytes: wanted.scratch,
        },
    ];
    let mut layers: Vec<PathBuf> = wanted.temp.to_vec();
    if let Some(home) = wanted
        .env
        .get(OsStr::new("HOME"))
        .and_then(|h| canonical(Path::new(h)))
        .filter(|h| h.is_dir() && h != Path::new("/") && !layers.contains(h))
    {
        layers.push(home);
    }
    walls.extend(
        layers
            .iter()
            .map(|p| Wall::Overlay(RawPath::from(p.as_path()))),
    );
    walls.push(Wall::Shm);
    walls.extend(
        existing(&mut wanted.read_only.iter().map(PathBuf::as_path))
            .into_iter()
            .map(Wall::ReadOnly),
    );
    let mut jit: Vec<(&str, PathBuf)> = super::env::jit_caches(wanted.env)
        .into_iter()
        .filter_map(|(name, p)| {
            Some((
                name,
                canonical(&p).or_else(|| std::path::absolute(&p).ok())?,
            ))
        })
        .collect();
    jit.sort_by(|a, b| a.1.cmp(&b.1));
    jit.dedup_by(|a, b| a.1 == b.1);
    for (name, path) in jit {
        let target = RawPath::from(path.as_path());
        // A store that cannot be made (the outcome cache it lives in is
        // read-only or not a folder: the run has already warned about
        // that cache) leaves the probe throwaway caches, as a sandbox with
        // no kernel gets: slower JIT, the same evidence.
        let kept = wanted.jit_store.and_then(|store| store.cache(name).ok());
        walls.push(match kept {
            Some(source) => Wall::Bind {
                source: RawPath::from(source.as_path()),
                target,
            },
            None => Wall::Private(target),
        });
    }
    walls.extend(
        existing(&mut std::iter::once(
            super::env::mps_pipes(wanted.env).as_path(),
        ))
        .into_iter()
        .map(Wall::ReadOnly),
    );
    walls.extend(
        existing(&mut wanted.writable.iter().map(PathBuf::as_path))
            .into_iter()
            .map(|p| Wall::Bind {
                source: p.clone(),
                target: p,
            }),
    );
    let mut hidden: Vec<(RawPath, bool)> = wanted
        .hidden
        .iter()
        .filter_map(|path| match std::fs::symlink_metadata(path) {
            Ok(_) => canonical(path).map(|p| (RawPath::from(p.as_path()), false)),
            Err(_) => std::path::absolute(path)
                .ok()
                .map(|p| (RawPath::from(p.as_path()), true)),
        })
        .chain(
            wanted
                .secrets
                .iter()
                .filter_map(|p| canonical(p))
                .map(|p| (RawPath::from(p.as_path()), false)),
        )
        .collect();
    hidden.sort();
    hidden.dedup();
    let hidden = hidden
        .into_iter()
        .map(|(path, make)| Wall::Hide { path, make });
    walls.extend(hidden);
    if wanted.harden {
        walls.push(Wall::Harden);
    }
    Plan {
        walls,
        flat: super::flat::refused(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_plan_reads_as_a_command_line_and_names_what_is_writable() {
        let p = |s: &str| RawPath::from(Path::new(s));
        let plan = Plan {
            walls: vec![
                Wall::ReadOnlyHost,
                Wall::Proc,
                Wall::Dev {
                    nodes: vec![p("null"), p("nvidia0")],
                },
                Wall::Scratch {
                    root: p("/tmp/preflight-x"),
                    bytes: 1 << 30,
                },
                Wall::Overlay(p("/tmp")),
                Wall::Shm,
                Wall::Bind {
                    source: p("/c/jit/k/triton"),
                    target: p("/h/.triton"),
                },
                Wall::Hide {
                    path: p("/c"),
                    make: false,
                },
            ],
            flat: None,
        };
        let text = plan.to_string();
        assert!(
            text.starts_with("--ro-bind / /\n--proc /proc\n--dev /dev"),
            "{text}"
        );
        assert!(
            text.contains("--dev-bind /dev/nvidia0 /dev/nvidia0\n"),
            "{text}"
        );
        assert!(
            text.contains("--bind /c/jit/k/triton /h/.triton\n"),
            "{text}"
        );
        assert!(text.ends_with("--hide /c\n"), "{text}");
        assert_eq!(
            plan.writable(),
            [
                "/proc",
                "/dev/pts",
                "/tmp/preflight-x",
                "/tmp",
                "/dev/shm",
                "/h/.triton"
            ]
            .map(PathBuf::from)
        );
        assert_eq!(plan.devices(), ["null", "nvidia0"].map(PathBuf::from));
        assert_eq!(plan.hidden(), [PathBuf::from("/c")]);
    }

    #[test]
    fn no_disk_reaches_a_probe() {
        for name in ["sda", "vda", "loop0", "zram0", "mem", "kmsg", "nvme0n1"] {
            assert!(!is_accelerator(name) && !DEVICES.contains(&name), "{name}");
        }
        for name in [
            "nvidia0",
            "nvidiactl",
            "nvidia-uvm",
            "nvidia-caps",
            "dri",
            "kfd",
        ] {
            assert!(is_accelerator(name), "{name}");
        }
    }
}
