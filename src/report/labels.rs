//! `labels` in each scheduler's own format: an NFD feature file, Slurm
//! features (and the `helpers.conf` lines that declare them), a Ray labels
//! file, or JSON. Every name comes from [`crate::labels::name`].

use crate::labels::name::{self, MACHINE_CLASS, VARIANT_SUFFIX};
use crate::labels::{KernelLabel, NodeLabels};
use crate::run::Recalled;
use std::collections::HashSet;
use std::path::Path;
use std::time::SystemTime;

/// Largest feature file nfd-worker reads.
pub const NFD_MAX_BYTES: usize = 64 * 1024;

/// A feature file larger than NFD reads.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "the feature file would be {0} bytes, over the 64 KiB nfd-worker reads: label fewer kernels (--lock, --project)"
)]
pub struct TooLarge(pub usize);

/// Every `(name, value)` label of `labels` under `prefix`, each name once:
/// the machine class, then per kernel `KEY` = `true` or `false` and, for
/// a passing one, `KEY.variant` = the variant `select` chooses. A kernel
/// without a verdict has no label: absent means "not known to work".
pub fn pairs(labels: &NodeLabels, prefix: &str) -> Vec<(String, String)> {
    let mut out = Vec::new();
    if let Some(class) = &labels.machine_class {
        out.push((format!("{prefix}/{MACHINE_CLASS}"), class.clone()));
    }
    for k in decided(labels) {
        let key = format!("{prefix}/{}", k.key);
        match &k.verdict {
            Recalled::Pass { variant, .. } => {
                out.push((key.clone(), "true".into()));
                out.push((format!("{key}{VARIANT_SUFFIX}"), name::label_value(variant)));
            }
            Recalled::Fail { .. } => out.push((key, "false".into())),
            Recalled::Unknown { .. } => {}
        }
    }
    out
}

/// The kernels with a verdict, each key once (the first).
fn decided(labels: &NodeLabels) -> impl Iterator<Item = &KernelLabel> {
    let mut seen = HashSet::new();
    labels
        .kernels
        .iter()
        .filter(|k| !matches!(k.verdict, Recalled::Unknown { .. }))
        .filter(move |k| seen.insert(k.key.as_str()))
}

/// `t` in RFC 3339, UTC, to the second (`2026-01-02T03:04:05Z`).
pub fn rfc3339(t: SystemTime) -> String {
    let seconds = t
        .duration_since(SystemTime::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs());
    time::OffsetDateTime::from_unix_timestamp(seconds as i64)
        .ok()
        .and_then(|t| {
            t.format(&time::format_description::well_known::Rfc3339)
                .ok()
        })
        .unwrap_or_else(|| "1970-01-01T00:00:00Z".into())
}

/// The NFD feature file: a comment, the `# +expiry-time` directive, then
/// `name=value` lines; `Err` when it is larger than nfd-worker reads.
pub fn nfd(labels: &NodeLabels, prefix: &str, expiry: SystemTime) -> Result<String, TooLarge> {
    let mut text = String::from(
        "# kernel verdicts of this node, from preflight's outcome cache (preflight labels)\n",
    );
    text.push_str(&format!("# +expiry-time={}\n", rfc3339(expiry)));
    for (name, value) in pairs(labels, prefix) {
        text.push_str(&format!("{name}={value}\n"));
    }
    if text.len() > NFD_MAX_BYTES {
        return Err(TooLarge(text.len()));
    }
    Ok(text)
}

/// The Ray labels file (`ray start --labels-file`): a JSON object (which
/// is YAML) of string labels.
pub fn ray(labels: &NodeLabels, prefix: &str) -> String {
    let map: serde_json::Map<String, serde_json::Value> = pairs(labels, prefix)
        .into_iter()
        .map(|(k, v)| (k, serde_json::Value::String(v)))
        .collect();
    serde_json::to_string_pretty(&map).unwrap_or_default() + "\n"
}

/// The node's Slurm features, one per line, as the helpers plugin reads
/// them: one per kernel that passes, and the machine class. A feature is
/// a boolean, so a kernel that fails has none.
pub fn slurm_features(labels: &NodeLabels) -> Vec<String> {
    let class = labels
        .machine_class
        .as_deref()
        .map(name::machine_class_feature);
    class
        .into_iter()
        .chain(
            decided(labels)
                .filter(|k| matches!(k.verdict, Recalled::Pass { .. }))
                .map(|k| name::slurm_feature(&k.key)),
        )
        .collect()
}

/// [`slurm_features`] as the helper prints them.
pub fn slurm(labels: &NodeLabels) -> String {
    slurm_features(labels)
        .iter()
        .map(|f| format!("{f}\n"))
        .collect()
}

/// The node's `helpers.conf` lines: one `Feature=… Helper=…` per feature
/// (Slurm 22.05 takes one feature per line, and reports only features
/// declared there).
pub fn slurm_helpers(labels: &NodeLabels, helper: &Path) -> String {
    slurm_features(labels)
        .iter()
        .map(|f| format!("Feature={f} Helper={}\n", helper.display()))
        .collect()
}

/// What `labels` tells people on stderr: the kernels with no verdict yet.
pub fn unknown_lines(labels: &NodeLabels) -> Vec<String> {
    labels
        .kernels
        .iter()
        .filter_map(|k| match &k.verdict {
            Recalled::Unknown { why } => Some(format!(
                "{}@{}: no verdict yet ({why})",
                k.kernel, k.version
            )),
            _ => None,
        })
        .collect()
}
