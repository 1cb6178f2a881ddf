//! Discovery of every target kind, metadata findings, and `resolve` on
//! directories, through the library and the command line.

mod common;

use common::{preflight, preflight_cmd, stderr, stdout};
use kernel_preflight::discover::{
    self, DiscoverError, MetadataStatus, Target, TargetKind, Targets,
};
use serde_json::Value;
use std::fs;
use std::os::unix::fs::symlink;
use std::path::{Path, PathBuf};

const METADATA: &str = r#"{
  "name": "relu-kernel",
  "id": "_relu_kernel_cuda_abc1234",
  "version": 1,
  "license": "Apache-2.0",
  "python-depends": ["einops"],
  "backend": {"type": "cuda", "archs": ["8.0", "9.0a", "10.0+PTX"]},
  "digest": {"algorithm": "sha256", "files": {"__init__.py": "AAAA"}},
  "provenance": {"kernel-builder": {"version": "0.17.0"}},
  "some-future-key": {"ignored": true}
}"#;

const SYSTEM: &str = "backend=cuda,cuda=12.8,torch=2.9,cxx11=true,tvm-ffi=none,cpu=x86_64,os=linux";

/// A kernel repo with three variants (one with broken metadata, one without)
/// and two entries that are not variants.
fn kernel_repo(root: &Path) -> PathBuf {
    let repo = root.join("relu-kernel");
    let build = repo.join("build");
    for (variant, metadata) in [
        ("torch29-cxx11-cu128-x86_64-linux", Some(METADATA)),
        (
            "torch29-cxx11-cu126-x86_64-linux",
            Some("{\"name\": \"relu-kernel\",\n  \"id\": 5,\n}"),
        ),
        ("torch-cuda", None),
    ] {
        let dir = build.join(variant);
        fs::create_dir_all(&dir).unwrap();
        fs::write(dir.join("__init__.py"), "").unwrap();
        if let Some(m) = metadata {
            fs::write(dir.join("metadata.json"), m).unwrap();
        }
    }
    fs::create_dir_all(build.join("not-a-variant")).unwrap();
    fs::write(build.join("README.md"), "hello").unwrap();
    repo
}

/// The hub cache layout: refs/main → snapshots/<rev>/build/…, files as
/// symlinks into blobs/.
fn hub_cache(root: &Path, source: &Path) -> PathBuf {
    let folder = root.join("kernels--acme--relu-kernel");
    let rev = "0123456789abcdef0123456789abcdef01234567";
    let snapshot = folder.join("snapshots").join(rev);
    fs::create_dir_all(folder.join("blobs")).unwrap();
    fs::create_dir_all(folder.join("refs")).unwrap();
    fs::write(folder.join("refs/main"), rev).unwrap();
    let mut n = 0;
    for entry in walk(source) {
        let rel = entry.strip_prefix(source).unwrap();
        let link = snapshot.join(rel);
        fs::create_dir_all(link.parent().unwrap()).unwrap();
        n += 1;
        let blob = folder.join("blobs").join(format!("blob{n}"));
        fs::copy(&entry, &blob).unwrap();
        // Like the hub: a relative link from snapshots/<rev>/<rel> to blobs/.
        let up = rel.components().count() - 1 + 2;
        let target = Path::new(&"../".repeat(up))
            .join("blobs")
            .join(format!("blob{n}"));
        symlink(&target, &link).unwrap();
        assert!(
            fs::metadata(&link).is_ok(),
            "dangling link {}",
            link.display()
        );
    }
    // An older snapshot that refs/main does not name.
    fs::create_dir_all(folder.join("snapshots/oldrev/build/torch28-cxx11-cu126-x86_64-linux"))
        .unwrap();
    folder
}

fn walk(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    for e in fs::read_dir(dir).unwrap() {
        let p = e.unwrap().path();
        if p.is_dir() {
            out.extend(walk(&p));
        } else {
            out.push(p);
        }
    }
    out
}

