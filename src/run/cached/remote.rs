//! The run's use of the cache's remote tier: read-through after a local
//! miss, write-through of every outcome that lasts, and the lease that lets
//! one node of a machine class probe a job while the others wait for its
//! verdict.

use super::{Hit, JobKey, RunCache, record_holds};
use crate::cache::remote::entry::{Placement, SharedEntry, SharedRecord, short};
use crate::cache::remote::retry::Backoff;
use crate::cache::remote::{Fetch, Refusal, Remote};
use crate::cache::{Cache, Key, OutcomeRecord};
use crate::classify::{Outcome, OutcomeKind};
use crate::fingerprint::ClassFacts;
use crate::sandbox::Cancel;
use serde::Serialize;
use std::path::Path;
use std::sync::mpsc;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// The cache `cache` with the remote tier `settings` name behind it.
pub(in crate::run) fn attach(cache: Cache, settings: Option<&super::RemoteSettings>) -> Cache {
    match settings {
        Some(settings) => cache.with_remote(Remote::new(settings.clone())),
        None => cache,
    }
}

/// Whether other nodes of this machine class are probing some of `keys`
/// now (they hold its lease): a fleet warming up together, where most of
/// the jobs this node misses will be answered by another node. `warn`
/// hears the remote tier's one warning.
pub(in crate::run) fn others_probing<'k>(
    cache: &RunCache,
    keys: impl IntoIterator<Item = &'k JobKey>,
    warn: &dyn Fn(String),
) -> bool {
    let Some(remote) = cache.cache.remote() else {
        return false;
    };
    match remote.any_leased(keys.into_iter().map(|k| &k.key.key)) {
        Ok(held) => held,
        Err(warning) => {
            warning.into_iter().for_each(warn);
            false
        }
    }
}

/// What the remote tier says of a job now.
enum Asked {
    Hit(Box<Hit>),
    /// No entry (or none believed, or one kept under other packages).
    Miss,
    /// The remote cannot be used.
    Down,
}

/// Ask the remote tier for `key`'s outcome after a local miss; a believed
/// entry is kept locally (under `path`, the job's variant here) so that the
/// next load is local. A refused entry is warned about, once per job.
fn ask(
    cache: &RunCache,
    key: &JobKey,
    path: &Path,
    warned: &mut bool,
    warn: &dyn Fn(String),
) -> Asked {
    let Some(remote) = cache.cache.remote() else {
        return Asked::Down;
    };
    match remote.get(&key.key.key, &cache.fingerprint, Some(&key.key)) {
        Fetch::Hit(entry) if record_holds(cache, entry.record.packages.as_deref()) => {
            let SharedRecord {
                smoke,
                outcome,
                timings,
                machine,
                packages,
                ..
            } = entry.record;
            let record = OutcomeRecord {
                path: std::path::absolute(path).unwrap_or_else(|_| path.to_path_buf()),
                smoke,
                outcome: outcome.clone(),
                timings,
                machine,
                packages,
            };
            // Not kept here: asked again next time, which is all it costs.
            let _ = cache.cache.outcomes().put(&key.key, record);
            Asked::Hit(Box::new(Hit {
                outcome,
                timings,
                remote: true,
            }))
        }
        Fetch::Hit(_) | Fetch::Miss => Asked::Miss,
        Fetch::Refused(why) => {
            if !std::mem::replace(warned, true) {
                warn(refusal(path, &key.key.key, &why));
            }
            Asked::Miss
        }
        Fetch::Unavailable(warning) => {
            warning.into_iter().for_each(warn);
            Asked::Down
        }
    }
}

fn refusal(path: &Path, key: &Key, why: &Refusal) -> String {
    format!(
        "{}: refused the remote entry {}: {why}",
        path.display(),
        short(key.as_str())
    )
}

/// The remote tier's answer for `key` after a local miss, if it has one.
pub(super) fn fetch(
    cache: &RunCache,
    key: &JobKey,
    path: &Path,
    warn: &dyn Fn(String),
) -> Option<Hit> {
    match ask(cache, key, path, &mut false, warn) {
        Asked::Hit(hit) => Some(*hit),
        Asked::Miss | Asked::Down => None,
    }
}

/// Publish `record`, just kept locally under `key`, to the remote tier,
/// with the machine's class and where the variant stands among its
/// kernel's (a read-only node publishes nothing).
pub(super) fn publish(
    cache: &RunCache,
    key: &JobKey,
    record: &OutcomeRecord,
    placement: Option<Placement>,
) -> Option<String> {
    let remote = cache.cache.remote()?;
    let entry = SharedEntry::new(
        key.key.parts.clone(),
        SharedRecord {
            smoke: record.smoke.clone(),
            outcome: record.outcome.clone(),
            timings: record.timings,
            machine: record.machine.clone(),
            packages: record.packages.clone(),
            class: Some(cache.class.clone()),
            placement,
        },
    );
    remote.publish(&entry).err().flatten()
}

