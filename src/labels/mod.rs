//! Scheduler labels: this node's verdicts, from the outcome cache alone,
//! as the per-node facts clusters place work by — Node Feature Discovery
//! feature files for Kubernetes, Slurm node features, Ray node labels.
//! One label per kernel and version says whether a variant of it works
//! here (and which: the one `select` would choose), and one names the
//! node's machine class (the full fingerprint's short hash). Nothing is
//! probed, so an answer takes well under a helper's seconds; a kernel
//! the cache cannot answer for is listed as having no verdict yet.
//!
//! Names are made by [`name`]; `report::labels` renders each format.

pub mod name;

use crate::discover::hub_cache::{self, RevisionSpec};
use crate::discover::project::Pinned;
use crate::discover::{self, Named};
use crate::run::{Recalled, Session, SessionError};
use serde::Serialize;
use std::time::{Duration, SystemTime};

/// Hex digits of the fingerprint's hash in a machine class.
const CLASS_HEX: usize = 12;

/// Which kernels to label.
#[derive(Debug, Clone)]
pub enum Selection {
    /// The kernels a lock file or project pins, each at its pin.
    Pinned(Vec<Pinned>),
    /// Every ref of every kernel in the hub cache.
    EveryCached,
}

/// The node's verdicts, ready to be rendered.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct NodeLabels {
    /// The full fingerprint's first 12 hex digits; `None` when this
    /// machine was never measured (no `warmup` yet).
    pub machine_class: Option<String>,
    /// One entry per kernel and version, in the order selected.
    pub kernels: Vec<KernelLabel>,
    /// When this environment was never measured: the interpreters of
    /// this machine's other environments that have verdicts for these
    /// kernels (`--python` reaches them).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub measured_elsewhere: Vec<std::path::PathBuf>,
}

/// One kernel at one version and what the cache says of it here.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct KernelLabel {
    /// `ORG/NAME`.
    pub kernel: String,
    /// `vN` (a project's version), the first 12 hex digits of a locked
    /// commit, or the ref (`main`).
    pub version: String,
    /// Its key in every format ([`name::kernel_key`]).
    pub key: String,
    /// The cache's answer.
    #[serde(flatten)]
    pub verdict: Recalled,
}

impl NodeLabels {
    /// The kernels the cache has no verdict for yet.
    pub fn unknown(&self) -> impl Iterator<Item = &KernelLabel> {
        self.kernels
            .iter()
            .filter(|k| matches!(k.verdict, Recalled::Unknown { .. }))
    }

    /// When the labels stop holding: `ttl` after `now` (the refresh that
    /// must come before), and no later than `max_age` after the oldest
    /// evidence they rest on, when given.
    pub fn expiry(&self, now: SystemTime, ttl: Duration, max_age: Option<Duration>) -> SystemTime {
        let refresh = now + ttl;
        let oldest = self.kernels.iter().filter_map(|k| k.verdict.since()).min();
        match (max_age, oldest) {
            (Some(age), Some(oldest)) => refresh.min(oldest + age),
            _ => refresh,
        }
    }
}

/// How a pin names its version in a label: `vN`, a commit's first 12 hex
/// digits (as `git` shortens them), or the ref itself.
pub fn version_of(spec: &RevisionSpec) -> String {
    match spec {
        RevisionSpec::Revision(r) if r.len() == 40 && r.bytes().all(|b| b.is_ascii_hexdigit()) => {
            r[..12].to_owned()
        }
        other => other.to_string(),
    }
}

/// One kernel at one version, and where its variants are (or why they
/// cannot be found).
struct Wanted {
    kernel: String,
    version: String,
    target: Result<std::path::PathBuf, String>,
}

/// The kernels `selection` names, each with its snapshot in the hub cache.
fn wanted(selection: &Selection) -> Vec<Wanted> {
    let root = hub_cache::cache_root();
    match selection {
        Selection::Pinned(pins) => pins
            .iter()
            .map(|pin| Wanted {
                kernel: pin.repo.clone(),
                version: version_of(&pin.spec),
                target: hub_cache::snapshot(&root, &pin.repo, &pin.spec).map_err(|e| match e {
                    hub_cache::SnapshotError::Discover(e) => e.to_string(),
                    hub_cache::SnapshotError::Revision(e) => e.to_string(),
                }),
            })
            .collect(),
        Selection::EveryCached => {
            let mut out = Vec::new();
            for folder in hub_cache::cached_kernels(&root) {
                let Some(repo) = folder
                    .file_name()
                    .and_then(|n| hub_cache::repo_id(&n.to_string_lossy()))
                else {
                    continue;
                };
                let Ok(snapshots) = hub_cache::ref_snapshots(&folder) else {
                    continue;
                };
                for (snapshot, refs) in snapshots {
                    let refs = if refs.is_empty() {
                        let commit = snapshot
                            .file_name()
                            .map(|n| n.to_string_lossy().into_owned())
                            .unwrap_or_default();
                        vec![version_of(&RevisionSpec::Revision(commit))]
                    } else {
                        refs
                    };
                    for version in refs {
                        out.push(Wanted {
                            kernel: repo.to_string(),
                            version,
                            target: Ok(snapshot.clone()),
                        });
                    }
                }
            }
            out
        }
    }
}

