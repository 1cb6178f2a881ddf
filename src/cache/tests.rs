use super::bucket::{Bucket, Lookup, Shelf};
use super::job::{JobIdentity, OutcomeKey, VariantFiles};
use super::outcomes::{Kept, OutcomeRecord};
use super::{Cache, ops};
use crate::classify::{self, Depth, OutcomeKind, Phase, Timings};
use crate::fingerprint::{FactStore, Measured, MeasuredFacts, Stat, ToolAnswer};
use crate::protocol::{ExecutorKind, PROTOCOL_VERSION};
use std::fs;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};

mod identity;
mod jit;
mod warm;

const MACHINE: &str = "ffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffff";

fn job(name: &str) -> JobIdentity {
    JobIdentity {
        executor: ExecutorKind::Python,
        code: "python driver 0".into(),
        name: name.into(),
        device: "cpu".into(),
        files: VariantFiles {
            content: "content:abc".into(),
            metadata: Some("m".into()),
        },
        smoke: "load-only:0".into(),
        depth: Depth::Verified,
        protocol: PROTOCOL_VERSION,
        device_code: None,
        made: Default::default(),
    }
}

fn key(name: &str) -> OutcomeKey {
    OutcomeKey::new(MACHINE, job(name))
}

fn record(kind: OutcomeKind, path: &Path) -> OutcomeRecord {
    OutcomeRecord {
        path: path.to_path_buf(),
        smoke: "load-only".into(),
        outcome: classify::outcome(kind, Phase::Done, "m", ""),
        timings: Timings::default(),
        machine: "test machine".into(),
        packages: None,
    }
}

fn pass(path: &Path) -> OutcomeRecord {
    record(OutcomeKind::Pass, path)
}

fn mode(p: &Path) -> u32 {
    fs::metadata(p).unwrap().permissions().mode() & 0o777
}

/// Every regular file under `dir`.
fn files_under(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    for e in fs::read_dir(dir).into_iter().flatten().flatten() {
        if e.file_type().unwrap().is_dir() {
            out.extend(files_under(&e.path()));
        } else {
            out.push(e.path());
        }
    }
    out
}

#[test]
fn the_key_changes_with_every_part_of_the_job_and_is_stable() {
    let base = key("torch-cpu");
    assert_eq!(base, key("torch-cpu"));
    assert_eq!(base.key.as_str().len(), 64);
    let changes: [fn(&mut JobIdentity); 11] = [
        |j| j.executor = ExecutorKind::Cuda,
        |j| j.code = "python driver 1".into(),
        |j| j.device_code = Some("cuda 0.1.0".into()),
        |j| j.name = "torch-universal".into(),
        |j| j.device = "cuda".into(),
        |j| j.files.content = "content:abd".into(),
        |j| j.files.metadata = Some("n".into()),
        |j| j.files.metadata = None,
        |j| j.smoke = "file:1".into(),
        |j| j.depth = Depth::Load,
        |j| j.protocol = PROTOCOL_VERSION + 1,
    ];
    let mut keys = vec![base.key.clone()];
    for change in &changes {
        let mut j = job("torch-cpu");
        change(&mut j);
        keys.push(OutcomeKey::new(MACHINE, j).key);
    }
    keys.push(OutcomeKey::new(&"e".repeat(64), job("torch-cpu")).key);
    let mut other_schema = base.parts.clone();
    other_schema.schema += 1;
    keys.push(super::bucket::Parts::key(&other_schema));
    let mut unique = keys.clone();
    unique.sort();
    unique.dedup();
    assert_eq!(unique.len(), keys.len(), "every change is a new key");
}