/// What a node does about a job the caches do not answer.
pub(in crate::run) enum Claim {
    /// Probe it here; with the lease when this node holds one (kept until
    /// the outcome is published).
    Probe(Option<Lease>),
    /// Another node of this machine class probed it meanwhile.
    Answered(Hit),
    /// Another node is probing it: ask again later (only when not told to
    /// wait).
    Busy,
}

/// Decide who probes `key`'s job: this node when it takes the lease (or
/// when there is no remote tier, or it is down), else another node, whose
/// verdict this one waits for — at most the configured wait, then it
/// probes itself. With `wait` false, a job another node holds is
/// [`Claim::Busy`] at once. A lease whose holder died expires after the
/// lease time, and this node takes it then.
pub(in crate::run) fn claim(
    cache: &RunCache,
    key: &JobKey,
    path: &Path,
    wait: bool,
    cancel: &Cancel,
    warn: &dyn Fn(String),
) -> Claim {
    let Some(remote) = cache.cache.remote() else {
        return Claim::Probe(None);
    };
    let settings = remote.settings();
    let deadline = Instant::now() + settings.wait;
    // Pauses that grow, each drawn at random, so that a thousand nodes
    // waiting for one verdict ask for it a few times each, at different
    // moments: at most an eighth of the lease apart (2 s by default), so
    // that a dead holder costs little more than its lease.
    let mut poll = Backoff::new(
        Duration::from_millis(100),
        (settings.lease / 8).clamp(Duration::from_millis(20), Duration::from_secs(2)),
    );
    // The lookup before warned about what it refused; one refused while
    // waiting is in the run's count.
    let mut warned = true;
    // Put off while another node held it: most likely published since,
    // which one read finds.
    if wait {
        match ask(cache, key, path, &mut warned, warn) {
            Asked::Hit(hit) => return Claim::Answered(*hit),
            Asked::Down => return Claim::Probe(None),
            Asked::Miss => {}
        }
    }
    loop {
        let taken = if remote.publishes() {
            remote.lease(&key.key.key)
        } else {
            // A read-only node takes no lease: it waits while another
            // node holds one, and otherwise probes for itself.
            remote.leased(&key.key.key).map(|held| !held)
        };
        match taken {
            Ok(true) => {
                // The holder may have published between the lookup and now.
                return match ask(cache, key, path, &mut warned, warn) {
                    Asked::Hit(hit) => {
                        if remote.publishes() {
                            let _ = remote.release(&key.key.key);
                        }
                        Claim::Answered(*hit)
                    }
                    Asked::Miss | Asked::Down => Claim::Probe(
                        remote
                            .publishes()
                            .then(|| Lease::hold(Arc::clone(remote), key.key.key.clone())),
                    ),
                };
            }
            Ok(false) if !wait => return Claim::Busy,
            Ok(false) => {}
            Err(warning) => {
                warning.into_iter().for_each(warn);
                return Claim::Probe(None);
            }
        }
        if cancel.is_cancelled() {
            return Claim::Probe(None);
        }
        if Instant::now() >= deadline {
            warn(format!(
                "{}: no verdict from the node probing it after {}; probing here",
                path.display(),
                humantime::format_duration(settings.wait)
            ));
            return Claim::Probe(None);
        }
        std::thread::sleep(poll.pause(remote.jitter_source()));
        match ask(cache, key, path, &mut warned, warn) {
            Asked::Hit(hit) => return Claim::Answered(*hit),
            Asked::Down => return Claim::Probe(None),
            Asked::Miss => {}
        }
    }
}

/// A lease this node holds on one job, renewed every third of the lease
/// time until [`Lease::finish`] (or drop) gives it up.
pub(in crate::run) struct Lease {
    remote: Arc<Remote>,
    key: Key,
    stop: Option<mpsc::Sender<()>>,
    renewer: Option<std::thread::JoinHandle<()>>,
    /// The remote's warning, when a renewal found it down.
    warning: Arc<Mutex<Option<String>>>,
}

impl Lease {
    fn hold(remote: Arc<Remote>, key: Key) -> Lease {
        let (stop, stopped) = mpsc::channel::<()>();
        let warning = Arc::new(Mutex::new(None));
        let every = remote.settings().lease / 3;
        let renewer = {
            let (remote, key, warning) = (Arc::clone(&remote), key.clone(), Arc::clone(&warning));
            std::thread::Builder::new()
                .name("lease".into())
                .spawn(move || {
                    while let Err(mpsc::RecvTimeoutError::Timeout) = stopped.recv_timeout(every) {
                        match remote.renew(&key) {
                            Ok(true) => {}
                            Ok(false) => return,
                            Err(w) => {
                                if let Ok(mut slot) = warning.lock() {
                                    *slot = w;
                                }
                                return;
                            }
                        }
                    }
                })
                .ok()
        };
        Lease {
            remote,
            key,
            stop: Some(stop),
            renewer,
            warning,
        }
    }

