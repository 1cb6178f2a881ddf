use super::super::Cache;
use super::super::job::{JobIdentity, OutcomeKey};
use super::MACHINE;
use crate::classify::Depth;
use crate::discover::{Metadata, MetadataStatus};
use crate::protocol::{ExecutorKind, PROTOCOL_VERSION};
use crate::variant::VariantName;
use base64::Engine;
use sha2::Digest;
use std::fs;
use std::path::{Path, PathBuf};

fn variant_dir(root: &Path, name: &str) -> PathBuf {
    let v = root.join(name);
    fs::create_dir_all(v.join("pkg/__pycache__")).unwrap();
    fs::write(v.join("__init__.py"), "x = 1\n").unwrap();
    fs::write(v.join("pkg/_ops.so"), vec![7u8; 4096]).unwrap();
    fs::write(v.join("pkg/__pycache__/x.cpython-311.pyc"), "junk").unwrap();
    v
}

fn b64(bytes: &[u8]) -> String {
    base64::engine::general_purpose::STANDARD.encode(sha2::Sha256::digest(bytes))
}

/// `metadata.json` text with a digest of `variant_dir`'s files.
fn metadata_json(init_hash: &str, depends: &[&str]) -> String {
    serde_json::json!({
        "name": "relu", "id": "_relu_cpu_1", "version": 1, "license": "MIT",
        "python-depends": depends, "backend": {"type": "cpu"},
        "digest": {"algorithm": "sha256", "files": {
            "__init__.py": init_hash,
            "pkg/_ops.so": b64(&[7u8; 4096]),
        }}
    })
    .to_string()
}

fn parse(json: &str) -> Metadata {
    match MetadataStatus::parse(json.as_bytes()) {
        MetadataStatus::Ok { metadata } => *metadata,
        other => panic!("{other:?}"),
    }
}

/// The job `run` makes for a hub variant.
fn job_of(cache: &Cache, dir: &Path, metadata: Option<&Metadata>) -> OutcomeKey {
    let name = VariantName::parse(&dir.file_name().unwrap().to_string_lossy()).unwrap();
    let (files, _) = cache.identities().identify(dir, metadata).unwrap();
    let job = JobIdentity {
        executor: ExecutorKind::Python,
        code: "python driver 0".into(),
        device: crate::probe::device_for(&name).to_string(),
        name: name.to_string(),
        files,
        smoke: "load-only:0".into(),
        depth: Depth::Verified,
        protocol: PROTOCOL_VERSION,
        device_code: None,
        made: Default::default(),
    };
    OutcomeKey::new(MACHINE, job)
}

#[test]
fn identity_reuses_stat_records_and_sees_changes() {
    let tmp = tempfile::tempdir().unwrap();
    let v = variant_dir(tmp.path(), "torch-cpu");
    let cache = Cache::at(tmp.path().join("cache"));
    let ids = cache.identities();
    let (first, s) = ids.identify(&v, None).unwrap();
    assert_eq!(
        (s.hashed, s.reused),
        (2, 0),
        "byte code is not part of the identity"
    );
    assert!(first.content.starts_with("content:"));
    assert_eq!(first.metadata, None, "no metadata.json");
    let (again, s) = ids.identify(&v, None).unwrap();
    assert_eq!(again, first);
    assert_eq!(
        (s.hashed, s.reused),
        (0, 2),
        "nothing changed: nothing hashed"
    );

    // The stat records outlive the process, in the identities bucket.
    let fresh = Cache::at(tmp.path().join("cache"));
    let (from_disk, s) = fresh.identities().identify(&v, None).unwrap();
    assert_eq!(from_disk, first);
    assert_eq!((s.hashed, s.reused), (0, 2));
    assert_eq!(
        fresh.keys(super::Shelf::IDENTITIES).len(),
        1,
        "one record per directory of variants"
    );

    // Python writing byte code while importing changes nothing.
    fs::write(v.join("pkg/__pycache__/y.cpython-311.pyc"), "more").unwrap();
    assert_eq!(ids.identify(&v, None).unwrap().0, first);

    // A touched file (same bytes, new mtime) is hashed again, same identity.
    let so = v.join("pkg/_ops.so");
    let f = fs::File::options().write(true).open(&so).unwrap();
    f.set_modified(std::time::SystemTime::now() + std::time::Duration::from_secs(5))
        .unwrap();
    let (touched, s) = ids.identify(&v, None).unwrap();
    assert_eq!(touched, first);
    assert_eq!(s.hashed, 1);

    // Changed bytes: a new identity.
    fs::write(&so, vec![8u8; 4096]).unwrap();
    let (changed, _) = ids.identify(&v, None).unwrap();
    assert_ne!(changed, first);

    // A copy elsewhere has the same identity (content, not place).
    let copy = variant_dir(&tmp.path().join("elsewhere"), "torch-cpu");
    fs::write(copy.join("pkg/_ops.so"), vec![8u8; 4096]).unwrap();
    assert_eq!(ids.identify(&copy, None).unwrap().0, changed);
}

