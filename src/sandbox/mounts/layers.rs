//! The private layers of a probe (`/tmp`, `TMPDIR`, its home folder):
//! overlays whose upper layers are in the scratch, or, where Linux refuses
//! overlayfs, empty private folders that keep a place for what is bound
//! into them (`crate::sandbox::flat`).

use super::{Builder, Failed, at, bind, fd_path, io_at};
use crate::sandbox::spawn::Step;
use nix::errno::Errno;
use nix::mount::{MsFlags, mount};
use std::fs::{self, File};
use std::path::Path;

impl Builder {
    /// `path` through an overlay whose upper layer is in the scratch;
    /// where Linux refuses the overlay, an empty private folder instead.
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
            // The empty folder keeps a place for the sandbox's folder when
            // it holds it, or the scratch below would have nowhere to go.
            if let Ok(rest) = self.root.strip_prefix(path)
                && !rest.as_os_str().is_empty()
            {
                fs::create_dir_all(upper.join(rest)).map_err(io_at(Step::MountScratch))?;
            }
            bind(&upper, path).map_err(at(Step::MountScratch))?;
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

/// Makes a place for `source` at `target` where there is none: under an
/// empty private folder (a refused overlay) the host's paths are gone.
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
