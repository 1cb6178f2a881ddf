//! The kernels' JIT store under the root: `clear` takes it, `prune` takes
//! what belongs to kernels that are gone, made by the sandbox's own walls.

use super::super::Cache;
use std::fs;
use std::path::Path;
use std::time::{Duration, SystemTime};

/// Makes `key`'s JIT caches in the store as a probe of the kernel whose
/// files are `kernel` would (the walls make them before a probe starts),
/// and plants a compiled entry in each.
fn probe_store(root: &Path, key: &str, kernel: &Path) {
    // The store named outright: the process's store is whichever cache
    // another test opened last.
    let sandbox =
        crate::sandbox::Sandbox::new()
            .unwrap()
            .jit_caches_in(&root.join("jit"), key, kernel);
    sandbox.plan().unwrap();
    let dir = root.join("jit").join(key);
    let caches: Vec<_> = fs::read_dir(&dir)
        .unwrap()
        .flatten()
        .filter(|e| e.path().is_dir())
        .collect();
    assert!(!caches.is_empty(), "the walls made no JIT cache in {dir:?}");
    for cache in caches {
        fs::write(cache.path().join("compiled.so"), "elf").unwrap();
    }
}

fn age(path: &Path) {
    fs::File::open(path)
        .unwrap()
        .set_modified(SystemTime::now() - Duration::from_secs(7200))
        .unwrap();
}

#[test]
fn prune_drops_the_jit_caches_of_kernels_that_are_gone_and_clear_drops_all() {
    let tmp = tempfile::tempdir().unwrap();
    let kept = tmp.path().join("kernels/kept");
    let gone = tmp.path().join("kernels/gone");
    fs::create_dir_all(&kept).unwrap();
    fs::create_dir_all(&gone).unwrap();
    let cache = Cache::at(tmp.path().join("cache"));
    cache.ensure().unwrap();
    let store = cache.root().join("jit");
    probe_store(cache.root(), "kept", &kept);
    probe_store(cache.root(), "gone", &gone);
    fs::remove_dir_all(&gone).unwrap();
    // Folders that say of no kernel whose they are: an old one, a stray
    // file, and one a probe is making right now.
    let old = store.join("no-record");
    fs::create_dir_all(old.join("triton")).unwrap();
    age(&old);
    let stray = store.join("stray.txt");
    fs::write(&stray, "?").unwrap();
    age(&stray);
    let young = store.join("being-made");
    fs::create_dir_all(&young).unwrap();

    let report = cache.prune().unwrap();
    assert_eq!(report.jit_stores, 3, "{report:?}");
    let mut left: Vec<_> = fs::read_dir(&store)
        .unwrap()
        .flatten()
        .map(|e| e.file_name())
        .collect();
    left.sort();
    assert_eq!(left, ["being-made", "kept"]);
    assert!(
        fs::read_dir(store.join("kept"))
            .unwrap()
            .flatten()
            .any(|c| c.path().join("compiled.so").is_file()),
        "the live kernel's compiled entries stay"
    );
    assert_eq!(
        cache.prune().unwrap().jit_stores,
        0,
        "nothing left to prune"
    );

    let report = cache.clear().unwrap();
    assert!(report.folders.contains(&store), "{report:?}");
    assert!(!store.exists(), "clear left the JIT store");
    assert!(report.files >= 2, "{report:?}");
    assert!(cache.root().join("CACHEDIR.TAG").is_file());
}