#[test]
fn put_get_layout_and_permissions() {
    let tmp = tempfile::tempdir().unwrap();
    let cache = Cache::at(tmp.path().join("cache"));
    let k = key("torch-cpu");
    let Kept::Stored(path) = cache.outcomes().put(&k, pass(tmp.path())).unwrap() else {
        panic!("a pass is kept");
    };
    let hex = k.key.as_str();
    assert_eq!(
        path,
        cache
            .root()
            .join("outcomes-v2")
            .join(&hex[..2])
            .join(format!("{hex}.json"))
    );
    assert!(cache.root().join("CACHEDIR.TAG").is_file());
    assert_eq!(mode(cache.root()), 0o700);
    assert_eq!(mode(&cache.root().join("outcomes-v2")), 0o700);
    assert_eq!(mode(path.parent().unwrap()), 0o700);
    assert_eq!(mode(&path), 0o600);
    assert_eq!(mode(&cache.root().join("CACHEDIR.TAG")), 0o600);
    match cache.outcomes().get(&k) {
        Lookup::Hit(r) => assert_eq!(r, pass(tmp.path())),
        other => panic!("expected a hit, got {other:?}"),
    }
    assert!(matches!(cache.outcomes().get(&key("other")), Lookup::Miss));
    assert_eq!(cache.outcomes().keys(), vec![k.key.clone()]);
    // `ls` reads the typed entry: the job's name, the outcome's kind.
    let entries = cache.outcomes().entries();
    assert_eq!(entries[0].parts.job.name, "torch-cpu");
    assert_eq!(entries[0].record.outcome.kind, OutcomeKind::Pass);
}

#[test]
fn transient_outcomes_are_never_stored() {
    let tmp = tempfile::tempdir().unwrap();
    let cache = Cache::at(tmp.path());
    for kind in [
        OutcomeKind::ProbeError,
        OutcomeKind::Timeout,
        OutcomeKind::Skipped,
    ] {
        let k = key(&format!("{kind}"));
        let kept = cache.outcomes().put(&k, record(kind, tmp.path())).unwrap();
        assert_eq!(kept, Kept::Transient, "{kind}");
        assert!(matches!(cache.outcomes().get(&k), Lookup::Miss));
    }
    // A failure that classify marks as passing by itself (out of memory
    // because another process holds the device) says nothing lasting.
    let mut busy = record(OutcomeKind::OutOfMemory, tmp.path());
    busy.outcome.transient = true;
    let k = key("busy");
    assert_eq!(cache.outcomes().put(&k, busy).unwrap(), Kept::Transient);
    assert!(matches!(cache.outcomes().get(&k), Lookup::Miss));
    assert!(cache.outcomes().keys().is_empty());
    let k = key("fails");
    let kept = cache
        .outcomes()
        .put(&k, record(OutcomeKind::ImportError, tmp.path()));
    assert!(
        matches!(kept, Ok(Kept::Stored(_))),
        "a real failure is evidence"
    );
}

#[test]
fn corrupt_and_mismatched_entries_are_misses_and_removed() {
    let tmp = tempfile::tempdir().unwrap();
    let cache = Cache::at(tmp.path());
    let good = key("good");
    let store = |k: &OutcomeKey| match cache.outcomes().put(k, pass(tmp.path())).unwrap() {
        Kept::Stored(p) => p,
        Kept::Transient => unreachable!(),
    };
    let path = store(&good);
    let bytes = fs::read(&path).unwrap();

    fs::write(&path, &bytes[..bytes.len() / 2]).unwrap();
    assert!(matches!(cache.outcomes().get(&good), Lookup::Corrupt(_)));
    assert!(!path.exists(), "a corrupt entry is removed");

    store(&good);
    fs::write(&path, [0xde, 0xad, 0xbe, 0xef, 0, 1, 2]).unwrap();
    assert!(matches!(cache.outcomes().get(&good), Lookup::Corrupt(_)));

    // Valid JSON of another key, copied under this key's name.
    let other_path = store(&key("other"));
    fs::create_dir_all(path.parent().unwrap()).unwrap();
    fs::copy(&other_path, &path).unwrap();
    match cache.outcomes().get(&good) {
        Lookup::Corrupt(why) => assert!(why.contains("does not match its key"), "{why}"),
        other => panic!("expected corrupt, got {other:?}"),
    }

    // Parts edited after the key was computed.
    store(&good);
    let mut value: serde_json::Value = serde_json::from_slice(&fs::read(&path).unwrap()).unwrap();
    value["parts"]["job"]["name"] = "forged".into();
    fs::write(&path, serde_json::to_vec(&value).unwrap()).unwrap();
    assert!(matches!(cache.outcomes().get(&good), Lookup::Corrupt(_)));

    // Parts of another schema that hash to the key they claim.
    let mut old = good.parts.clone();
    old.schema = 1;
    let old_key = super::bucket::Parts::key(&old);
    let old_entry = super::bucket::Entry::new(old, pass(tmp.path()));
    let old_path = Shelf::OUTCOMES.path(cache.root(), &old_key);
    fs::create_dir_all(old_path.parent().unwrap()).unwrap();
    fs::write(&old_path, serde_json::to_vec(&old_entry).unwrap()).unwrap();
    assert!(matches!(
        cache.outcomes().entry(&old_key),
        Lookup::Corrupt(_)
    ));
}

