//! What a test run as `nobody` needs from a checkout it may not read (a
//! clone under root's 0700 home): the test binary, the `preflight` binary
//! and the fixtures, linked (or copied) into a folder of its own under
//! `/var/tmp` that every user can read, and a scratch there it can write.

use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};

/// The readable copy; removed when dropped.
pub struct ForNobody {
    dir: PathBuf,
    /// This test binary, for `nobody` to run.
    pub test: PathBuf,
    /// The scratch of the run as `nobody` (1777).
    pub scratch: PathBuf,
}

impl ForNobody {
    /// Makes the copy of this test binary, `preflight` and tests/fixtures.
    pub fn new() -> ForNobody {
        use std::sync::atomic::{AtomicUsize, Ordering};
        static N: AtomicUsize = AtomicUsize::new(0);
        let dir = PathBuf::from(format!(
            "/var/tmp/kernel-preflight-nobody-{}-{}",
            std::process::id(),
            N.fetch_add(1, Ordering::Relaxed)
        ));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).expect("a folder under /var/tmp");
        let mode = |p: &Path, m| std::fs::set_permissions(p, std::fs::Permissions::from_mode(m));
        mode(&dir, 0o755).expect("chmod");
        let test = dir.join("test");
        place(&std::env::current_exe().expect("test binary"), &test);
        place(&super::preflight_bin(), &dir.join("preflight"));
        copy_tree(&super::fixtures(), &dir.join("fixtures"));
        let scratch = dir.join("scratch");
        std::fs::create_dir(&scratch).expect("scratch");
        mode(&scratch, 0o1777).expect("chmod");
        ForNobody { dir, test, scratch }
    }

    /// The copy of `preflight`.
    pub fn preflight(&self) -> PathBuf {
        self.dir.join("preflight")
    }

    /// The variables that point a test run as `nobody` at the copy.
    pub fn env(&self) -> [(&'static str, PathBuf); 3] {
        [
            ("PREFLIGHT_TEST_BINARY", self.preflight()),
            ("PREFLIGHT_TEST_FIXTURES", self.dir.join("fixtures")),
            ("PREFLIGHT_TEST_SCRATCH", self.scratch.clone()),
        ]
    }
}

impl Drop for ForNobody {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// `to` names the program `from`: a hard link where both are on one file
/// system (no copy of a debug binary's hundred megabytes), else a copy.
fn place(from: &Path, to: &Path) {
    if std::fs::hard_link(from, to).is_err() {
        std::fs::copy(from, to).unwrap_or_else(|e| panic!("{}: {e}", from.display()));
    }
    std::fs::set_permissions(to, std::fs::Permissions::from_mode(0o755)).expect("chmod");
}

/// Copies the folder `from` to `to`, readable by every user.
fn copy_tree(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).expect("mkdir");
    std::fs::set_permissions(to, std::fs::Permissions::from_mode(0o755)).expect("chmod");
    for entry in std::fs::read_dir(from).expect("read_dir").flatten() {
        let (source, target) = (entry.path(), to.join(entry.file_name()));
        let kind = entry.file_type().expect("file type");
        if kind.is_dir() {
            copy_tree(&source, &target);
        } else if kind.is_file() {
            std::fs::copy(&source, &target).expect("copy");
            let m = if source
                .metadata()
                .is_ok_and(|m| m.permissions().mode() & 0o111 != 0)
            {
                0o755
            } else {
                0o644
            };
            std::fs::set_permissions(&target, std::fs::Permissions::from_mode(m)).expect("chmod");
        }
    }
}
