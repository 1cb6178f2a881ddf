//! The environment a child inherits: the parent's, minus credentials.

use std::ffi::{OsStr, OsString};

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
const SECRET_PREFIXES: &[&str] = &["AWS_"];

/// Whether a variable of this name must not reach a child.
///
/// Case-insensitive: `HF_TOKEN`, `*_TOKEN`, `*_SECRET`, `*_KEY`,
/// `*_PASSWORD`, `*_PASSWD`, `*_CREDENTIALS`, the bare `TOKEN` / `SECRET` /
/// `PASSWORD` / `PASSWD`, and every `AWS_*` variable.
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
            // The user's JIT cache: the device depth fills it, so that
            // `warmup` leaves it warm.
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
}