#[test]
fn kernel_repo_directory() {
    let tmp = tempfile::tempdir().unwrap();
    let repo = kernel_repo(tmp.path());
    let d = discover::discover_hub(&repo).unwrap();
    assert_eq!(d.kind, TargetKind::KernelRepo);
    assert_eq!(d.kernel.as_deref(), Some("relu-kernel"));
    let names: Vec<String> = d.variants.iter().map(|v| v.name.to_string()).collect();
    assert_eq!(
        names,
        [
            "torch-cuda",
            "torch29-cxx11-cu126-x86_64-linux",
            "torch29-cxx11-cu128-x86_64-linux"
        ]
    );
    assert_eq!(d.variants[0].metadata, MetadataStatus::Missing);
    match &d.variants[1].metadata {
        MetadataStatus::Invalid { why } => assert!(why.contains("line 2 column"), "{why}"),
        other => panic!("expected invalid metadata, got {other:?}"),
    }
    let m = d.variants[2].metadata.metadata().expect("valid metadata");
    assert_eq!(m.python_name(), "relu_kernel");
    assert_eq!(
        m.backend.archs.as_deref().unwrap(),
        ["8.0", "9.0a", "10.0+PTX"]
    );
    assert_eq!(d.warnings.len(), 2, "{:?}", d.warnings);
    assert!(d.warnings.iter().any(|w| w.contains("not-a-variant")));
}

#[test]
fn both_target_kinds_each_discovered_once() {
    let tmp = tempfile::tempdir().unwrap();
    let repo = kernel_repo(tmp.path());
    let native = tmp.path().join("native");
    fs::create_dir(&native).unwrap();
    fs::write(native.join("k.ptx"), ".version 8.0\n").unwrap();
    fs::write(
        native.join("preflight.toml"),
        "[[module]]\nfile = \"k.ptx\"\n",
    )
    .unwrap();
    symlink(&repo, tmp.path().join("link")).unwrap();
    let mut targets = Targets::new();
    for (given, path) in [
        ("relu", repo.clone()),
        ("native", native.clone()),
        ("relu again", repo.join(".")),
        ("link", tmp.path().join("link")),
        ("native again", tmp.path().join("native/../native")),
    ] {
        targets.add(given, &path).unwrap();
    }
    let targets = targets.into_vec();
    let given: Vec<&str> = targets.iter().map(|t| t.given.as_str()).collect();
    assert_eq!(given, ["relu", "native"], "the first name is kept");
    assert!(matches!(&targets[0].target, Target::Hub(d) if d.variants.len() == 3));
    match &targets[1].target {
        Target::Native(t) => assert_eq!(t.modules[0].name(), "k.ptx"),
        Target::Hub(d) => panic!("{d:?}"),
    }
}

#[test]
fn variants_dir_and_single_variant() {
    let tmp = tempfile::tempdir().unwrap();
    let repo = kernel_repo(tmp.path());
    let d = discover::discover_hub(&repo.join("build")).unwrap();
    assert_eq!(d.kind, TargetKind::VariantsDir);
    assert_eq!(d.kernel.as_deref(), Some("relu-kernel"));
    assert_eq!(d.variants.len(), 3);

    let one = repo.join("build/torch29-cxx11-cu128-x86_64-linux");
    let d = discover::discover_hub(&one).unwrap();
    assert_eq!(d.kind, TargetKind::Variant);
    assert_eq!(d.variants.len(), 1);
    assert_eq!(d.kernel.as_deref(), Some("relu-kernel"));
    // A trailing slash or `.` names the same directory.
    let d = discover::discover_hub(&one.join(".")).unwrap();
    assert_eq!(d.kind, TargetKind::Variant);
}