#[test]
fn identity_uses_a_matching_metadata_digest() {
    let tmp = tempfile::tempdir().unwrap();
    let v = variant_dir(tmp.path(), "torch-cpu");
    let cache = Cache::at(tmp.path().join("cache"));
    let good = parse(&metadata_json(&b64(b"x = 1\n"), &[]));
    let (id, _) = cache.identities().identify(&v, Some(&good)).unwrap();
    assert!(id.content.starts_with("digest:"), "{id:?}");
    // Files that do not match their digest: identity from the files.
    let stale = parse(&metadata_json(&b64(b"x = 2\n"), &[]));
    let (id, _) = cache.identities().identify(&v, Some(&stale)).unwrap();
    assert!(id.content.starts_with("content:"), "{id:?}");
}

#[test]
fn identical_files_under_two_names_are_two_jobs() {
    let tmp = tempfile::tempdir().unwrap();
    let cache = Cache::at(tmp.path().join("cache"));
    let json = metadata_json(&b64(b"x = 1\n"), &[]);
    let mut keys = Vec::new();
    let mut files = Vec::new();
    for name in ["torch-cuda", "torch-universal"] {
        let dir = variant_dir(&tmp.path().join("build"), name);
        fs::write(dir.join("metadata.json"), &json).unwrap();
        let key = job_of(&cache, &dir, Some(&parse(&json)));
        files.push(key.parts.job.files.clone());
        keys.push(key.key);
    }
    assert_eq!(files[0], files[1], "the same files");
    assert_ne!(
        keys[0], keys[1],
        "another name (backend, device): another job"
    );
}

#[test]
fn changing_only_metadata_json_changes_the_key() {
    let tmp = tempfile::tempdir().unwrap();
    let cache = Cache::at(tmp.path().join("cache"));
    let dir = variant_dir(tmp.path(), "torch-cpu");
    let before_json = metadata_json(&b64(b"x = 1\n"), &[]);
    fs::write(dir.join("metadata.json"), &before_json).unwrap();
    let before = job_of(&cache, &dir, Some(&parse(&before_json)));

    // New dependencies, same digest: the digest identity alone would not see it.
    let after_json = metadata_json(&b64(b"x = 1\n"), &["einops"]);
    fs::write(dir.join("metadata.json"), &after_json).unwrap();
    let after = job_of(&cache, &dir, Some(&parse(&after_json)));

    assert!(before.parts.job.files.content.starts_with("digest:"));
    assert_eq!(
        before.parts.job.files.content, after.parts.job.files.content,
        "the digest covers the other files only"
    );
    assert_ne!(
        before.parts.job.files.metadata,
        after.parts.job.files.metadata
    );
    assert_ne!(before.key, after.key);
}

