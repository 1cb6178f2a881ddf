//! The probe's working directory across its walls (reaper side): what the
//! parent put there is carried into the scratch before the probe starts,
//! and what the probe left there is copied back to the host, within a
//! bound, when it is over.

use super::mounts::{Built, bind, bind_rec, fd_path, set_read_only};
use std::ffi::OsStr;
use std::fs::{self, File, OpenOptions};
use std::io::{self, Read};
use std::os::fd::OwnedFd;
use std::os::unix::fs::{MetadataExt, OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};

/// Most bytes copied back to the host after a probe: far more than any
/// result, far less than a probe could write.
const COPY_BACK_BYTES: u64 = 64 << 20;
/// Most entries copied back, and the deepest folder.
const COPY_BACK_ENTRIES: usize = 4096;
const COPY_BACK_DEPTH: usize = 8;

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
    pub(crate) fn carry_in(&mut self) -> io::Result<()> {
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