#[test]
fn an_old_schema_folder_is_never_read_and_prune_removes_it() {
    let tmp = tempfile::tempdir().unwrap();
    let cache = Cache::at(tmp.path().join("cache"));
    let k = key("torch-cpu");
    let Kept::Stored(path) = cache.outcomes().put(&k, pass(tmp.path())).unwrap() else {
        unreachable!()
    };
    // The same, valid-looking entry under the previous version's folder.
    let rel = path.strip_prefix(cache.root().join("outcomes-v2")).unwrap();
    let old = cache.root().join("outcomes-v1").join(rel);
    fs::create_dir_all(old.parent().unwrap()).unwrap();
    fs::rename(&path, &old).unwrap();
    assert!(matches!(cache.outcomes().get(&k), Lookup::Miss));
    assert!(cache.outcomes().entries().is_empty());
    assert!(old.exists(), "reading never touches another version");

    let report = cache.prune().unwrap();
    assert_eq!(report.schema_dirs, vec![cache.root().join("outcomes-v1")]);
    assert!(!cache.root().join("outcomes-v1").exists());
}

#[test]
fn folder_versions_are_recognised() {
    assert_eq!(Bucket::Outcomes.folder(), "outcomes-v2");
    assert!(Bucket::Outcomes.is_other_version("outcomes-v1"));
    assert!(Bucket::Outcomes.is_other_version("outcomes-v10"));
    assert!(!Bucket::Outcomes.is_other_version("outcomes-v2"));
    assert!(!Bucket::Outcomes.is_other_version("outcomes-vx"));
    assert!(!Bucket::Outcomes.is_other_version("other-v1"));
    assert!(Bucket::Identities.is_other_version("identity-v1"));
    assert!(Bucket::Fingerprints.is_other_version("fingerprint-v1"));
    assert!(!Bucket::Bench.is_other_version("bench-v1"));
}