#[test]
fn a_listing_is_trusted_only_while_no_folder_changed() {
    let tmp = tempfile::tempdir().unwrap();
    let v = variant_dir(tmp.path(), "torch-cpu");
    let cache = Cache::at(tmp.path().join("cache"));
    let ids = cache.identities();
    let (first, s) = ids.identify(&v, None).unwrap();
    assert!(s.listed);
    // Just created: the folders changed too recently for their listing to
    // be trusted, so a file added now is seen.
    fs::write(v.join("extra.py"), "y = 2\n").unwrap();
    let (with_extra, s) = ids.identify(&v, None).unwrap();
    assert!(s.listed);
    assert_ne!(with_extra, first);

    // Folders last changed long ago: the recorded listing is trusted.
    let past = std::time::SystemTime::now() - std::time::Duration::from_secs(60);
    for dir in [v.clone(), v.join("pkg")] {
        fs::File::open(&dir).unwrap().set_modified(past).unwrap();
    }
    let (again, s) = ids.identify(&v, None).unwrap();
    assert!(s.listed, "folder mtimes moved: listed once more");
    assert_eq!(again, with_extra);
    let (again, s) = ids.identify(&v, None).unwrap();
    assert!(!s.listed, "nothing changed: the record's listing is used");
    assert_eq!((&again, s.hashed), (&with_extra, 0));

    // A file added to a subfolder moves that folder's mtime.
    fs::write(v.join("pkg/new.so"), vec![9u8; 10]).unwrap();
    let (grown, s) = ids.identify(&v, None).unwrap();
    assert!(s.listed);
    assert_ne!(grown, with_extra);
    // A removed file too.
    fs::remove_file(v.join("pkg/new.so")).unwrap();
    assert_eq!(ids.identify(&v, None).unwrap().0, with_extra);
}

/// A file rewritten in place, its size, inode and modification time put
/// back: its status change time moved, and the stat record no longer
/// vouches for it.
#[test]
fn a_file_rewritten_with_its_stat_put_back_is_hashed_again() {
    use std::os::unix::fs::MetadataExt;
    let tmp = tempfile::tempdir().unwrap();
    let v = variant_dir(tmp.path(), "torch-cpu");
    let cache = Cache::at(tmp.path().join("cache"));
    let (before, _) = cache.identities().identify(&v, None).unwrap();
    let init = v.join("__init__.py");
    let meta = fs::metadata(&init).unwrap();
    std::thread::sleep(std::time::Duration::from_millis(20));
    fs::write(&init, "y = 2\n").unwrap();
    let times = [
        nix::sys::time::TimeSpec::new(meta.atime(), meta.atime_nsec()),
        nix::sys::time::TimeSpec::new(meta.mtime(), meta.mtime_nsec()),
    ];
    nix::sys::stat::utimensat(
        nix::fcntl::AT_FDCWD,
        &init,
        &times[0],
        &times[1],
        nix::sys::stat::UtimensatFlags::FollowSymlink,
    )
    .unwrap();
    let now = fs::metadata(&init).unwrap();
    assert_eq!(
        (now.len(), now.ino(), now.mtime(), now.mtime_nsec()),
        (meta.len(), meta.ino(), meta.mtime(), meta.mtime_nsec())
    );
    let (after, stats) = Cache::at(tmp.path().join("cache"))
        .identities()
        .identify(&v, None)
        .unwrap();
    assert_eq!(stats.hashed, 1, "{stats:?}");
    assert_ne!(after, before);
}

/// Two variants whose only difference is a file name that differs in a
/// byte that is not UTF-8 are two identities.
#[test]
fn file_names_are_kept_whole() {
    use std::os::unix::ffi::OsStrExt;
    let tmp = tempfile::tempdir().unwrap();
    let cache = Cache::at(tmp.path().join("cache"));
    let mut seen = Vec::new();
    for (dir, name) in [
        ("a", &b"k\xff.py"[..]),
        ("b", &b"k\xfe.py"[..]),
        ("c", b"k%FF.py"),
    ] {
        let v = tmp.path().join(dir).join("torch-cpu");
        fs::create_dir_all(&v).unwrap();
        fs::write(v.join(std::ffi::OsStr::from_bytes(name)), "x = 1\n").unwrap();
        let (files, _) = cache.identities().identify(&v, None).unwrap();
        assert!(!seen.contains(&files.content), "{name:?}");
        seen.push(files.content);
        // The record found again by its names: nothing hashed twice.
        let (_, stats) = cache.identities().identify(&v, None).unwrap();
        assert_eq!(stats.hashed, 0, "{name:?}: {stats:?}");
    }
}
