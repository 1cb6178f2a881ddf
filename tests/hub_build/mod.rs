//! Kernel repos built the way the hub's build tooling builds them (the
//! hub layout, `metadata.json` in kernel-builder's form with the digest the
//! hub's own `kernels` computes: `tests/oracle/hub_build.py`), and the
//! oracle of acceptance: `kernels.get_local_kernel` on each variant, in a
//! subprocess of the interpreter preflight probes with
//! (`tests/oracle/hub_load.py`).
#![allow(dead_code)]

use serde_json::{Value, json};
use std::path::{Path, PathBuf};
use std::process::Command;

fn oracle_script(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/oracle")
        .join(name)
}

/// A virtual environment of the test suite, by its folder name under the
/// checkout (or `env`'s value): it must exist (CI creates it with
/// `scripts/setup-env.sh`); a test never skips for want of it.
pub fn venv_python(folder: &str, env: &str) -> PathBuf {
    let dir = std::env::var_os(env)
        .map(PathBuf::from)
        .unwrap_or_else(|| Path::new(env!("CARGO_MANIFEST_DIR")).join(folder));
    let python = dir.join("bin/python");
    assert!(
        python.exists(),
        "test environment {} is missing: run scripts/setup-env.sh",
        dir.display()
    );
    python
}

/// The project venv (`kernels` 0.17.2, no torch, no Triton).
pub fn python() -> PathBuf {
    venv_python(".venv", "PREFLIGHT_TEST_VENV")
}

/// The Triton venv (`kernels` 0.17.2 and Triton from PyPI, no torch).
pub fn triton_python() -> PathBuf {
    venv_python(".venv-triton", "PREFLIGHT_TEST_TRITON_VENV")
}

/// A kernel repo `<root>/<name>/build/<variant>/` in the making.
pub struct HubKernel {
    pub name: String,
    pub repo: PathBuf,
    variants: Vec<PathBuf>,
}

impl HubKernel {
    pub fn new(root: &Path, name: &str) -> HubKernel {
        HubKernel {
            name: name.to_owned(),
            repo: root.join(name),
            variants: Vec::new(),
        }
    }

    /// The metadata kernel-builder writes for this kernel and `backend`
    /// (before its hash step): the ops id is `_<module>_<backend>_<rev>`.
    pub fn metadata(&self, backend: &str) -> Value {
        let module = self.name.replace('-', "_");
        json!({
            "name": self.name,
            "id": format!("_{module}_{backend}_0b2a6e1"),
            "version": 1,
            "license": "Apache-2.0",
            "upstream": format!("https://github.com/example/{}.git", self.name),
            "python-depends": [],
            "backend": {"type": backend},
            "provenance": {
                "kernel-builder": {"version": "0.17.2", "sha": "d0610aa58db33b142c86b59598a2a1c730f52996", "dirty": false},
                "kernel": {"sha": "0b2a6e1c3f4d5e6f708192a3b4c5d6e7f8091a2b", "dirty": false},
            },
        })
    }

    /// Variant `variant` with `files` (relative path, text) and `metadata`
    /// (the digest is added by [`HubKernel::finish`]).
    pub fn variant(&mut self, variant: &str, files: &[(&str, &str)], metadata: Value) -> PathBuf {
        let dir = self.repo.join("build").join(variant);
        for (relative, text) in files {
            let path = dir.join(relative);
            std::fs::create_dir_all(path.parent().unwrap()).unwrap();
            std::fs::write(path, text).unwrap();
        }
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(dir.join("metadata.json"), metadata.to_string()).unwrap();
        self.variants.push(dir.clone());
        dir
    }

    /// A file of the repo outside `build/` (benchmarks, smoke files).
    pub fn file(&self, relative: &str, text: &str) -> PathBuf {
        let path = self.repo.join(relative);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(&path, text).unwrap();
        path
    }

    /// The build's last steps, by the hub's own code: bytecode removed, the
    /// digest computed and written (with `python`, which has `kernels`).
    pub fn finish(self, python: &Path) -> PathBuf {
        if !self.variants.is_empty() {
            hub_hash(python, &self.variants);
        }
        self.repo
    }
}

/// `kernel-builder hash` on `variants`, with the hub's `Digest`.
pub fn hub_hash(python: &Path, variants: &[PathBuf]) {
    let out = Command::new(python)
        .arg(oracle_script("hub_build.py"))
        .args(variants)
        .output()
        .expect("hub_build.py runs");
    assert!(
        out.status.success(),
        "hub_build.py: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// What the hub loader did with each variant: `None` when
/// `get_local_kernel` loaded it, else `"Type: message"`; and the version of
/// `kernels` that judged.
pub fn get_local_kernel(python: &Path, variants: &[PathBuf]) -> (Vec<Option<String>>, String) {
    let cwd = tempfile::tempdir().unwrap();
    let out = Command::new(python)
        .arg(oracle_script("hub_load.py"))
        .arg(serde_json::to_string(variants).unwrap())
        .current_dir(cwd.path())
        .env("HF_HUB_OFFLINE", "1")
        .env("HF_HUB_CACHE", cwd.path())
        .env_remove("PYTHONPATH")
        .output()
        .expect("the oracle runs");
    assert!(
        out.status.success(),
        "oracle: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let v: Value = serde_json::from_slice(&out.stdout).expect("oracle JSON");
    let results = v["results"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r.as_str().map(str::to_owned))
        .collect();
    (results, v["kernels"].as_str().unwrap().to_owned())
}

/// Run `preflight` with `args` and an outcome cache at `cache`.
pub fn preflight(cache: &Path, args: &[&str]) -> std::process::Output {
    Command::new(env!("CARGO_BIN_EXE_preflight"))
        .env("PREFLIGHT_CACHE", cache)
        .env_remove("PREFLIGHT_PYTHON")
        .args(args)
        .output()
        .expect("preflight runs")
}

/// `preflight … --json`'s document, and its exit code.
pub fn preflight_json(cache: &Path, args: &[&str]) -> (Value, Option<i32>) {
    let out = preflight(cache, args);
    let doc = serde_json::from_slice(&out.stdout).unwrap_or_else(|e| {
        panic!(
            "{args:?}: no JSON ({e}): {}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        )
    });
    (doc, out.status.code())
}

/// The oracle's rule: every variant preflight passes, the hub loads; every
/// one the hub refuses is not a pass and its message names the hub's
/// reason (`reason_of` picks from the hub's message what must be named).
pub fn assert_agrees_with_the_hub(
    python: &Path,
    results: &[(PathBuf, Value)],
    reason_of: impl Fn(&str) -> String,
) {
    let paths: Vec<PathBuf> = results.iter().map(|(p, _)| p.clone()).collect();
    let (hub, kernels) = get_local_kernel(python, &paths);
    for ((path, outcome), hub) in results.iter().zip(&hub) {
        let kind = outcome["kind"].as_str().unwrap_or("?");
        match hub {
            None => {}
            Some(refusal) => {
                assert_ne!(
                    kind,
                    "pass",
                    "{}: preflight passes what kernels {kernels} refuses: {refusal}",
                    path.display()
                );
                let reason = reason_of(refusal);
                let message = outcome["message"].as_str().unwrap_or("");
                assert!(
                    message.contains(&reason),
                    "{}: {message:?} does not name the hub's reason {reason:?} (kernels {kernels}: {refusal})",
                    path.display()
                );
            }
        }
        if kind == "pass" {
            assert!(
                hub.is_none(),
                "{}: pass but the hub refuses",
                path.display()
            );
        }
    }
}
