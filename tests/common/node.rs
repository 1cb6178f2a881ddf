//! A node of a fleet on this one machine: a process with an outcome cache
//! of its own, sharing one Redis with the other nodes.

use super::redis_server::RedisServer;
use super::{fresh_dir, preflight_cmd, stderr};
use hmac::{Hmac, Mac};
use serde_json::Value;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};

/// Where the remote store keeps outcome entries, by key.
pub const OUTCOMES: &str = "preflight:outcomes-v2:";
/// The fleet secret every node of the tests shares.
pub const SECRET: &str = "a fleet secret for the tests\n";

/// One node: a cache of its own, the fleet's settings.
pub struct Node {
    /// Its outcome cache.
    pub cache: PathBuf,
    /// Its environment on top of the tests'.
    pub env: Vec<(&'static str, String)>,
    /// `check --timeout`, in seconds.
    pub timeout: &'static str,
}

impl Node {
    pub fn new(redis: &RedisServer, secret: &Path) -> Node {
        Node {
            cache: fresh_dir("node"),
            env: vec![
                ("PREFLIGHT_REMOTE", redis.url()),
                ("PREFLIGHT_REMOTE_SECRET_FILE", secret.display().to_string()),
            ],
            timeout: "20",
        }
    }

    pub fn set(mut self, k: &'static str, v: impl Into<String>) -> Node {
        self.env.retain(|(key, _)| *key != k);
        self.env.push((k, v.into()));
        self
    }

    pub fn unset(mut self, k: &'static str) -> Node {
        self.env.retain(|(key, _)| *key != k);
        self
    }

    pub fn cmd(&self, args: &[&str]) -> Command {
        let mut cmd = preflight_cmd();
        cmd.args(args)
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

    pub fn check_cmd(&self, repo: &Path) -> Command {
        let mut cmd = self.cmd(&[
            "check",
            repo.to_str().unwrap(),
            "--json",
            "--timeout",
            self.timeout,
        ]);
        cmd.arg("--python").arg(super::venv_python());
        cmd
    }

    /// `warmup --json` of `repo` (with `args`), started.
    pub fn warmup(&self, repo: &Path, args: &[&str]) -> Child {
        self.cmd(&["warmup", repo.to_str().unwrap(), "--json"])
            .args(args)
            .arg("--python")
            .arg(super::venv_python())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap()
    }

    /// `check --json` of `repo`: the output and its document.
    pub fn check(&self, repo: &Path) -> (Output, Value) {
        let out = self.check_cmd(repo).output().unwrap();
        let doc = serde_json::from_slice(&out.stdout)
            .unwrap_or_else(|e| panic!("check --json: {e}\n{}", stderr(&out)));
        (out, doc)
    }
}

/// Each row of a `check --json` document: (variant, kind, how it was
/// answered: `probed`, `local` or `remote`).
pub fn rows(doc: &Value) -> Vec<(String, String, &'static str)> {
    let mut rows: Vec<_> = doc["results"]
        .as_array()
        .expect("results")
        .iter()
        .map(|r| {
            let how = match (r["cached"].as_bool(), r["remote"].as_bool()) {
                (Some(true), Some(true)) => "remote",
                (Some(true), _) => "local",
                _ => "probed",
            };
            (
                r["variant"].as_str().unwrap().to_string(),
                r["outcome"]["kind"].as_str().unwrap().to_string(),
                how,
            )
        })
        .collect();
    rows.sort();
    rows
}

pub fn answered(doc: &Value) -> Vec<&'static str> {
    rows(doc).into_iter().map(|(_, _, how)| how).collect()
}

/// A finished `warmup --json` of one kernel, every variant passed: how
/// many variants it probed, how many a cache answered, and its stderr.
pub fn warmed(child: Child) -> (u64, u64, String) {
    let out = child.wait_with_output().unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let doc: Value = serde_json::from_slice(&out.stdout)
        .unwrap_or_else(|e| panic!("warmup --json: {e}\n{}", stderr(&out)));
    let kernel = &doc[0];
    assert_eq!(kernel["passed"], kernel["variants"], "{doc}");
    (
        kernel["probed"].as_u64().unwrap(),
        kernel["cached"].as_u64().unwrap(),
        stderr(&out),
    )
}

/// `n` variant names that load on this CPU-only machine.
pub fn cpu_names(n: usize) -> Vec<String> {
    let mut names = super::variant_names(n + 1);
    names.retain(|v| v != "torch-cuda");
    names.truncate(n);
    names
}

/// A file holding [`SECRET`].
pub fn secret_file() -> PathBuf {
    let path = fresh_dir("secret").join("fleet.key");
    std::fs::write(&path, SECRET).unwrap();
    path
}

/// `sealed` with its entry text replaced by `entry`, signed with `secret`.
pub fn resealed(sealed: &Value, entry: &Value, secret: &[u8]) -> Vec<u8> {
    let text = entry.to_string();
    let mut mac = <Hmac<sha2::Sha256> as Mac>::new_from_slice(secret).unwrap();
    mac.update(sealed["format"].as_str().unwrap().as_bytes());
    mac.update(b"\n");
    mac.update(text.as_bytes());
    let tag: String = mac
        .finalize()
        .into_bytes()
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect();
    let mut out = sealed.clone();
    out["entry"] = Value::String(text);
    out["hmac"] = Value::String(tag);
    serde_json::to_vec(&out).unwrap()
}
