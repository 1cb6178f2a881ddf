//! How a kernel at a version becomes a name that stays valid, and unique,
//! in every scheduler that reads it: a Kubernetes label name (what NFD and
//! Ray use) and a Slurm feature name.
//!
//! The readable form of `ORG/NAME` at `VERSION` is `ORG.NAME.VERSION`
//! (`kernels-community.relu.v1`). It is used as is when it is one
//! [`is_label_name`] of at most [`KEY_MAX`] characters, neither `ORG` nor
//! `NAME` holds a dot, and it does not end like a hashed form; then it
//! splits back at its first two dots, so two kernels never share it. Any
//! other kernel gets the hashed form: the readable one with every other
//! character made `-`, cut to leave room, trimmed to end alphanumeric,
//! then `-` and the first 10 hex digits of sha256(`ORG/NAME@VERSION`).
//! Hashed forms end in `-` and 10 hex digits, which a readable one never
//! does, so the two kinds never meet; two hashed forms meet only if 40
//! bits of sha256 do.

use sha2::{Digest, Sha256};

/// The label prefix (a DNS subdomain of the publisher's own) when the user
/// gives none.
pub const DEFAULT_PREFIX: &str = "preflight.kernels.hf.co";

/// What every Slurm feature preflight publishes starts with, so that they
/// never meet a site's own features.
pub const SLURM_PREFIX: &str = "preflight.";

/// The label (and feature) name of the node's machine class.
pub const MACHINE_CLASS: &str = "machine-class";

/// Appended to a kernel's key for the label that names its variant.
pub const VARIANT_SUFFIX: &str = ".variant";

/// Longest kernel key: a Kubernetes label name is at most 63 characters,
/// and the variant label adds [`VARIANT_SUFFIX`].
pub const KEY_MAX: usize = NAME_MAX - VARIANT_SUFFIX.len();

/// Longest Kubernetes label name (the part after the prefix) and value.
pub const NAME_MAX: usize = 63;

/// Hex digits of sha256 in a hashed form.
const HASH_HEX: usize = 10;

/// The key of `repo` (`ORG/NAME`) at `version` (see the module's
/// documentation): a valid Kubernetes label name of at most [`KEY_MAX`]
/// characters, the same on every node.
pub fn kernel_key(repo: &str, version: &str) -> String {
    let (org, name) = repo.split_once('/').unwrap_or(("", repo));
    let readable = format!("{org}.{name}.{version}");
    let plain = !org.is_empty()
        && !org.contains('.')
        && !name.contains('.')
        && !name.contains('/')
        && readable.len() <= KEY_MAX
        && is_label_name(&readable)
        && !looks_hashed(&readable);
    if plain {
        readable
    } else {
        hashed(&readable, &format!("{repo}@{version}"), KEY_MAX)
    }
}

/// `text` as a Kubernetes label value: itself when it is one, else its
/// hashed form (as for keys, hashed over `text`).
pub fn label_value(text: &str) -> String {
    if is_label_value(text) && !text.is_empty() && !looks_hashed(text) {
        text.to_owned()
    } else {
        hashed(text, text, NAME_MAX)
    }
}

/// The Slurm feature of a kernel key (or of [`machine_class_feature`]).
pub fn slurm_feature(key: &str) -> String {
    format!("{SLURM_PREFIX}{key}")
}

/// The Slurm feature of a machine class: `preflight.class.<hash>` (a
/// kernel key always has two dots, a class one).
pub fn machine_class_feature(class: &str) -> String {
    format!("{SLURM_PREFIX}class.{class}")
}

/// `readable` with every character outside `[A-Za-z0-9._-]` made `-`, cut
/// to leave room for the hash, trimmed to start and end alphanumeric, then
/// `-` and 10 hex digits of sha256(`exact`); at most `max` characters.
fn hashed(readable: &str, exact: &str, max: usize) -> String {
    let hash = crate::hash::hex(&Sha256::digest(exact.as_bytes()));
    let room = max - HASH_HEX - 1;
    let cleaned: String = readable
        .chars()
        .map(|c| if name_char(c) { c } else { '-' })
        .take(room)
        .collect();
    let trimmed = cleaned.trim_matches(|c: char| !c.is_ascii_alphanumeric());
    if trimmed.is_empty() {
        format!("h-{}", &hash[..HASH_HEX])
    } else {
        format!("{trimmed}-{}", &hash[..HASH_HEX])
    }
}