#[test]
fn hub_cache_folder_snapshot_and_repo_lookup() {
    let tmp = tempfile::tempdir().unwrap();
    let repo = kernel_repo(&tmp.path().join("src"));
    let cache = tmp.path().join("hub");
    let folder = hub_cache(&cache, &repo);

    let d = discover::discover_hub(&folder).unwrap();
    assert_eq!(d.kind, TargetKind::HubCache);
    assert_eq!(d.kernel.as_deref(), Some("acme/relu-kernel"));
    assert_eq!(d.variants.len(), 3, "refs/main's snapshot, not the old one");
    assert!(
        fs::symlink_metadata(d.variants[2].path.join("metadata.json"))
            .unwrap()
            .file_type()
            .is_symlink()
    );
    assert!(
        d.variants[2].metadata.metadata().is_some(),
        "symlinked metadata is read"
    );

    let snapshot = folder.join("snapshots/0123456789abcdef0123456789abcdef01234567");
    let d = discover::discover_hub(&snapshot).unwrap();
    assert_eq!(d.kind, TargetKind::HubCache);
    assert_eq!(d.kernel.as_deref(), Some("acme/relu-kernel"));

    // --repo looks in KERNELS_CACHE, then HF_HUB_CACHE, then HF_HOME/hub.
    for (var, value) in [
        ("KERNELS_CACHE", cache.clone()),
        ("HF_HUB_CACHE", cache.clone()),
        ("HF_HOME", tmp.path().to_path_buf()),
    ] {
        let out = preflight_cmd()
            .args([
                "resolve",
                "--repo",
                "acme/relu-kernel",
                "--system",
                SYSTEM,
                "--json",
            ])
            .env_remove("KERNELS_CACHE")
            .env_remove("HF_HUB_CACHE")
            .env_remove("HF_HOME")
            .env(var, &value)
            .output()
            .unwrap();
        assert_eq!(out.status.code(), Some(0), "{var}: {}", stderr(&out));
        let doc: Value = serde_json::from_slice(&out.stdout).unwrap();
        assert_eq!(doc["decisions"].as_array().unwrap().len(), 3, "{var}");
    }
    // Without refs/main the newest snapshot is used.
    fs::remove_file(folder.join("refs/main")).unwrap();
    let newest = folder.join("snapshots/newest/build/torch-cpu");
    fs::create_dir_all(&newest).unwrap();
    let d = discover::discover_hub(&folder).unwrap();
    assert_eq!(d.root, folder.join("snapshots/newest/build"));
}

