use super::super::Cache;
use super::super::bucket::Lookup;
use super::super::warm::{RACY_NS, WarmParts, WarmRecord, Witness, now_ns};
use std::fs;
use std::path::Path;

/// Set a path's modification time to `secs_ago` seconds ago.
fn set_mtime(path: &Path, secs_ago: i64) {
    let t = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs() as i64
        - secs_ago;
    let times = [libc::timespec {
        tv_sec: t,
        tv_nsec: 0,
    }; 2];
    let c = std::ffi::CString::new(path.as_os_str().as_encoded_bytes()).unwrap();
    // SAFETY: a valid NUL-terminated path and two timespecs.
    assert_eq!(
        unsafe { libc::utimensat(libc::AT_FDCWD, c.as_ptr(), times.as_ptr(), 0) },
        0
    );
}

#[test]
fn a_witness_holds_until_its_file_changes_in_any_way_a_stat_shows() {
    let tmp = tempfile::tempdir().unwrap();
    let f = tmp.path().join("f");
    fs::write(&f, "one").unwrap();
    set_mtime(&f, 60);
    let w = Witness::take(&f);
    assert!(w.holds());
    // Same size, another time.
    set_mtime(&f, 30);
    assert!(!w.holds(), "a new modification time");
    // Its modification time put back: the status change time moved.
    set_mtime(&f, 60);
    assert!(!w.holds(), "a new status change time");
    // Replaced by a rename (an atomic write), same size and time.
    let g = tmp.path().join("g");
    fs::write(&g, "two").unwrap();
    set_mtime(&g, 60);
    fs::rename(&g, &f).unwrap();
    assert!(!w.holds(), "another inode");
    fs::remove_file(&f).unwrap();
    assert!(!w.holds(), "gone");
    // Absence is witnessed too.
    let absent = Witness::take(&f);
    assert!(absent.seen.is_none() && absent.holds());
    fs::write(&f, "").unwrap();
    assert!(!absent.holds(), "appeared");
}

#[test]
fn a_folder_witness_vouches_for_its_listing() {
    let tmp = tempfile::tempdir().unwrap();
    let d = tmp.path().join("d");
    fs::create_dir(&d).unwrap();
    set_mtime(&d, 60);
    let w = Witness::take(&d);
    assert_eq!(w.seen.unwrap().size, None, "a folder's size says nothing");
    fs::write(d.join("new"), "").unwrap();
    assert!(!w.holds(), "an entry added");
    // Relative to a folder, as a variant's files are kept.
    let rel = Witness {
        path: "new".into(),
        ..Witness::take(&d.join("new"))
    };
    assert!(rel.holds_in(&d));
    assert!(!rel.holds_in(tmp.path()));
}

#[test]
fn a_stat_taken_too_soon_after_a_change_is_not_settled() {
    let tmp = tempfile::tempdir().unwrap();
    let f = tmp.path().join("f");
    fs::write(&f, "x").unwrap();
    let w = Witness::take(&f);
    assert!(!w.settled(now_ns()), "just written");
    assert!(w.settled(now_ns() + RACY_NS));
    set_mtime(&f, 10);
    assert!(Witness::take(&f).settled(now_ns()));
    assert!(Witness::take(&tmp.path().join("absent")).settled(now_ns()));
}

#[test]
fn warm_records_round_trip_and_a_corrupt_one_is_reported_with_its_path_and_removed() {
    let tmp = tempfile::tempdir().unwrap();
    let cache = Cache::at(tmp.path().join("cache"));
    let root = tmp.path().join("build");
    fs::create_dir(&root).unwrap();
    let parts = WarmParts::new(&root, "f00", "select".into()).expect("the running binary");
    assert!(matches!(cache.warm().get(&parts), Lookup::Miss));
    let record = WarmRecord {
        root: Witness::take(&root),
        smoke: Vec::new(),
        warnings: vec!["w".into()],
        jobs: Vec::new(),
    };
    let path = cache.warm().put(parts.clone(), &record).unwrap();
    match cache.warm().get(&parts) {
        Lookup::Hit(got) => assert_eq!(got, record),
        other => panic!("{other:?}"),
    }
    // Another machine, another plan: other keys.
    let other = WarmParts::new(&root, "f01", "select".into()).unwrap();
    assert!(matches!(cache.warm().get(&other), Lookup::Miss));
    fs::write(&path, b"{\"key\":").unwrap();
    match cache.warm().get(&parts) {
        Lookup::Corrupt(why) => assert!(why.contains(&path.display().to_string()), "{why}"),
        other => panic!("{other:?}"),
    }
    assert!(!path.exists(), "a corrupt record is removed");
    // A record kept under another key's file name is not trusted.
    let moved = cache.warm().put(other.clone(), &record).unwrap();
    fs::rename(&moved, &path).unwrap();
    assert!(matches!(cache.warm().get(&parts), Lookup::Corrupt(_)));
}