#[test]
fn export_import_round_trip_never_replaces_newer_local() {
    let tmp = tempfile::tempdir().unwrap();
    let a = Cache::at(tmp.path().join("a"));
    let b = Cache::at(tmp.path().join("b"));
    let x = key("x");
    let mut old = super::bucket::Entry::new(x.parts.clone(), pass(Path::new("/old")));
    old.created = 100;
    a.write(&old).unwrap();
    a.outcomes().put(&key("y"), pass(tmp.path())).unwrap();
    let mut bundle = Vec::new();
    assert_eq!(ops::export(&a, &mut bundle).unwrap(), 2);

    // b has a newer entry for x.
    let mut newer = super::bucket::Entry::new(x.parts.clone(), pass(Path::new("/newer")));
    newer.created = 200;
    b.write(&newer).unwrap();
    let mut input = bundle.clone();
    input.extend_from_slice(b"not json\n\n");
    let mut forged = super::bucket::Entry::new(key("z").parts, pass(tmp.path()));
    forged.parts.job.smoke = "changed".into();
    input.extend_from_slice(serde_json::to_string(&forged).unwrap().as_bytes());
    input.push(b'\n');
    let report = ops::import(&b, Path::new("-"), &input[..]).unwrap();
    assert_eq!(report.imported, 1);
    assert_eq!(report.kept_local, 1);
    assert_eq!(report.rejected.len(), 2, "{:?}", report.rejected);
    assert_eq!(report.rejected[0].0, 3);
    match b.outcomes().get(&x) {
        Lookup::Hit(r) => assert_eq!(r.path, Path::new("/newer")),
        other => panic!("{other:?}"),
    }
    let again = ops::import(&b, Path::new("-"), &bundle[..]).unwrap();
    assert_eq!((again.imported, again.kept_local), (0, 2));

    // To a file: written whole, private.
    let file = tmp.path().join("bundle.jsonl");
    assert_eq!(ops::export_file(&a, &file).unwrap(), 2);
    assert_eq!(fs::read(&file).unwrap(), bundle);
    assert_eq!(mode(&file), 0o600);
}

#[test]
fn the_cache_keeps_the_fingerprints_facts() {
    let tmp = tempfile::tempdir().unwrap();
    let cache = Cache::at(tmp.path().join("cache"));
    let store: &dyn FactStore = &cache;
    let libcuda = tmp.path().join("libcuda.so.1");
    fs::write(&libcuda, "").unwrap();
    let facts = MeasuredFacts {
        interpreter: None,
        interpreter_path: None,
        libcuda: Stat::of(&libcuda),
        measured: Measured {
            libcuda: crate::fingerprint::Libcuda::Missing,
            cuda_driver_api: None,
            devices: Vec::new(),
            python: Some(crate::fingerprint::PythonMeasured::Ok {
                version: "3.12.4".into(),
                torch_cxx11_abi: None,
            }),
        },
    };
    assert_eq!(store.measured("abc"), None);
    store.keep_measured("abc", &facts);
    assert_eq!(store.measured("abc"), Some(facts));
    assert_eq!(store.measured("abd"), None);

    let tool = tmp.path().join("nvcc");
    fs::write(&tool, "").unwrap();
    let answer = ToolAnswer {
        stat: Stat::of(&tool).unwrap(),
        version: Some("12.8.93".into()),
        problem: None,
    };
    store.keep_tool_answer(&tool, &answer);
    assert_eq!(store.tool_answer(&tool), Some(answer));
    let files = files_under(&cache.root().join("fingerprints-v2"));
    assert_eq!(files.len(), 2, "{files:?}");
    assert!(files.iter().all(|f| mode(f) == 0o600));
}

/// A cache with an entry in every bucket, some of them stale.
fn populated(tmp: &Path) -> Cache {
    let cache = Cache::at(tmp.join("cache"));
    let variant = tmp.join("build/torch-cpu");
    fs::create_dir_all(&variant).unwrap();
    fs::write(variant.join("__init__.py"), "").unwrap();
    let gone = tmp.join("build/torch-gone");
    fs::create_dir_all(&gone).unwrap();
    fs::write(gone.join("__init__.py"), "").unwrap();
    cache.outcomes().put(&key("live"), pass(&variant)).unwrap();
    cache.outcomes().put(&key("gone"), pass(&gone)).unwrap();
    cache.identities().identify(&variant, None).unwrap();
    let tool = tmp.join("nvcc");
    fs::write(&tool, "").unwrap();
    let answer = ToolAnswer {
        stat: Stat::of(&tool).unwrap(),
        version: None,
        problem: Some("exit 1".into()),
    };
    cache.keep_tool_answer(&tool, &answer);
    cache.keep_tool_answer(&tmp.join("gone-nvcc"), &answer);
    cache.keep_measured(
        "abc",
        &MeasuredFacts {
            interpreter: None,
            interpreter_path: None,
            libcuda: None,
            measured: Measured {
                libcuda: crate::fingerprint::Libcuda::Missing,
                cuda_driver_api: None,
                devices: Vec::new(),
                python: None,
            },
        },
    );
    fs::remove_dir_all(&gone).unwrap();
    // Leftovers of older versions.
    for old in ["outcomes-v1/ab", "identity-v1", "fingerprint-v1"] {
        fs::create_dir_all(cache.root().join(old)).unwrap();
    }
    fs::write(cache.root().join("fingerprint-v1/tools.json"), "{}").unwrap();
    fs::create_dir_all(cache.root().join("bench-v1")).unwrap();
    cache
}