#[test]
fn resolve_on_a_directory_shows_metadata_beside_decisions() {
    let tmp = tempfile::tempdir().unwrap();
    let repo = kernel_repo(tmp.path());
    let out = preflight(&[
        "resolve",
        repo.to_str().unwrap(),
        "--system",
        SYSTEM,
        "--json",
    ]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let doc: Value = serde_json::from_slice(&out.stdout).unwrap();
    let decisions = doc["decisions"].as_array().unwrap();
    assert_eq!(decisions[0]["variant"], "torch29-cxx11-cu128-x86_64-linux");
    assert_eq!(decisions[0]["accepted"], true);
    assert_eq!(decisions[0]["reason"], Value::Null);
    assert_eq!(
        decisions[0]["metadata"]["metadata"]["backend"]["archs"][1],
        "9.0a"
    );
    assert_eq!(decisions[1]["metadata"]["status"], "invalid");
    assert_eq!(decisions[2]["variant"], "torch-cuda");
    assert_eq!(decisions[2]["metadata"]["status"], "missing");
    // Entries that are not variants are warnings on stderr, never fatal.
    assert!(stderr(&out).contains("not-a-variant"), "{}", stderr(&out));

    let out = preflight(&["resolve", repo.to_str().unwrap(), "--system", SYSTEM]);
    let table = stdout(&out);
    assert!(table.contains("8.0 9.0a 10.0+PTX"), "{table}");
    assert!(table.contains("metadata missing"), "{table}");
    assert!(
        table.contains("Cannot parse metadata from metadata.json"),
        "{table}"
    );
    assert!(table.contains("einops"), "{table}");
    assert!(
        table.contains("would pick torch29-cxx11-cu128-x86_64-linux"),
        "{table}"
    );
}

/// The build folders kernels 0.19 writes: dotted arch names, SDKs.
#[test]
fn dotted_and_sdk_build_folders_are_variants_under_each_release() {
    let tmp = tempfile::tempdir().unwrap();
    let build = tmp.path().join("relu-kernel/build");
    let names = [
        "torch-2.10-cuda-12.8-cpython-3.9-abi3-x86_64-linux",
        "torch-2.10-cuda-12.8-cpython-3.15-abi3t-x86_64-linux",
        "torch210-cu126-x86_64-linux",
        "sdk-cuda",
        "torch-universal",
    ];
    for name in names {
        fs::create_dir_all(build.join(name)).unwrap();
        fs::write(build.join(name).join("metadata.json"), METADATA).unwrap();
    }
    let Target::Hub(found) = discover::discover(&build.parent().unwrap()).unwrap() else {
        panic!("not a hub kernel");
    };
    let mut listed: Vec<String> = found.variants.iter().map(|v| v.name.to_string()).collect();
    listed.sort();
    let mut expected = names.map(String::from).to_vec();
    expected.sort();
    assert_eq!(listed, expected);
    assert!(found.warnings.is_empty(), "{:?}", found.warnings);

    let resolve = |release: &str| {
        let system = format!(
            "backend=cuda,cuda=12.8,torch=2.10,cxx11=true,tvm-ffi=none,cpu=x86_64,os=linux,\
             python=3.12,free-threaded=false,mlx=false,kernels={release}"
        );
        let out = preflight(&[
            "resolve",
            build.to_str().unwrap(),
            "--system",
            &system,
            "--json",
        ]);
        assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
        let doc: Value = serde_json::from_slice(&out.stdout).unwrap();
        assert_eq!(doc["rules"]["release"], release);
        doc["decisions"]
            .as_array()
            .unwrap()
            .iter()
            .map(|d| {
                format!(
                    "{} {}",
                    d["variant"].as_str().unwrap(),
                    d["rejection"].as_str().unwrap_or("ok")
                )
            })
            .collect::<Vec<_>>()
    };
    assert_eq!(
        resolve("0.19.1"),
        [
            "torch-2.10-cuda-12.8-cpython-3.9-abi3-x86_64-linux ok",
            "torch210-cu126-x86_64-linux ok",
            "torch-universal ok",
            "sdk-cuda ok",
            "torch-2.10-cuda-12.8-cpython-3.15-abi3t-x86_64-linux python_version",
        ]
    );
    // kernels 0.17 reads a dotted name as a noarch variant of no backend,
    // and skips an SDK.
    let old = resolve("0.17.2");
    assert_eq!(
        old[..2],
        ["torch210-cu126-x86_64-linux ok", "torch-universal ok"]
    );
    assert!(
        old[2].ends_with("noarch_backend") && old[3].ends_with("noarch_backend"),
        "{old:?}"
    );
    assert_eq!(old[4], "sdk-cuda not_parsed");
}

#[test]
fn bad_targets_are_precise_errors_with_exit_2() {
    let tmp = tempfile::tempdir().unwrap();
    let file = tmp.path().join("file.txt");
    fs::write(&file, "x").unwrap();
    let empty = tmp.path().join("empty");
    fs::create_dir(&empty).unwrap();
    let cache_without_snapshot = tmp.path().join("kernels--acme--nothing");
    fs::create_dir(&cache_without_snapshot).unwrap();
    let missing = tmp.path().join("missing");
    for (path, expect) in [
        (&missing, "no such file or directory"),
        (&file, "is a file, not a directory"),
        (&empty, "no build variants found"),
        (&cache_without_snapshot, "has no snapshot"),
    ] {
        let out = preflight(&["resolve", path.to_str().unwrap(), "--system", SYSTEM]);
        assert_eq!(out.status.code(), Some(2), "{}", path.display());
        let err = stderr(&out);
        assert!(err.contains(expect), "{err}");
        assert_eq!(err.lines().count(), 1, "one line: {err}");
        assert!(stdout(&out).is_empty());
    }
    assert!(matches!(
        discover::discover_hub(&missing),
        Err(DiscoverError::NotFound(_))
    ));
}

#[test]
fn unreadable_directory_is_exit_2() {
    use std::os::unix::fs::PermissionsExt;
    let tmp = tempfile::tempdir().unwrap();
    fs::set_permissions(tmp.path(), fs::Permissions::from_mode(0o755)).unwrap();
    let dir = tmp.path().join("locked");
    fs::create_dir(&dir).unwrap();
    fs::set_permissions(&dir, fs::Permissions::from_mode(0o000)).unwrap();
    // root reads any directory, so as root run preflight as `nobody`.
    let mut cmd = if nix_is_root() {
        let mut c = std::process::Command::new("setpriv");
        c.args(["--reuid=65534", "--regid=65534", "--clear-groups"])
            .arg(env!("CARGO_BIN_EXE_preflight"));
        c
    } else {
        preflight_cmd()
    };
    let out = cmd
        .args(["resolve", dir.to_str().unwrap(), "--system", SYSTEM])
        .output()
        .unwrap();
    fs::set_permissions(&dir, fs::Permissions::from_mode(0o700)).unwrap();
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    assert!(
        stderr(&out).contains("cannot read directory"),
        "{}",
        stderr(&out)
    );
}

fn nix_is_root() -> bool {
    fs::read_to_string("/proc/self/status")
        .unwrap()
        .lines()
        .any(|l| l.starts_with("Uid:") && l.split_whitespace().nth(1) == Some("0"))
}

#[test]
fn bad_command_line_input_is_exit_2() {
    let cases: &[(&[&str], &str)] = &[
        (
            &[
                "resolve",
                "--variants",
                "torch29-cu128-x86_64-linux,bogus",
                "--system",
                SYSTEM,
            ],
            "invalid variant name \"bogus\"",
        ),
        (
            &[
                "resolve",
                "--variants",
                "torch29-cu128-x86_64-linux",
                "--system",
                "gpu=h100",
            ],
            "unknown --system key \"gpu\"",
        ),
        (
            &[
                "resolve",
                "--variants",
                "torch29-cu128-x86_64-linux",
                "--system",
                "cuda=twelve",
            ],
            "invalid --system value cuda=",
        ),
        (
            &[
                "resolve",
                "--variants",
                "torch29-cu128-x86_64-linux",
                "--system",
                "cxx11=maybe",
            ],
            "expected true, false or none",
        ),
        (
            &[
                "resolve",
                "--variants",
                "torch29-cu128-x86_64-linux",
                "--system",
                "backend=cuda,torch=2.9,cxx11=true,tvm-ffi=none",
            ],
            "needs a version",
        ),
        (
            &["resolve", "--repo", "no-slash", "--system", SYSTEM],
            "expected ORG/NAME",
        ),
        (&["resolve"], "needs a TARGET"),
        (&["resolve", "--bogus-flag"], "unexpected argument"),
    ];
    for (args, expect) in cases {
        let out = preflight_cmd()
            .args(*args)
            .env("KERNELS_CACHE", "/nonexistent-preflight-cache")
            .output()
            .unwrap();
        assert_eq!(out.status.code(), Some(2), "{args:?}: {}", stderr(&out));
        assert!(stderr(&out).contains(expect), "{args:?}: {}", stderr(&out));
        assert!(!stderr(&out).contains("panicked"));
    }
    let out = preflight_cmd()
        .args(["resolve", "--repo", "acme/absent", "--system", SYSTEM])
        .env("KERNELS_CACHE", "/nonexistent-preflight-cache")
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(stderr(&out).contains("not in the hub cache at /nonexistent-preflight-cache"));
}

#[test]
fn no_accepted_variant_is_exit_1() {
    let out = preflight(&[
        "resolve",
        "--variants",
        "torch29-cu128-aarch64-linux",
        "--system",
        SYSTEM,
    ]);
    assert_eq!(out.status.code(), Some(1));
    assert!(stdout(&out).contains("CPU (aarch64) does not match system CPU (x86_64)"));
}
