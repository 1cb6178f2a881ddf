//! The outcome cache behind `check`, `select` and `warmup`: what makes an
//! outcome stale, and what a damaged or shared cache does.

mod common;

use common::{fresh_dir, kernel_repo, preflight_cmd, stderr, stdout, variant_names};
use serde_json::Value;
use std::path::{Path, PathBuf};
use std::process::Command;

/// A machine description the tests can change one fact at a time.
struct Setup {
    cache: PathBuf,
    env: Vec<(String, String)>,
}

impl Setup {
    fn new() -> Setup {
        Setup {
            cache: fresh_dir("cache"),
            env: Vec::new(),
        }
    }

    fn set(&mut self, k: &str, v: impl AsRef<std::ffi::OsStr>) {
        self.env.retain(|(key, _)| key != k);
        self.env
            .push((k.into(), v.as_ref().to_string_lossy().into_owned()));
    }

    fn cmd(&self, args: &[&str]) -> Command {
        let mut cmd = preflight_cmd();
        cmd.args(args)
            .arg("--python")
            .arg(common::venv_python())
            .env("PREFLIGHT_CACHE", &self.cache)
            .env_remove("CUDA_HOME")
            .env_remove("CUDA_PATH")
            .env_remove("CUDA_VISIBLE_DEVICES")
            .env_remove("PYTHONPATH");
        for (k, v) in &self.env {
            cmd.env(k, v);
        }
        cmd
    }

    /// `select --json` on `repo`: the document.
    fn select(&self, repo: &Path) -> Value {
        let out = self
            .cmd(&["select", repo.to_str().unwrap(), "--json"])
            .output()
            .unwrap();
        assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
        serde_json::from_slice(&out.stdout).unwrap()
    }

    /// Whether `select` answered everything from the cache.
    fn cached(&self, repo: &Path) -> bool {
        let doc = self.select(repo);
        assert_eq!(doc["outcome"]["kind"], "pass", "{doc}");
        doc["cached"].as_bool().unwrap()
    }
}

fn repo(root: &Path) -> PathBuf {
    let repo = kernel_repo(
        root,
        "tiny",
        &variant_names(2),
        "def relu(x):\n    return max(x, 0)\n",
    );
    std::fs::write(repo.join("build/torch-universal/_ops.so"), vec![1u8; 4096]).unwrap();
    repo
}

/// A toolkit whose version.json says `version`.
fn toolkit(root: &Path, version: &str) -> PathBuf {
    let dir = root.join(format!("cuda-{version}"));
    std::fs::create_dir_all(dir.join("bin")).unwrap();
    let nvcc = dir.join("bin/nvcc");
    std::fs::write(&nvcc, "#!/bin/sh\nexit 0\n").unwrap();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&nvcc, std::fs::Permissions::from_mode(0o755)).unwrap();
    std::fs::write(
        dir.join("version.json"),
        format!(r#"{{"cuda_nvcc": {{"name": "CUDA NVCC", "version": "{version}"}}}}"#),
    )
    .unwrap();
    dir
}

