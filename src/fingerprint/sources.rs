//! Where the facts come from: a snapshot of the environment variables and
//! the roots standing in for `/sys` and `/proc`.

use super::FingerprintError;
use std::collections::BTreeMap;
use std::path::PathBuf;

/// Everything a fingerprint reads besides files, captured once so that a
/// test (or a caller describing another machine) can pass its own.
#[derive(Debug, Clone)]
pub struct Sources {
    /// The environment variables (only those that are valid UTF-8).
    pub env: BTreeMap<String, String>,
    /// Stands in for `/sys` (`PREFLIGHT_SYSFS_ROOT`).
    pub sys_root: PathBuf,
    /// Stands in for `/proc` (`PREFLIGHT_PROCFS_ROOT`).
    pub proc_root: PathBuf,
    /// Stands in for `/dev` (`PREFLIGHT_DEVFS_ROOT`): the GPUs' device nodes.
    pub dev_root: PathBuf,
    /// The interpreter given on the command line (`--python`).
    pub python: Option<PathBuf>,
    /// Packages to report besides the built-in list (a variant's
    /// `python-depends`), by distribution name.
    pub extra_packages: Vec<String>,
}

impl Sources {
    /// Sources of this process: its environment, `/sys` and `/proc` (or
    /// their redirections).
    pub fn from_process() -> Sources {
        let env = std::env::vars_os()
            .filter_map(|(k, v)| Some((k.into_string().ok()?, v.into_string().ok()?)))
            .collect();
        Sources::from_vars(env)
    }

    /// Sources described by these environment variables alone.
    pub fn from_vars(env: BTreeMap<String, String>) -> Sources {
        let get = |k: &str| env.get(k).filter(|v| !v.is_empty()).map(PathBuf::from);
        let sys_root = get("PREFLIGHT_SYSFS_ROOT").unwrap_or_else(|| PathBuf::from("/sys"));
        let proc_root = get("PREFLIGHT_PROCFS_ROOT").unwrap_or_else(|| PathBuf::from("/proc"));
        let dev_root = get("PREFLIGHT_DEVFS_ROOT").unwrap_or_else(|| PathBuf::from("/dev"));
        Sources {
            env,
            sys_root,
            proc_root,
            dev_root,
            python: None,
            extra_packages: Vec::new(),
        }
    }

    /// A variable's value; unset and empty are the same.
    pub(crate) fn var(&self, key: &str) -> Option<&str> {
        self.raw_var(key).filter(|v| !v.is_empty())
    }

    /// A variable's value as it is (empty is not unset), recorded
    /// ([`crate::seen::var`]).
    pub(crate) fn raw_var(&self, key: &str) -> Option<&str> {
        let value = self.env.get(key).map(String::as_str);
        crate::seen::var(key, value);
        value
    }

    /// An override: `Ok(None)` when unset, `Ok(Some(None))` for `none`.
    pub(crate) fn override_opt(&self, key: &str) -> Option<Option<&str>> {
        self.var(key)
            .map(|v| if v == "none" { None } else { Some(v) })
    }

    /// A parsed override, with the variable named in the error.
    pub(crate) fn override_parsed<T>(
        &self,
        key: &str,
        parse: impl FnOnce(&str) -> Result<T, String>,
    ) -> Result<Option<T>, FingerprintError> {
        match self.var(key) {
            None => Ok(None),
            Some(value) => parse(value)
                .map(Some)
                .map_err(|why| FingerprintError::BadOverride {
                    var: key.to_string(),
                    value: value.to_string(),
                    why,
                }),
        }
    }
}

/// Folder listings made during one fingerprint, so that each folder is
/// listed once: site-packages is listed for the installed packages, then
/// asked again for the version of each CUDA wheel, and a toolkit's `lib`
/// folder for NVRTC, then for the runtime. Made anew for every
/// fingerprint, so a folder that changes between two is seen to. (A
/// `BTreeMap`: a `HashMap` would ask the kernel for random keys, one more
/// system call in every fingerprint.)
#[derive(Debug, Default)]
pub(crate) struct Listings(
    std::cell::RefCell<std::collections::BTreeMap<PathBuf, std::rc::Rc<[std::ffi::OsString]>>>,
);

impl Listings {
    /// The entry names of `dir`, unsorted; none when it cannot be listed.
    pub(crate) fn names(&self, dir: &std::path::Path) -> std::rc::Rc<[std::ffi::OsString]> {
        if let Some(names) = self.0.borrow().get(dir) {
            return std::rc::Rc::clone(names);
        }
        let names: std::rc::Rc<[std::ffi::OsString]> = crate::seen::names(dir).into();
        self.0
            .borrow_mut()
            .insert(dir.to_path_buf(), std::rc::Rc::clone(&names));
        names
    }
}

/// What identifies a file or folder whatever the path it is reached by
/// (device and inode): two paths with the same id are one place. One `stat`,
/// where canonicalizing a path costs a `readlink` per component.
pub(crate) fn place_id(path: &std::path::Path) -> Option<(u64, u64)> {
    use std::os::unix::fs::MetadataExt;
    crate::seen::metadata(path).ok().map(|m| (m.dev(), m.ino()))
}

/// The folders of a `PATH` value in order, each once: a folder named twice
/// (a shell profile that adds one on every login) would only be searched
/// again for the same answer, a `stat` each time.
pub(crate) fn path_dirs(path: &str) -> Vec<PathBuf> {
    let mut dirs: Vec<PathBuf> = Vec::new();
    for dir in std::env::split_paths(path) {
        if !dirs.contains(&dir) {
            dirs.push(dir);
        }
    }
    dirs
}
