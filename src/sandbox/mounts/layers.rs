//! The private layers of a probe (`/tmp`, `TMPDIR`, its home folder):
//! overlays whose upper layers are in the scratch, or, where Linux refuses
//! overlayfs, private folders holding the host's entries read-only, each
//! bound in its place (`crate::sandbox::flat`): the probe reads what the
//! host has there (a venv under `/tmp`, a hub cache in the home folder),
//! writes new names privately, and cannot change an entry of the host's.

use super::{Builder, Failed, at, bind, bind_rec, fd_path, io_at, set_read_only};
use crate::sandbox::spawn::Step;
use nix::errno::Errno;
use nix::mount::{MsFlags, mount};
use std::fs::{self, File};
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::Path;

impl Builder {
    /// `path` through an overlay whose upper layer is in the scratch;
    /// where Linux refuses the overlay, a private folder holding the
    /// host's entries read-only instead ([`Builder::mirror`]).
    pub(super) fn overlay(&mut self, path: &Path) -> Result<(), Failed> {
        let Some(lower) = self.host.get(path) else {
            return Ok(());
        };
        let mode = nix::sys::stat::fstat(lower).map_or(0o1777, |s| s.st_mode & 0o7777);
        let lower = fd_path(lower);
        let upper = self
            .fresh("upper", mode, true)
            .map_err(io_at(Step::MountScratch))?;
        let work = self
            .fresh("work", 0o700, true)
            .map_err(io_at(Step::MountScratch))?;
        let options = format!(
            "lowerdir={},upperdir={},workdir={}",
            lower.display(),
            upper.display(),
            work.display()
        );
        let tried = || match self.refuse {
            true => Err(Errno::EPERM),
            false => mount(
                Some("overlay"),
                path,
                Some("overlay"),
                MsFlags::MS_NOSUID | MsFlags::MS_NODEV,
                Some(options.as_str()),
            ),
        };
        let overlaid = !self.flat
            && tried()
                .inspect_err(|errno| {
                    self.refused
                        .get_or_insert_with(|| format!("mount overlay: {}", errno.desc()));
                })
                .is_ok();
        if !overlaid && path.is_dir() {
            bind(&upper, path).map_err(at(Step::MountScratch))?;
            self.mirror(&lower, path);
            // The sandbox's folder needs its place for the scratch below,
            // whatever the host holds there.
            if let Ok(rest) = self.root.strip_prefix(path)
                && !rest.as_os_str().is_empty()
            {
                fs::create_dir_all(&self.root).map_err(io_at(Step::MountScratch))?;
            }
        }
        // An overlay on a folder holding the sandbox shows the host's copy
        // of it: the scratch goes back on top.
        if self.root.starts_with(path)
            && let Some(scratch) = &self.scratch
        {
            bind(&fd_path(scratch), &self.root).map_err(at(Step::MountScratch))?;
        }
        Ok(())
    }
}

impl Builder {
    /// The entries of the host's folder `host` (seen through its handle),
    /// each in its place below `at` (a private folder): a folder or a file
    /// bound read-only, a symbolic link made again. A folder holding a
    /// later wall's target is a private folder, mirrored the same way down
    /// to the target, which gets an empty place of its kind (the wall
    /// mounts on it). Sockets, FIFOs and devices are left out. Entries
    /// that vanish meanwhile, or cannot be bound, are left out too: what a
    /// probe cannot see it cannot change.
    fn mirror(&self, host: &Path, at: &Path) {
        let Ok(entries) = fs::read_dir(host) else {
            return;
        };
        for entry in entries.flatten() {
            let name = entry.file_name();
            let (from, to) = (host.join(&name), at.join(&name));
            let Ok(meta) = fs::symlink_metadata(&from) else {
                continue;
            };
            let kind = meta.file_type();
            let covered = self.targets.iter().any(|t| t == &to);
            if kind.is_symlink() {
                if let Ok(link) = fs::read_link(&from) {
                    let _ = std::os::unix::fs::symlink(link, &to);
                }
            } else if kind.is_dir() {
                if fs::create_dir(&to).is_err() {
                    continue;
                }
                if self.targets.iter().any(|t| t != &to && t.starts_with(&to)) {
                    self.mirror(&from, &to);
                } else if !covered && bind_rec(&from, &to).is_ok() {
                    let _ = set_read_only(&to);
                }
                let mode = fs::Permissions::from_mode(meta.mode() & 0o7777);
                let _ = fs::set_permissions(&to, mode);
            } else if kind.is_file() {
                if File::create(&to).is_err() {
                    continue;
                }
                if !covered && bind(&from, &to).is_ok() {
                    let _ = set_read_only(&to);
                }
            }
        }
    }
}

/// Makes a place for `source` at `target` where there is none: below a
/// private folder (a refused overlay) the host's paths may be missing.
/// Elsewhere the host is read-only and the place is already there.
pub(super) fn make_place(source: &Path, target: &Path) -> bool {
    if fs::symlink_metadata(target).is_ok() {
        return true;
    }
    if source.is_dir() {
        return fs::create_dir_all(target).is_ok();
    }
    target
        .parent()
        .is_some_and(|parent| fs::create_dir_all(parent).is_ok())
        && File::create(target).is_ok()
}