#[test]
fn each_change_of_machine_or_variant_causes_a_new_probe() {
    let tmp = tempfile::tempdir().unwrap();
    let repo = repo(tmp.path());
    let mut s = Setup::new();
    let site = tmp.path().join("site");
    std::fs::create_dir_all(site.join("einops-0.8.1.dist-info")).unwrap();
    s.set("PYTHONPATH", &site);
    s.set("CUDA_HOME", toolkit(tmp.path(), "12.8.93"));
    s.set("CUDA_VISIBLE_DEVICES", "0");

    assert!(!s.cached(&repo), "first call probes");
    assert!(s.cached(&repo), "nothing changed: a hit");

    s.set("CUDA_HOME", toolkit(tmp.path(), "12.9.86"));
    assert!(!s.cached(&repo), "another nvcc version");
    assert!(s.cached(&repo));

    std::fs::rename(
        site.join("einops-0.8.1.dist-info"),
        site.join("einops-0.8.2.dist-info"),
    )
    .unwrap();
    assert!(
        !s.cached(&repo),
        "a package version changed in site-packages"
    );
    assert!(s.cached(&repo));

    std::fs::write(repo.join("build/torch-universal/_ops.so"), vec![2u8; 4096]).unwrap();
    assert!(!s.cached(&repo), "a shared object was rewritten");
    assert!(s.cached(&repo));

    // A touch that leaves the bytes alone re-hashes the file but is a hit.
    let so = std::fs::File::options()
        .write(true)
        .open(repo.join("build/torch-universal/_ops.so"))
        .unwrap();
    so.set_modified(std::time::SystemTime::now() + std::time::Duration::from_secs(3))
        .unwrap();
    assert!(s.cached(&repo), "same bytes, same identity");

    s.set("CUDA_VISIBLE_DEVICES", "1");
    assert!(!s.cached(&repo), "another CUDA_VISIBLE_DEVICES");
    assert!(s.cached(&repo));

    // --no-cache probes and keeps nothing new.
    let out = s
        .cmd(&["check", repo.to_str().unwrap(), "--json", "--no-cache"])
        .output()
        .unwrap();
    let doc: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert!(
        doc["results"]
            .as_array()
            .unwrap()
            .iter()
            .all(|r| r["cached"] == false)
    );
}

fn entry_files(cache: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    for shard in std::fs::read_dir(cache.join("outcomes-v2"))
        .into_iter()
        .flatten()
    {
        for f in std::fs::read_dir(shard.unwrap().path()).unwrap() {
            let p = f.unwrap().path();
            if p.extension().is_some_and(|x| x == "json") {
                out.push(p);
            }
        }
    }
    out.sort();
    out
}

/// Every entry file parses and is stored under the hash of its own parts.
fn assert_all_valid(cache: &Path) -> usize {
    let out = preflight_cmd()
        .args(["cache", "ls", "--json"])
        .env("PREFLIGHT_CACHE", cache)
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", stderr(&out));
    let listed: Vec<Value> = serde_json::from_slice(&out.stdout).unwrap();
    let files = entry_files(cache);
    assert_eq!(listed.len(), files.len(), "every file is a valid entry");
    for f in &files {
        let entry: Value = serde_json::from_slice(&std::fs::read(f).unwrap()).unwrap();
        let stem = f.file_stem().unwrap().to_str().unwrap();
        assert_eq!(entry["key"], stem);
    }
    files.len()
}