#[test]
fn clear_leaves_no_file_in_any_bucket() {
    let tmp = tempfile::tempdir().unwrap();
    let cache = populated(tmp.path());
    let before = files_under(cache.root()).len();
    assert!(before >= 8, "{before}");
    let report = cache.clear().unwrap();
    assert_eq!(report.files, before - 1, "all but CACHEDIR.TAG");
    assert_eq!(
        files_under(cache.root()),
        vec![cache.root().join("CACHEDIR.TAG")]
    );
    for bucket in Bucket::ALL {
        assert!(!cache.root().join(bucket.folder()).exists());
    }
}

#[test]
fn prune_covers_every_bucket() {
    let tmp = tempfile::tempdir().unwrap();
    let cache = populated(tmp.path());
    let root = cache.root().to_path_buf();
    // A corrupt file and a killed writer's temp file in every bucket.
    let hours_ago = std::time::SystemTime::now() - std::time::Duration::from_secs(7200);
    let mut temps = Vec::new();
    for shelf in [
        Shelf::OUTCOMES,
        Shelf::IDENTITIES,
        Shelf::MEASURED,
        Shelf::TOOLS,
    ] {
        let corrupt = shelf.path(&root, &crate::cache::Key::of_bytes(b"corrupt"));
        fs::create_dir_all(corrupt.parent().unwrap()).unwrap();
        fs::write(&corrupt, "{").unwrap();
        let temp = corrupt.with_file_name(".tmpXYZ");
        fs::write(&temp, "half").unwrap();
        fs::File::options()
            .write(true)
            .open(&temp)
            .unwrap()
            .set_modified(hours_ago)
            .unwrap();
        temps.push(temp);
    }
    let young = Shelf::OUTCOMES.dir(&root).join(".tmpYOUNG");
    fs::write(&young, "writing").unwrap();
    fs::write(Shelf::OUTCOMES.dir(&root).join("stray.txt"), "?").unwrap();

    let report = cache.prune().unwrap();
    // gone outcome + gone tool + 4 corrupt + 1 stray.
    assert_eq!(report.entries, 7, "{report:?}");
    assert_eq!(report.temp_files, 4);
    let mut old: Vec<_> = report
        .schema_dirs
        .iter()
        .map(|d| d.file_name().unwrap().to_owned())
        .collect();
    old.sort();
    assert_eq!(old, ["fingerprint-v1", "identity-v1", "outcomes-v1"]);
    assert!(temps.iter().all(|t| !t.exists()));
    assert!(young.exists(), "a live writer's temp file stays");

    // What is left is exactly the live entries.
    let outcomes = cache.outcomes().entries();
    assert_eq!(outcomes.len(), 1);
    assert_eq!(outcomes[0].parts.job.name, "live");
    assert_eq!(cache.keys(Shelf::IDENTITIES).len(), 1);
    assert_eq!(cache.keys(Shelf::TOOLS).len(), 1);
    assert_eq!(cache.keys(Shelf::MEASURED).len(), 1);
    assert_eq!(cache.prune().unwrap().entries, 0, "nothing left to prune");
}
