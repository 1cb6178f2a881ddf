//! A warm `select` answered from the target's warm record: the same answer
//! as a cold run, never a stale one. Each test plants a record that would
//! answer wrongly (a record's body is not covered by its key, only its
//! parts are) to see whether a run used it: after any change of what the
//! answer depends on, it must not.

mod common;

use common::{age, fresh_dir, kernel_repo, stderr, stdout, variant_names};
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

fn select(cache: &Path, repo: &Path, env: &[(&str, &str)]) -> Output {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_preflight"));
    cmd.arg("select")
        .arg(repo)
        .arg("--python")
        .arg(common::venv_python())
        .env("PREFLIGHT_CACHE", cache);
    for (k, v) in env {
        cmd.env(k, v);
    }
    cmd.output().expect("run preflight")
}

/// That `select` printed the directory of `variant`.
fn chose(out: &Output, variant: &str) {
    let printed = stdout(out);
    assert!(
        printed.trim().ends_with(&format!("build/{variant}")),
        "expected {variant}: {printed}{}",
        stderr(out)
    );
}

fn warm_records(cache: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    let dir = cache.join("identities-v2/warm");
    for shard in std::fs::read_dir(&dir).into_iter().flatten().flatten() {
        for f in std::fs::read_dir(shard.path()).unwrap().flatten() {
            out.push(f.path());
        }
    }
    out
}

/// The one warm record under `cache` (one target), as stored.
fn the_record(cache: &Path) -> serde_json::Value {
    let records = warm_records(cache);
    assert_eq!(records.len(), 1, "one warm record per target");
    serde_json::from_slice(&std::fs::read(&records[0]).unwrap()).unwrap()
}

/// Make every warm record under `cache` answer `wrong` (a variant the
/// accepted one before it says passes): a run that prints `wrong` used it.
fn plant(cache: &Path, wrong: &str) {
    let records = warm_records(cache);
    assert!(!records.is_empty(), "no warm record was kept");
    for file in records {
        let mut entry: serde_json::Value =
            serde_json::from_slice(&std::fs::read(&file).unwrap()).unwrap();
        for job in entry["record"]["jobs"].as_array_mut().unwrap() {
            if job["outcome"].is_object() {
                let pass = job["name"] == wrong;
                job["outcome"]["outcome"]["kind"] =
                    if pass { "pass" } else { "import_error" }.into();
            }
        }
        std::fs::write(&file, serde_json::to_vec(&entry).unwrap()).unwrap();
    }
}

