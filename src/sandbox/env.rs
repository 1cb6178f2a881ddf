//! The environment a child inherits: the parent's, minus credentials.

use std::collections::BTreeMap;
use std::ffi::{OsStr, OsString};
use std::path::PathBuf;

/// Name suffixes (upper case) of variables that hold credentials.
const SECRET_SUFFIXES: &[&str] = &[
    "_TOKEN",
    "_SECRET",
    "_KEY",
    "_PASSWORD",
    "_PASSWD",
    "_CREDENTIALS",
];

/// Whole names (upper case) of variables that hold credentials.
const SECRET_NAMES: &[&str] = &["TOKEN", "SECRET", "PASSWORD", "PASSWD"];

/// Name prefixes (upper case) of variable families that hold credentials.
const SECRET_PREFIXES: &[&str] = &["AWS_", "PREFLIGHT_REMOTE"];

/// Whether a variable of this name must not reach a child.
///
/// Case-insensitive: `HF_TOKEN`, `*_TOKEN`, `*_SECRET`, `*_KEY`,
/// `*_PASSWORD`, `*_PASSWD`, `*_CREDENTIALS`, the bare `TOKEN` / `SECRET` /
/// `PASSWORD` / `PASSWD`, every `AWS_*` variable, and the fleet's remote
/// store settings (`PREFLIGHT_REMOTE*`: an address may hold a password).
pub fn is_secret_name(name: &OsStr) -> bool {
    let name = name.to_string_lossy().to_ascii_uppercase();
    SECRET_NAMES.contains(&name.as_str())
        || SECRET_SUFFIXES.iter().any(|s| name.ends_with(s))
        || SECRET_PREFIXES.iter().any(|p| name.starts_with(p))
}

/// The parent's environment without credentials: what a child starts from.
///
/// A probed kernel is untrusted code; it has no business with the user's
/// Hugging Face, cloud or API tokens. See [`is_secret_name`] for the rule.
pub fn scrubbed_env() -> Vec<(OsString, OsString)> {
    std::env::vars_os()
        .filter(|(name, _)| !is_secret_name(name))
        .collect()
}

/// A variable of `env` as a path, if set and not empty.
fn var(env: &BTreeMap<OsString, OsString>, name: &str) -> Option<PathBuf> {
    env.get(OsStr::new(name))
        .filter(|v| !v.is_empty())
        .map(PathBuf::from)
}

/// `$XDG_CACHE_HOME`, else `~/.cache`, in `env`.
fn cache_home(env: &BTreeMap<OsString, OsString>) -> Option<PathBuf> {
    var(env, "XDG_CACHE_HOME").or_else(|| var(env, "HOME").map(|h| h.join(".cache")))
}

/// The files that hold the Hugging Face hub's tokens for a child with the
/// environment `env`, as `huggingface_hub` finds them (`HF_TOKEN_PATH`,
/// `$HF_HOME/token` and `stored_tokens`, the old `~/.huggingface/token`):
/// a probe must not see them.
pub(crate) fn credential_files(env: &BTreeMap<OsString, OsString>) -> Vec<PathBuf> {
    let hf_home = var(env, "HF_HOME").or_else(|| cache_home(env).map(|c| c.join("huggingface")));
    let mut files: Vec<PathBuf> = var(env, "HF_TOKEN_PATH").into_iter().collect();
    if let Some(home) = hf_home {
        files.extend([home.join("token"), home.join("stored_tokens")]);
    }
    if let Some(home) = var(env, "HOME") {
        files.push(home.join(".huggingface/token"));
    }
    files
}

/// The just-in-time compilation caches a child with the environment `env`
/// writes, each with a name of its own (CUDA's `~/.nv`, Triton's
/// `~/.triton`, torch's `~/.cache/torch_extensions`, and the variables
/// that move them): a probe finds its own kernel's there, never the
/// user's (`walls::jit_walls`).
pub(crate) fn jit_caches(env: &BTreeMap<OsString, OsString>) -> Vec<(&'static str, PathBuf)> {
    let home = var(env, "HOME");
    let mut dirs = Vec::new();
    dirs.extend(var(env, "CUDA_CACHE_PATH").map(|d| ("cuda_cache_path", d)));
    dirs.extend(home.as_ref().map(|h| ("nv", h.join(".nv"))));
    dirs.extend(var(env, "TRITON_CACHE_DIR").map(|d| ("triton_cache_dir", d)));
    dirs.extend(var(env, "TRITON_HOME").map(|h| ("triton_home", h.join(".triton"))));
    dirs.extend(home.as_ref().map(|h| ("triton", h.join(".triton"))));
    dirs.extend(var(env, "TORCH_EXTENSIONS_DIR").map(|d| ("torch_extensions_dir", d)));
    dirs.extend(cache_home(env).map(|c| ("torch_extensions", c.join("torch_extensions"))));
    dirs
}

/// CUDA's MPS pipe folder for a child with the environment `env`: a probe
/// reaches the daemon's pipes there, read-only.
pub(crate) fn mps_pipes(env: &BTreeMap<OsString, OsString>) -> PathBuf {
    var(env, "CUDA_MPS_PIPE_DIRECTORY").unwrap_or_else(|| "/tmp/nvidia-mps".into())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn credentials_are_recognised() {
        for name in [
            "HF_TOKEN",
            "HUGGING_FACE_HUB_TOKEN",
            "GITHUB_TOKEN",
            "hf_token",
            "CLIENT_SECRET",
            "OPENAI_API_KEY",
            "DB_PASSWORD",
            "GOOGLE_APPLICATION_CREDENTIALS",
            "AWS_REGION",
            "AWS_SECRET_ACCESS_KEY",
            "TOKEN",
        ] {
            assert!(is_secret_name(OsStr::new(name)), "{name}");
        }
    }

    #[test]
    fn ordinary_variables_pass() {
        for name in [
            "PATH",
            "HOME",
            "CUDA_HOME",
            "CUDA_VISIBLE_DEVICES",
            // Where the JIT cache is: the probe's is its kernel's own,
            // bound there (walls.rs).
            "CUDA_CACHE_PATH",
            "CUDA_CACHE_MAXSIZE",
            "HF_HOME",
            "TOKENIZERS_PARALLELISM",
            "KEYBOARD",
            "LD_LIBRARY_PATH",
        ] {
            assert!(!is_secret_name(OsStr::new(name)), "{name}");
        }
    }

    #[test]
    fn token_files_and_jit_caches_follow_the_environment() {
        let env = |pairs: &[(&str, &str)]| -> BTreeMap<OsString, OsString> {
            pairs.iter().map(|(k, v)| (k.into(), v.into())).collect()
        };
        let plain = env(&[("HOME", "/home/u")]);
        assert_eq!(
            credential_files(&plain),
            [
                "/home/u/.cache/huggingface/token",
                "/home/u/.cache/huggingface/stored_tokens",
                "/home/u/.huggingface/token"
            ]
            .map(PathBuf::from)
        );
        let moved = env(&[("HOME", "/h"), ("HF_HOME", "/hf"), ("HF_TOKEN_PATH", "/t")]);
        assert_eq!(
            credential_files(&moved)[..3],
            ["/t", "/hf/token", "/hf/stored_tokens"].map(PathBuf::from)
        );
        let caches: Vec<PathBuf> = jit_caches(&plain).into_iter().map(|(_, d)| d).collect();
        for dir in [
            "/home/u/.nv",
            "/home/u/.triton",
            "/home/u/.cache/torch_extensions",
        ] {
            assert!(caches.contains(&PathBuf::from(dir)), "{caches:?}");
        }
    }
}
