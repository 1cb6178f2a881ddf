use super::*;
use crate::discover::MetadataStatus;
use std::fs;
use std::os::unix::fs::PermissionsExt;

fn parts(variant: &str) -> KeyParts {
    KeyParts {
        schema: SCHEMA,
        fingerprint: "f".repeat(64),
        variant: variant.into(),
        smoke: "none".into(),
    }
}

#[test]
fn key_is_sensitive_to_every_part_and_stable() {
    let base = parts("content:abc");
    assert_eq!(base.key(), parts("content:abc").key());
    let mut changed = vec![];
    for f in 0..4 {
        let mut p = base.clone();
        match f {
            0 => p.schema += 1,
            1 => p.fingerprint.push('0'),
            2 => p.variant.push('x'),
            _ => p.smoke = "file:1".into(),
        }
        changed.push(p.key());
    }
    assert!(changed.iter().all(|k| *k != base.key()));
    // Length prefixes: moving a character between fields changes the key.
    let mut a = base.clone();
    a.variant = "ab".into();
    a.smoke = "c".into();
    let mut b = base.clone();
    b.variant = "a".into();
    b.smoke = "bc".into();
    assert_ne!(a.key(), b.key());
    assert_eq!(base.key().as_str().len(), 64);
}

#[test]
fn put_get_layout_and_permissions() {
    let tmp = tempfile::tempdir().unwrap();
    let store = Store::at(tmp.path().join("cache"));
    let entry = Entry::new(parts("v1"), serde_json::json!({"kind": "pass"}));
    let path = store.put(&entry).unwrap();
    assert!(path.starts_with(store.root().join(format!("outcomes-v{SCHEMA}"))));
    assert!(store.root().join("CACHEDIR.TAG").is_file());
    let mode = |p: &std::path::Path| fs::metadata(p).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode(store.root()), 0o700);
    assert_eq!(mode(path.parent().unwrap()), 0o700);
    assert_eq!(mode(&path), 0o600);
    match store.get::<serde_json::Value>(&entry.key) {
        Lookup::Hit(e) => assert_eq!(e.record["kind"], "pass"),
        other => panic!("expected a hit, got {other:?}"),
    }
    assert!(matches!(
        store.get::<serde_json::Value>(&parts("other").key()),
        Lookup::Miss
    ));
    assert_eq!(store.keys().len(), 1);
    assert!(store.stale_temp_files().is_empty());
}

#[test]
fn corrupt_and_mismatched_entries_are_misses_and_removed() {
    let tmp = tempfile::tempdir().unwrap();
    let store = Store::at(tmp.path());
    let good = Entry::new(parts("good"), 1u32);
    let path = store.put(&good).unwrap();
    let bytes = fs::read(&path).unwrap();

    // Truncated.
    fs::write(&path, &bytes[..bytes.len() / 2]).unwrap();
    assert!(matches!(store.get::<u32>(&good.key), Lookup::Corrupt(_)));
    assert!(!path.exists(), "a corrupt entry is removed");

    // Random bytes.
    store.put(&good).unwrap();
    fs::write(&path, [0xde, 0xad, 0xbe, 0xef, 0, 1, 2]).unwrap();
    assert!(matches!(store.get::<u32>(&good.key), Lookup::Corrupt(_)));

    // Valid JSON of another key, copied under this key's name.
    let other = Entry::new(parts("other"), 2u32);
    let other_path = store.put(&other).unwrap();
    fs::create_dir_all(path.parent().unwrap()).unwrap();
    fs::copy(&other_path, &path).unwrap();
    match store.get::<u32>(&good.key) {
        Lookup::Corrupt(why) => assert!(why.contains("does not match its key"), "{why}"),
        other => panic!("expected corrupt, got {other:?}"),
    }

    // Parts edited after the key was computed.
    let mut forged = Entry::new(parts("good"), 3u32);
    forged.parts.variant = "forged".into();
    fs::write(&path, serde_json::to_vec(&forged).unwrap()).unwrap();
    assert!(matches!(store.get::<u32>(&good.key), Lookup::Corrupt(_)));

    // An entry of another schema is never read.
    let mut old = Entry::new(parts("good"), 4u32);
    old.schema = SCHEMA + 1;
    fs::write(&path, serde_json::to_vec(&old).unwrap()).unwrap();
    assert!(matches!(store.get::<u32>(&good.key), Lookup::Corrupt(_)));
}

#[test]
fn keys_parse_strictly() {
    assert!(Key::parse("abc").is_err());
    assert!(Key::parse(&"g".repeat(64)).is_err());
    assert_eq!(
        Key::parse(&"AB".repeat(32)).unwrap().as_str(),
        "ab".repeat(32)
    );
}

fn variant_dir(root: &std::path::Path) -> std::path::PathBuf {
    let v = root.join("torch-cpu");
    fs::create_dir_all(v.join("pkg/__pycache__")).unwrap();
    fs::write(v.join("__init__.py"), "x = 1\n").unwrap();
    fs::write(v.join("pkg/_ops.so"), vec![7u8; 4096]).unwrap();
    fs::write(v.join("pkg/__pycache__/x.cpython-311.pyc"), "junk").unwrap();
    v
}