    /// Stop renewing and give the lease up (after the outcome is
    /// published, so that the nodes waiting find it); the remote's
    /// warning, if renewing or giving up found it down.
    pub(in crate::run) fn finish(mut self) -> Option<String> {
        self.end()
    }

    fn end(&mut self) -> Option<String> {
        drop(self.stop.take());
        if let Some(renewer) = self.renewer.take() {
            let _ = renewer.join();
        }
        let renewal = self.warning.lock().ok().and_then(|mut w| w.take());
        let release = self.remote.release(&self.key).err().flatten();
        renewal.or(release)
    }
}

impl Drop for Lease {
    fn drop(&mut self) {
        if self.stop.is_some() {
            let _ = self.end();
        }
    }
}

/// `cache`'s remote tier, for a listing; `Err` when it has none.
fn remote_of(cache: &Cache) -> Result<&Arc<Remote>, String> {
    cache.remote().ok_or_else(|| {
        format!(
            "no remote store: set {} or give --remote URL",
            crate::cache::remote::settings::REMOTE_ENV
        )
    })
}

/// One entry of the remote store as `cache ls --remote` shows it.
#[derive(Debug, Clone, Serialize)]
pub struct RemoteRow {
    /// Its key.
    pub key: String,
    /// The variant (or module) it is about; `None` when refused before it
    /// could be read.
    pub variant: Option<String>,
    /// Its outcome.
    pub outcome: Option<OutcomeKind>,
    /// When it was made (Unix seconds).
    pub created: Option<u64>,
    /// The machine that published it, in one line.
    pub machine: Option<String>,
    /// Whether this node believes it.
    pub status: RemoteStatus,
}

/// Whether this node believes an entry of the remote store.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "snake_case", tag = "status", content = "why")]
pub enum RemoteStatus {
    /// Sealed by the fleet, of this machine class: it answers here.
    Trusted,
    /// Sealed by the fleet, of another machine class.
    OtherClass,
    /// Refused: never used (the reason).
    Refused(String),
}

/// Every entry of `cache`'s remote tier, as the machine `fingerprint`
/// (full hash) judges it; `Err` says why it cannot be listed.
pub(in crate::run) fn entries(cache: &Cache, fingerprint: &str) -> Result<Vec<RemoteRow>, String> {
    Ok(remote_of(cache)?
        .entries(Some(fingerprint))?
        .into_iter()
        .map(|(key, opened)| match opened {
            Ok(entry) => row(key, &entry, RemoteStatus::Trusted),
            Err(Refusal::AnotherMachine(_)) => RemoteRow {
                key,
                variant: None,
                outcome: None,
                created: None,
                machine: None,
                status: RemoteStatus::OtherClass,
            },
            Err(why) => RemoteRow {
                key,
                variant: None,
                outcome: None,
                created: None,
                machine: None,
                status: RemoteStatus::Refused(why.to_string()),
            },
        })
        .collect())
}

fn row(key: String, entry: &SharedEntry, status: RemoteStatus) -> RemoteRow {
    RemoteRow {
        key,
        variant: Some(entry.parts.job.name.clone()),
        outcome: Some(entry.record.outcome.kind),
        created: Some(entry.created),
        machine: Some(entry.record.machine.clone()),
        status,
    }
}

/// One verdict of the fleet's remote store, sealed by the fleet, of any
/// machine class: what `fleet ls` and `fleet diff` are made of.
#[derive(Debug, Clone)]
pub(in crate::run) struct Published {
    /// The publisher's full fingerprint hash: its machine class.
    pub fingerprint: String,
    /// Its class in readable facts, when the publisher sent them.
    pub class: Option<ClassFacts>,
    /// Its machine in one line.
    pub machine: String,
    /// The variant (or module).
    pub variant: String,
    /// Where the variant stands among its kernel's, on the publisher.
    pub placement: Option<Placement>,
    /// What probing showed there.
    pub outcome: Outcome,
    /// When (Unix seconds).
    pub created: u64,
}

/// Every verdict of `cache`'s remote tier that the fleet sealed, of every
/// machine class, and how many entries were refused; `Err` says why the
/// store cannot be listed.
pub(in crate::run) fn published(cache: &Cache) -> Result<(Vec<Published>, usize), String> {
    let mut refused = 0;
    let mut out = Vec::new();
    for (_, opened) in remote_of(cache)?.entries(None)? {
        let Ok(entry) = opened else {
            refused += 1;
            continue;
        };
        out.push(Published {
            fingerprint: entry.parts.fingerprint,
            variant: entry.parts.job.name,
            created: entry.created,
            class: entry.record.class,
            machine: entry.record.machine,
            placement: entry.record.placement,
            outcome: entry.record.outcome,
        });
    }
    Ok((out, refused))
}