/// A repo whose preferred variant (torch-cpu) works, and a cache whose
/// warm record was kept (the files settled first).
fn warm_repo() -> (tempfile::TempDir, PathBuf, PathBuf) {
    let tmp = tempfile::tempdir().unwrap();
    let names = variant_names(2); // torch-universal, torch-cpu
    let repo = kernel_repo(tmp.path(), "tiny", &names, "X = 1\n");
    age(&repo);
    let cache = fresh_dir("cache");
    let out = select(&cache, &repo, &[]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    chose(&out, "torch-cpu");
    // The outcome entries it just wrote are too new to vouch for: the
    // record has no outcome yet, and the next run (which finds that) keeps
    // it again once they have settled.
    age(&cache.join("outcomes-v2"));
    let out = select(&cache, &repo, &[]);
    chose(&out, "torch-cpu");
    let entry = the_record(&cache);
    let kept = entry["record"]["jobs"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|j| j["outcome"].is_object())
        .count();
    assert_eq!(kept, 2, "{entry}");
    (tmp, repo, cache)
}

#[test]
fn a_warm_record_answers_the_plain_select() {
    let (_tmp, repo, cache) = warm_repo();
    let cold = stdout(&select(&cache, &repo, &[]));
    assert!(cold.trim().ends_with("build/torch-cpu"), "{cold}");
    // The planted answer is taken: the warm path answered.
    plant(&cache, "torch-universal");
    let out = select(&cache, &repo, &[]);
    chose(&out, "torch-universal");
    // --json plans and runs as before: the real answer.
    let out = Command::new(env!("CARGO_BIN_EXE_preflight"))
        .args(["select", "--json", "--python"])
        .arg(common::venv_python())
        .arg(&repo)
        .env("PREFLIGHT_CACHE", &cache)
        .output()
        .unwrap();
    let doc: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(doc["variant"], "torch-cpu", "{}", stderr(&out));
}

#[test]
fn a_changed_file_of_a_variant_the_answer_depends_on_misses() {
    let (_tmp, repo, cache) = warm_repo();
    plant(&cache, "torch-universal");
    // torch-cpu (preferred) is rewritten: same size, a new mtime.
    std::fs::write(repo.join("build/torch-cpu/__init__.py"), "X = 2\n").unwrap();
    let out = select(&cache, &repo, &[]);
    chose(&out, "torch-cpu");
}

#[test]
fn a_changed_metadata_json_misses() {
    let (_tmp, repo, cache) = warm_repo();
    plant(&cache, "torch-universal");
    let metadata = repo.join("build/torch-cpu/metadata.json");
    let text = std::fs::read_to_string(&metadata).unwrap();
    std::fs::write(&metadata, text.replace("\"version\":1", "\"version\":2")).unwrap();
    let out = select(&cache, &repo, &[]);
    chose(&out, "torch-cpu");
}

#[test]
fn a_new_variant_or_another_machine_misses() {
    let (_tmp, repo, cache) = warm_repo();
    plant(&cache, "torch-universal");
    // Another machine: a variable the fingerprint covers.
    let out = select(&cache, &repo, &[("CUDA_VISIBLE_DEVICES", "")]);
    chose(&out, "torch-cpu");
    // The listing changed: a file added to the directory of variants.
    plant(&cache, "torch-universal");
    std::fs::write(repo.join("build/README"), "notes\n").unwrap();
    let out = select(&cache, &repo, &[]);
    chose(&out, "torch-cpu");
    assert!(
        stderr(&out).contains("not a directory, ignored"),
        "{}",
        stderr(&out)
    );
}

#[test]
fn a_removed_outcome_entry_misses() {
    let (_tmp, repo, cache) = warm_repo();
    plant(&cache, "torch-universal");
    std::fs::remove_dir_all(cache.join("outcomes-v2")).unwrap();
    let out = select(&cache, &repo, &[]);
    chose(&out, "torch-cpu");
}

#[test]
fn a_corrupt_warm_record_is_ignored_with_its_path_and_removed() {
    let (_tmp, repo, cache) = warm_repo();
    let record = warm_records(&cache).pop().unwrap();
    std::fs::write(&record, b"{\"key\": not json").unwrap();
    let out = select(&cache, &repo, &[]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    chose(&out, "torch-cpu");
    let err = stderr(&out);
    assert!(
        err.contains("ignored a corrupt warm record")
            && err.contains(&record.display().to_string()),
        "{err}"
    );
    assert!(!err.contains("panicked"), "{err}");
    // Kept again, whole, by the run that ignored it.
    let again: serde_json::Value =
        serde_json::from_slice(&std::fs::read(&record).unwrap()).unwrap();
    assert!(again["record"]["jobs"].is_array());
}

/// A Python environment of the test's own, with nothing installed (no
/// pip): its interpreter and its import folder, where the test "installs".
fn bare_env(root: &Path) -> (PathBuf, PathBuf) {
    let env = root.join("env");
    let out = Command::new(common::venv_python())
        .args(["-m", "venv", "--without-pip"])
        .arg(&env)
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", stderr(&out));
    let lib = std::fs::read_dir(env.join("lib"))
        .unwrap()
        .flatten()
        .find(|e| e.file_name().to_string_lossy().starts_with("python3"))
        .expect("lib/python3.*");
    (env.join("bin/python"), lib.path().join("site-packages"))
}

#[test]
fn installing_a_missing_module_retires_the_outcome_that_said_so() {
    let tmp = tempfile::tempdir().unwrap();
    let (python, site) = bare_env(tmp.path());
    let names = variant_names(2); // torch-universal, torch-cpu (preferred)
    let repo = kernel_repo(tmp.path(), "needs", &names, "X = 1\n");
    // The preferred variant needs a module no fingerprint tracks and no
    // metadata declares.
    std::fs::write(
        repo.join("build/torch-cpu/__init__.py"),
        "import preflight_stale_dep\n",
    )
    .unwrap();
    age(&repo);
    let cache = fresh_dir("cache");
    let select = || {
        let out = Command::new(env!("CARGO_BIN_EXE_preflight"))
            .arg("select")
            .arg(&repo)
            .arg("--python")
            .arg(&python)
            .env("PREFLIGHT_CACHE", &cache)
            .output()
            .unwrap();
        assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
        stdout(&out).trim().to_owned()
    };
    assert!(select().ends_with("build/torch-universal"));
    // Settled, the next run keeps a warm record with both outcomes, the
    // missing module's with what was installed then.
    age(&cache.join("outcomes-v2"));
    assert!(select().ends_with("build/torch-universal"));
    let entry = the_record(&cache);
    let cpu = entry["record"]["jobs"]
        .as_array()
        .unwrap()
        .iter()
        .find(|j| j["name"] == "torch-cpu")
        .unwrap();
    assert_eq!(cpu["outcome"]["outcome"]["kind"], "missing_dependency");
    assert!(cpu["outcome"]["packages"].is_string(), "{cpu}");
    // Nothing installed since: still the warm answer.
    assert!(select().ends_with("build/torch-universal"));

    // `pip install` of a distribution that provides the module.
    std::fs::write(site.join("preflight_stale_dep.py"), "").unwrap();
    std::fs::create_dir(site.join("preflight_stale_dep-1.0.dist-info")).unwrap();
    assert!(
        select().ends_with("build/torch-cpu"),
        "the cached refusal outlived the install"
    );
    // And removing it again retires the pass that imported it.
    std::fs::remove_file(site.join("preflight_stale_dep.py")).unwrap();
    std::fs::remove_dir(site.join("preflight_stale_dep-1.0.dist-info")).unwrap();
    assert!(select().ends_with("build/torch-universal"));
}