#[test]
fn identity_reuses_stat_records_and_sees_changes() {
    let tmp = tempfile::tempdir().unwrap();
    let v = variant_dir(tmp.path());
    let ids = Identities::new(tmp.path().join("ids"));
    let (first, s) = ids.identify(&v, None).unwrap();
    assert_eq!(
        (s.hashed, s.reused),
        (2, 0),
        "byte code is not part of the identity"
    );
    assert!(first.starts_with("content:"));
    let (again, s) = ids.identify(&v, None).unwrap();
    assert_eq!(again, first);
    assert_eq!(
        (s.hashed, s.reused),
        (0, 2),
        "nothing changed: nothing hashed"
    );

    // The stat records outlive the process.
    let (from_disk, s) = Identities::new(tmp.path().join("ids"))
        .identify(&v, None)
        .unwrap();
    assert_eq!(from_disk, first);
    assert_eq!((s.hashed, s.reused), (0, 2));

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
    let copy_root = tmp.path().join("elsewhere");
    let copy = variant_dir(&copy_root);
    fs::write(copy.join("pkg/_ops.so"), vec![8u8; 4096]).unwrap();
    assert_eq!(ids.identify(&copy, None).unwrap().0, changed);
}

#[test]
fn identity_uses_a_matching_metadata_digest() {
    use base64::Engine;
    use sha2::Digest;
    let tmp = tempfile::tempdir().unwrap();
    let v = variant_dir(tmp.path());
    let b64 = |b: &[u8]| base64::engine::general_purpose::STANDARD.encode(sha2::Sha256::digest(b));
    let metadata = |init_hash: String| {
        let json = serde_json::json!({
            "name": "relu", "id": "_relu_cpu_1", "version": 1, "license": "MIT",
            "python-depends": [], "backend": {"type": "cpu"},
            "digest": {"algorithm": "sha256", "files": {
                "__init__.py": init_hash,
                "pkg/_ops.so": b64(&[7u8; 4096]),
            }}
        });
        match MetadataStatus::parse(json.to_string().as_bytes()) {
            MetadataStatus::Ok { metadata } => *metadata,
            other => panic!("{other:?}"),
        }
    };
    let ids = Identities::new(tmp.path().join("ids"));
    let good = metadata(b64(b"x = 1\n"));
    let (id, _) = ids.identify(&v, Some(&good)).unwrap();
    assert!(id.starts_with("digest:"), "{id}");
    // Files that do not match their digest: identity from the files.
    let stale = metadata(b64(b"x = 2\n"));
    let (id, _) = ids.identify(&v, Some(&stale)).unwrap();
    assert!(id.starts_with("content:"), "{id}");
}

#[test]
fn export_import_round_trip_never_replaces_newer_local() {
    let tmp = tempfile::tempdir().unwrap();
    let a = Store::at(tmp.path().join("a"));
    let b = Store::at(tmp.path().join("b"));
    let mut old = Entry::new(parts("x"), "old".to_string());
    old.created = 100;
    a.put(&old).unwrap();
    a.put(&Entry::new(parts("y"), "y".to_string())).unwrap();
    let mut bundle = Vec::new();
    assert_eq!(ops::export::<String>(&a, &mut bundle).unwrap(), 2);

    // b has a newer entry for x.
    let mut newer = Entry::new(parts("x"), "newer".to_string());
    newer.created = 200;
    b.put(&newer).unwrap();
    let mut input = bundle.clone();
    input.extend_from_slice(b"not json\n\n");
    let mut forged = Entry::new(parts("z"), "z".to_string());
    forged.parts.smoke = "changed".into();
    input.extend_from_slice(serde_json::to_string(&forged).unwrap().as_bytes());
    input.push(b'\n');
    let report = ops::import::<String>(&b, &input[..]).unwrap();
    assert_eq!(report.imported, 1);
    assert_eq!(report.kept_local, 1);
    assert_eq!(report.rejected.len(), 2, "{:?}", report.rejected);
    assert_eq!(report.rejected[0].0, 3);
    match b.get::<String>(&parts("x").key()) {
        Lookup::Hit(e) => assert_eq!(e.record, "newer"),
        other => panic!("{other:?}"),
    }
    // Importing again changes nothing.
    let again = ops::import::<String>(&b, &bundle[..]).unwrap();
    assert_eq!((again.imported, again.kept_local), (0, 2));
}

#[test]
fn prune_removes_gone_variants_old_schemas_and_corrupt_files() {
    let tmp = tempfile::tempdir().unwrap();
    let store = Store::at(tmp.path());
    store
        .put(&Entry::new(parts("live"), "live".to_string()))
        .unwrap();
    let gone = store
        .put(&Entry::new(parts("gone"), "gone".to_string()))
        .unwrap();
    let corrupt = store
        .put(&Entry::new(parts("bad"), "bad".to_string()))
        .unwrap();
    fs::write(&corrupt, "{").unwrap();
    let old_schema = tmp.path().join("outcomes-v0/ab");
    fs::create_dir_all(&old_schema).unwrap();
    let report = ops::prune::<String>(&store, |e| e.record == "live").unwrap();
    assert_eq!(report.entries, 2);
    assert_eq!(report.schema_dirs.len(), 1);
    assert!(!gone.exists() && !corrupt.exists());
    assert!(!tmp.path().join("outcomes-v0").exists());
    assert_eq!(ops::entries::<String>(&store).len(), 1);
}

#[test]
fn a_listing_is_trusted_only_while_no_folder_changed() {
    let tmp = tempfile::tempdir().unwrap();
    let v = variant_dir(tmp.path());
    let ids = Identities::new(tmp.path().join("ids"));
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
    assert_eq!((again.as_str(), s.hashed), (with_extra.as_str(), 0));

    // A file added to a subfolder moves that folder's mtime.
    fs::write(v.join("pkg/new.so"), vec![9u8; 10]).unwrap();
    let (grown, s) = ids.identify(&v, None).unwrap();
    assert!(s.listed);
    assert_ne!(grown, with_extra);
    // A removed file too.
    fs::remove_file(v.join("pkg/new.so")).unwrap();
    assert_eq!(ids.identify(&v, None).unwrap().0, with_extra);
}