impl Session {
    /// This node's labels for the kernels of `selection`, from the
    /// outcome cache alone ([`Session::recall`]): no child is started.
    pub fn labels(&self, selection: &Selection) -> Result<NodeLabels, SessionError> {
        let wanted = wanted(selection);
        let mut targets = Vec::new();
        let mut place = Vec::with_capacity(wanted.len());
        for w in &wanted {
            place.push(match &w.target {
                Ok(path) => match discover::discover(path) {
                    Ok(target) => {
                        targets.push(Named {
                            given: format!("{}@{}", w.kernel, w.version),
                            target,
                        });
                        Ok(targets.len() - 1)
                    }
                    Err(e) => Err(e.to_string()),
                },
                Err(why) => Err(why.clone()),
            });
        }
        let recalled = self.recall(targets.clone())?;
        let machine_class = recalled
            .as_ref()
            .map(|(plan, _)| plan.fingerprint.hash()[..CLASS_HEX].to_owned());
        let measured_elsewhere = match recalled {
            Some(_) => Vec::new(),
            None => self.verdicts_elsewhere(&targets)?,
        };
        let never = never_measured(self.interpreter()?, &measured_elsewhere);
        let kernels = wanted
            .into_iter()
            .zip(place)
            .map(|(w, place)| {
                let verdict = match (place, &recalled) {
                    (Err(why), _) => Recalled::Unknown { why },
                    (Ok(i), Some((_, verdicts))) => verdicts[i].clone(),
                    (Ok(_), None) => Recalled::Unknown { why: never.clone() },
                };
                KernelLabel {
                    key: name::kernel_key(&w.kernel, &w.version),
                    kernel: w.kernel,
                    version: w.version,
                    verdict,
                }
            })
            .collect();
        Ok(NodeLabels {
            machine_class,
            kernels,
            measured_elsewhere,
        })
    }

    /// The other environments of this machine whose kept verdicts answer
    /// for at least one of `targets`.
    fn verdicts_elsewhere(
        &self,
        targets: &[Named],
    ) -> Result<Vec<std::path::PathBuf>, SessionError> {
        let mut found = Vec::new();
        for python in self.measured_elsewhere()? {
            let answers = self.with_python(python.clone()).recall(targets.to_vec())?;
            let known = answers.is_some_and(|(_, verdicts)| {
                verdicts
                    .iter()
                    .any(|v| !matches!(v, Recalled::Unknown { .. }))
            });
            if known {
                found.push(python);
            }
        }
        Ok(found)
    }
}

/// When `session`'s environment was never measured here and others of
/// this machine were: a note naming them and the `--python` that reaches
/// them (what `select` says before it measures this one).
pub fn unmeasured_here(session: &Session) -> Result<Option<String>, SessionError> {
    if session.kept_fingerprint()?.is_some() {
        return Ok(None);
    }
    let elsewhere = session.measured_elsewhere()?;
    if elsewhere.is_empty() {
        return Ok(None);
    }
    Ok(Some(never_measured(session.interpreter()?, &elsewhere)))
}

/// Why a kernel has no verdict when this environment was never measured:
/// the environments of this machine that have verdicts, and how to reach
/// them, or that the machine needs a warmup.
fn never_measured(own: Option<std::path::PathBuf>, elsewhere: &[std::path::PathBuf]) -> String {
    let own = own.map_or_else(|| "no Python".to_owned(), |p| p.display().to_string());
    match elsewhere {
        [] => "this machine was never measured: run preflight warmup first".into(),
        [one] => format!(
            "this environment ({own}) was never measured; this machine's verdicts are for --python {}",
            one.display()
        ),
        many => format!(
            "this environment ({own}) was never measured; this machine's verdicts are for --python {}",
            many.iter()
                .map(|p| p.display().to_string())
                .collect::<Vec<_>>()
                .join(" or --python ")
        ),
    }
}