/// Whether `text` ends in `-` and 10 lower-case hex digits, as a hashed
/// form does.
fn looks_hashed(text: &str) -> bool {
    let bytes = text.as_bytes();
    bytes.len() > HASH_HEX
        && bytes[bytes.len() - HASH_HEX - 1] == b'-'
        && bytes[bytes.len() - HASH_HEX..]
            .iter()
            .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(b))
}

fn name_char(c: char) -> bool {
    c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.')
}

/// Kubernetes' rule for a label name (the part after `prefix/`) and for a
/// non-empty label value: 1 to 63 characters of `[A-Za-z0-9._-]`, starting
/// and ending alphanumeric.
pub fn is_label_name(text: &str) -> bool {
    !text.is_empty()
        && text.len() <= NAME_MAX
        && text.chars().all(name_char)
        && text.starts_with(|c: char| c.is_ascii_alphanumeric())
        && text.ends_with(|c: char| c.is_ascii_alphanumeric())
}

/// Kubernetes' rule for a label value: empty, or as a name.
pub fn is_label_value(text: &str) -> bool {
    text.is_empty() || is_label_name(text)
}

/// RFC 1123 DNS subdomain, as Kubernetes checks a label prefix: at most
/// 253 characters, dot-separated parts of 1 to 63 of `[a-z0-9-]`, each
/// starting and ending alphanumeric.
pub fn is_dns_subdomain(text: &str) -> bool {
    text.len() <= 253
        && text.split('.').all(|part| {
            !part.is_empty()
                && part.len() <= 63
                && part
                    .bytes()
                    .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
                && part.starts_with(|c: char| c.is_ascii_alphanumeric())
                && part.ends_with(|c: char| c.is_ascii_alphanumeric())
        })
}

/// A label prefix NFD would refuse, and why.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PrefixError {
    /// Not a DNS subdomain.
    #[error(
        "{0:?} is not a DNS subdomain (lower-case letters, digits, '-' and '.', each part starting and ending with a letter or digit, at most 253 characters)"
    )]
    NotDns(String),
    /// A Kubernetes-owned namespace NFD does not publish in.
    #[error(
        "{0:?} is a Kubernetes namespace that NFD refuses (kubernetes.io and k8s.io names other than feature.node.kubernetes.io and profile.node.kubernetes.io): use a domain of your own"
    )]
    Reserved(String),
}

/// `prefix` if NFD publishes labels under it: a DNS subdomain, not in the
/// `kubernetes.io` or `k8s.io` namespaces except `feature.node.kubernetes.io`
/// and `profile.node.kubernetes.io` (and their subdomains), which NFD
/// keeps for features.
pub fn check_prefix(prefix: &str) -> Result<(), PrefixError> {
    if !is_dns_subdomain(prefix) {
        return Err(PrefixError::NotDns(prefix.to_owned()));
    }
    let under = |ns: &str| prefix == ns || prefix.ends_with(&format!(".{ns}"));
    let allowed = under("feature.node.kubernetes.io") || under("profile.node.kubernetes.io");
    if (under("kubernetes.io") || under("k8s.io")) && !allowed {
        return Err(PrefixError::Reserved(prefix.to_owned()));
    }
    Ok(())
}

/// Whether `text` is safe as a Slurm feature name: letters, digits, `_`,
/// `-` and `.`, starting with a letter. Slurm's constraint syntax gives
/// `& | , * [ ] ( ) ! :` and spaces meanings of their own.
pub fn is_slurm_feature(text: &str) -> bool {
    text.starts_with(|c: char| c.is_ascii_alphabetic()) && text.chars().all(name_char)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_plain_kernel_keeps_its_readable_key() {
        assert_eq!(
            kernel_key("kernels-community/relu", "v1"),
            "kernels-community.relu.v1"
        );
    }

    #[test]
    fn a_dot_in_a_name_is_hashed_so_that_keys_stay_unique() {
        let a = kernel_key("a.b/c", "v1");
        let b = kernel_key("a/b.c", "v1");
        assert_ne!(a, b);
        assert!(
            a.starts_with("a.b.c.v1-") && b.starts_with("a.b.c.v1-"),
            "{a} {b}"
        );
        assert!(is_label_name(&a) && is_label_name(&b));
    }

    #[test]
    fn a_version_that_looks_hashed_is_hashed() {
        let key = kernel_key("o/n", "x-0123456789");
        assert_ne!(key, "o.n.x-0123456789");
        assert!(looks_hashed(&key));
    }
}