#[test]
fn damaged_entries_are_ignored_and_probed_again() {
    let tmp = tempfile::tempdir().unwrap();
    let names = variant_names(3);
    let repo = kernel_repo(tmp.path(), "tiny", &names, "X = 1\n");
    let s = Setup::new();
    assert!(!s.cached(&repo));
    let files = entry_files(&s.cache);
    assert_eq!(files.len(), 3);
    // Truncated, random bytes, and a valid entry of another key.
    let bytes = std::fs::read(&files[0]).unwrap();
    std::fs::write(&files[0], &bytes[..bytes.len() / 3]).unwrap();
    std::fs::write(&files[1], [0x93u8, 0x07, 0xff, 0x00, 0x41]).unwrap();
    std::fs::copy(&files[2], &files[0]).unwrap();
    std::fs::write(&files[1], [0x93u8, 0x07, 0xff, 0x00, 0x41]).unwrap();
    let out = s
        .cmd(&["check", repo.to_str().unwrap(), "--json"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let doc: Value = serde_json::from_slice(&out.stdout).unwrap();
    let cached: Vec<bool> = doc["results"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["cached"].as_bool().unwrap())
        .collect();
    assert_eq!(
        cached.iter().filter(|c| !**c).count(),
        2,
        "two damaged entries re-probed"
    );
    assert!(
        stderr(&out).contains("corrupt cache entry"),
        "{}",
        stderr(&out)
    );
    assert_eq!(assert_all_valid(&s.cache), 3);
    assert!(s.cached(&repo));
}

#[test]
fn concurrent_warmups_leave_only_valid_entries() {
    let tmp = tempfile::tempdir().unwrap();
    let repo = kernel_repo(tmp.path(), "many", &variant_names(12), "X = 1\n");
    let s = Setup::new();
    let children: Vec<_> = (0..8)
        .map(|_| {
            s.cmd(&["warmup", repo.to_str().unwrap(), "--jobs", "2"])
                .stdout(std::process::Stdio::piped())
                .stderr(std::process::Stdio::piped())
                .spawn()
                .unwrap()
        })
        .collect();
    for child in children {
        let out = child.wait_with_output().unwrap();
        assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    }
    assert_eq!(assert_all_valid(&s.cache), 12);
    assert!(s.cached(&repo));
}

#[test]
fn warmup_killed_mid_run_leaves_a_consistent_cache() {
    let tmp = tempfile::tempdir().unwrap();
    let repo = kernel_repo(
        tmp.path(),
        "slow",
        &variant_names(10),
        "import time\ntime.sleep(0.3)\n",
    );
    let s = Setup::new();
    let mut child = s
        .cmd(&["warmup", repo.to_str().unwrap(), "--jobs", "1"])
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    // Kill once some outcomes are written, well before all of them are.
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
    while entry_files(&s.cache).len() < 2 && std::time::Instant::now() < deadline {
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    child.kill().unwrap();
    child.wait().unwrap();
    let kept = assert_all_valid(&s.cache);
    assert!((2..10).contains(&kept), "{kept} entries");
    // The next warmup probes only what is missing.
    let out = s
        .cmd(&["warmup", repo.to_str().unwrap(), "--json"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let summary: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(summary[0]["cached"], kept);
    assert_eq!(summary[0]["probed"], 10 - kept);
    assert_eq!(assert_all_valid(&s.cache), 10);
}

#[test]
fn an_unwritable_cache_warns_and_still_answers() {
    let tmp = tempfile::tempdir().unwrap();
    let repo = kernel_repo(tmp.path(), "tiny", &variant_names(2), "X = 1\n");
    // A cache path that cannot be a directory: unwritable even for root.
    let blocker = tmp.path().join("not-a-dir");
    std::fs::write(&blocker, "").unwrap();
    let mut s = Setup::new();
    s.cache = blocker.join("cache");
    let out = s.cmd(&["select", repo.to_str().unwrap()]).output().unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    // The hub prefers torch-cpu (noarch for this backend) to torch-universal.
    assert!(
        stdout(&out).trim_end().ends_with("build/torch-cpu"),
        "{}",
        stdout(&out)
    );
    let err = stderr(&out);
    assert_eq!(
        err.matches("outcomes are not cached").count(),
        1,
        "one warning: {err}"
    );
}

#[test]
fn a_read_only_cache_directory_warns_and_still_answers() {
    use std::os::unix::fs::PermissionsExt;
    let tmp = tempfile::tempdir().unwrap();
    std::fs::set_permissions(tmp.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
    let repo = kernel_repo(tmp.path(), "tiny", &variant_names(2), "X = 1\n");
    let cache = tmp.path().join("cache");
    std::fs::create_dir(&cache).unwrap();
    std::fs::set_permissions(&cache, std::fs::Permissions::from_mode(0o555)).unwrap();
    // root writes anywhere: take away the capabilities that let it.
    let root = unsafe { libc::geteuid() } == 0;
    let mut cmd = if root {
        let mut c = Command::new("setpriv");
        c.arg("--bounding-set=-dac_override,-dac_read_search,-fowner")
            .arg(env!("CARGO_BIN_EXE_preflight"));
        c
    } else {
        Command::new(env!("CARGO_BIN_EXE_preflight"))
    };
    // Without those capabilities the probes' overlays are refused, and a
    // probe's /tmp is an empty folder (docs/sandbox.md): a checkout's venv
    // under /tmp would not be there. The venv's own interpreter is.
    let python = std::fs::canonicalize(common::venv_python()).unwrap();
    let out = cmd
        .args(["warmup", repo.to_str().unwrap(), "--python"])
        .arg(&python)
        .env("PREFLIGHT_CACHE", &cache)
        .env("HOME", tmp.path())
        .output()
        .unwrap();
    std::fs::set_permissions(&cache, std::fs::Permissions::from_mode(0o755)).unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert!(stdout(&out).contains("torch-cpu"), "{}", stdout(&out));
    assert!(
        stderr(&out).contains("outcomes are not cached"),
        "{}",
        stderr(&out)
    );
    assert!(entry_files(&cache).is_empty());
}

#[test]
fn targets_are_told_apart_by_identity_not_by_the_name_given() {
    // `acme/relu` names a local kernel repo (2 variants) and, with --repo,
    // the hub cache's kernel of that id (3 variants): two targets, one name.
    let tmp = tempfile::tempdir().unwrap();
    kernel_repo(
        &tmp.path().join("acme"),
        "relu",
        &variant_names(2),
        "X = 1\n",
    );
    let hub = tmp.path().join("hub");
    kernel_repo(
        &hub.join("kernels--acme--relu/snapshots"),
        "0123abcd",
        &variant_names(3),
        "X = 1\n",
    );
    let out = Setup::new()
        .cmd(&["warmup", "acme/relu", "--repo", "acme/relu", "--json"])
        .current_dir(tmp.path())
        .env("KERNELS_CACHE", &hub)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let summary: Value = serde_json::from_slice(&out.stdout).unwrap();
    let counts: Vec<(&str, u64)> = summary
        .as_array()
        .unwrap()
        .iter()
        .map(|s| {
            (
                s["target"].as_str().unwrap(),
                s["variants"].as_u64().unwrap(),
            )
        })
        .collect();
    assert_eq!(counts, [("acme/relu", 2), ("acme/relu", 3)]);
}

/// Every file under `dir`.
fn files_under(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    for e in std::fs::read_dir(dir).into_iter().flatten().flatten() {
        if e.file_type().unwrap().is_dir() {
            out.extend(files_under(&e.path()));
        } else {
            out.push(e.path());
        }
    }
    out
}

/// A toolkit whose nvcc must be asked for its version (no version files).
fn asked_toolkit(root: &Path) -> PathBuf {
    use std::os::unix::fs::PermissionsExt;
    let dir = root.join("cuda-asked");
    std::fs::create_dir_all(dir.join("bin")).unwrap();
    let nvcc = dir.join("bin/nvcc");
    std::fs::write(
        &nvcc,
        "#!/bin/sh\necho 'Cuda compilation tools, release 12.8, V12.8.93'\n",
    )
    .unwrap();
    std::fs::set_permissions(&nvcc, std::fs::Permissions::from_mode(0o755)).unwrap();
    dir
}

fn cache_cmd(cache: &Path, args: &[&str]) -> std::process::Output {
    let out = preflight_cmd()
        .arg("cache")
        .args(args)
        .env("PREFLIGHT_CACHE", cache)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    out
}

#[test]
fn cache_clear_leaves_no_file_in_any_bucket() {
    let tmp = tempfile::tempdir().unwrap();
    let repo = repo(tmp.path());
    let mut s = Setup::new();
    s.set("CUDA_HOME", asked_toolkit(tmp.path()));
    assert!(!s.cached(&repo));
    for bucket in [
        "outcomes-v2",
        "identities-v2",
        "fingerprints-v2/measured",
        "fingerprints-v2/tools",
    ] {
        assert!(
            !files_under(&s.cache.join(bucket)).is_empty(),
            "{bucket} holds an entry"
        );
    }
    let dir = cache_cmd(&s.cache, &["dir"]);
    assert_eq!(stdout(&dir).trim_end(), s.cache.to_str().unwrap());

    let out = cache_cmd(&s.cache, &["clear"]);
    assert!(stdout(&out).starts_with("removed "), "{}", stdout(&out));
    assert_eq!(files_under(&s.cache), vec![s.cache.join("CACHEDIR.TAG")]);
    assert!(!s.cached(&repo), "everything is found out again");
}

#[test]
fn an_old_schema_folder_is_never_read_and_prune_removes_it() {
    let tmp = tempfile::tempdir().unwrap();
    let repo = repo(tmp.path());
    let s = Setup::new();
    assert!(!s.cached(&repo));
    assert!(s.cached(&repo));
    // Yesterday's layout: the same valid-looking entries under outcomes-v1.
    std::fs::rename(s.cache.join("outcomes-v2"), s.cache.join("outcomes-v1")).unwrap();
    let ls = cache_cmd(&s.cache, &["ls", "--json"]);
    assert_eq!(stdout(&ls).trim(), "[]");
    assert!(!s.cached(&repo), "an old-schema entry is never read");

    let out = cache_cmd(&s.cache, &["prune", "--json"]);
    let report: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(
        report["schema_dirs"].as_array().unwrap().len(),
        1,
        "{report}"
    );
    assert!(!s.cache.join("outcomes-v1").exists());
    assert!(s.cached(&repo), "current entries survive prune");
}

#[test]
fn prune_removes_outcomes_of_variants_that_are_gone() {
    let tmp = tempfile::tempdir().unwrap();
    let repo = repo(tmp.path());
    let s = Setup::new();
    assert!(!s.cached(&repo));
    std::fs::remove_dir_all(repo.join("build/torch-universal")).unwrap();
    let out = cache_cmd(&s.cache, &["prune", "--json"]);
    let report: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(report["entries"], 1, "{report}");
    let ls = cache_cmd(&s.cache, &["ls", "--json"]);
    let listed: Vec<Value> = serde_json::from_slice(&ls.stdout).unwrap();
    let names: Vec<&str> = listed
        .iter()
        .map(|e| e["parts"]["job"]["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["torch-cpu"]);
    let table = stdout(&cache_cmd(&s.cache, &["ls"]));
    assert!(
        table.contains("torch-cpu") && table.contains("pass"),
        "{table}"
    );
}

#[test]
fn identical_files_under_two_names_are_probed_and_kept_as_two_jobs() {
    let tmp = tempfile::tempdir().unwrap();
    let repo = tmp.path().join("same");
    let metadata = serde_json::json!({
        "name": "same", "id": "_same_0", "version": 1, "license": "MIT",
        "python-depends": [], "backend": {"type": "cpu"},
    });
    for name in ["torch-cpu", "torch-universal"] {
        let dir = repo.join("build").join(name);
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(dir.join("__init__.py"), "X = 1\n").unwrap();
        std::fs::write(dir.join("metadata.json"), metadata.to_string()).unwrap();
    }
    let s = Setup::new();
    assert!(!s.cached(&repo));
    let ls = cache_cmd(&s.cache, &["ls", "--json"]);
    let listed: Vec<Value> = serde_json::from_slice(&ls.stdout).unwrap();
    let mut names: Vec<&str> = listed
        .iter()
        .map(|e| e["parts"]["job"]["name"].as_str().unwrap())
        .collect();
    names.sort();
    assert_eq!(names, ["torch-cpu", "torch-universal"]);
    assert_eq!(
        listed[0]["parts"]["job"]["files"], listed[1]["parts"]["job"]["files"],
        "the same files"
    );
    // The key holds what the job asked for and the protocol its child spoke.
    for entry in &listed {
        let job = &entry["parts"]["job"];
        assert_eq!(job["depth"], "verified", "{job}");
        assert_eq!(
            job["protocol"],
            kernel_preflight::protocol::PROTOCOL_VERSION
        );
        assert_eq!(job["executor"], "python", "{job}");
    }
    assert!(s.cached(&repo));
}

#[test]
fn a_transient_outcome_is_reported_and_never_kept() {
    let tmp = tempfile::tempdir().unwrap();
    // Memory taken by another process: the variant may load next time.
    let repo = kernel_repo(
        tmp.path(),
        "busy",
        &variant_names(1),
        "class OutOfMemoryError(RuntimeError):\n    pass\n\n\
         raise OutOfMemoryError('CUDA out of memory. Tried to allocate 2.00 GiB')\n",
    );
    let s = Setup::new();
    for _ in 0..2 {
        let out = s
            .cmd(&["check", repo.to_str().unwrap(), "--json"])
            .output()
            .unwrap();
        assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
        let doc: Value = serde_json::from_slice(&out.stdout).unwrap();
        let result = &doc["results"][0];
        assert_eq!(result["outcome"]["kind"], "out_of_memory", "{result}");
        assert_eq!(result["outcome"]["transient"], true, "{result}");
        assert_eq!(result["cached"], false, "probed again: {result}");
    }
    assert!(entry_files(&s.cache).is_empty(), "nothing kept");
}

/// `check --cached` answers from the cache alone: before any probe every
/// variant is `skipped` (exit 1) and nothing ran (no outcome was kept, no
/// namespace was tried); once probed, the same answers as `check`, cached;
/// with `--no-cache` it is a usage error.
#[test]
fn check_cached_answers_from_the_cache_and_probes_nothing() {
    let tmp = tempfile::tempdir().unwrap();
    let repo = repo(tmp.path());
    let s = Setup::new();
    let check = |extra: &[&str]| {
        let mut args = vec!["check", repo.to_str().unwrap(), "--json"];
        args.extend_from_slice(extra);
        let out = s.cmd(&args).output().unwrap();
        let doc: Value =
            serde_json::from_slice(&out.stdout).unwrap_or_else(|e| panic!("{e}: {}", stderr(&out)));
        (out.status.code(), doc)
    };
    let kinds = |doc: &Value| -> Vec<String> {
        doc["results"]
            .as_array()
            .unwrap()
            .iter()
            .map(|r| r["outcome"]["kind"].as_str().unwrap().to_owned())
            .collect()
    };

    let (code, cold) = check(&["--cached"]);
    assert_eq!(code, Some(1), "{cold:#}");
    assert_eq!(kinds(&cold), ["skipped", "skipped"], "{cold:#}");
    assert!(
        cold["results"][0]["outcome"]["message"]
            .as_str()
            .unwrap()
            .contains("not in the outcome cache"),
        "{cold:#}"
    );
    assert!(cold["isolation"].is_null(), "nothing was tried: {cold:#}");
    assert_eq!(entry_files(&s.cache).len(), 0, "nothing was probed");

    let (code, probed) = check(&[]);
    assert_eq!(code, Some(0), "{probed:#}");
    // Racy witnesses are not trusted (the cache's rule): the variant files
    // were written just now.
    std::thread::sleep(std::time::Duration::from_millis(2100));
    let (code, warm) = check(&["--cached"]);
    assert_eq!(code, Some(0), "{warm:#}");
    assert_eq!(kinds(&warm), kinds(&probed));
    assert!(
        warm["results"]
            .as_array()
            .unwrap()
            .iter()
            .all(|r| r["cached"] == true),
        "{warm:#}"
    );

    let out = s
        .cmd(&["check", repo.to_str().unwrap(), "--cached", "--no-cache"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(
        stderr(&out).contains("--cached answers from the outcome cache"),
        "{}",
        stderr(&out)
    );
}
