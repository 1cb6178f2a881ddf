//! The remote tier of the outcome cache: a Redis store that nodes of one
//! machine class share, so that each class probes a variant once.
//!
//! It holds sealed entries (`entry.rs`) under
//! `preflight:outcomes-v2:<key>`, with a TTL, and leases under
//! `preflight:lease-v2:<key>` (taken only when free or already this
//! node's, renewed while the probe runs, removed only by their holder).
//! Every operation is bounded: connecting and each command time out after
//! [`RemoteSettings::timeout`]; a failure that may pass by itself (no answer
//! in time, a restart, a failover) is tried again on a new connection with
//! growing, jittered pauses (`retry.rs`) for at most
//! [`RemoteSettings::retry`]; past that, or at once for a failure that
//! cannot pass (a password, an ACL, a Redis Cluster), the store is down for
//! the rest of the process, with one warning, and every later call answers
//! at once as if there were no remote. Nothing connects before the first
//! call: a run answered from the local tier never reaches Redis.

pub(crate) mod entry;
pub(crate) mod retry;
pub(crate) mod settings;

pub use entry::Refusal;
pub use settings::{Mode, RemoteSettings, SettingError};

use super::key::Key;
use entry::SharedEntry;
use retry::{Backoff, Jitter, Trouble};
use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

/// Where the remote store keeps outcome entries, by key.
const OUTCOMES: &str = "preflight:outcomes-v2:";
/// Where the remote store keeps leases, by key.
const LEASES: &str = "preflight:lease-v2:";

/// Takes a lease that is free, or renews it when this node holds it
/// already: a try repeated after a lost answer finds its own lease.
const TAKE: &str = "local v = redis.call('get', KEYS[1]) \
     if not v then return redis.call('set', KEYS[1], ARGV[1], 'px', ARGV[2]) and 1 end \
     if v == ARGV[1] then return redis.call('pexpire', KEYS[1], ARGV[2]) end \
     return 0";
/// Renews a lease when its holder still holds it.
const RENEW: &str = "if redis.call('get', KEYS[1]) == ARGV[1] then \
     return redis.call('pexpire', KEYS[1], ARGV[2]) else return 0 end";
/// Removes a lease when its holder still holds it.
const RELEASE: &str = "if redis.call('get', KEYS[1]) == ARGV[1] then \
     return redis.call('del', KEYS[1]) else return 0 end";

/// The connection, made at the first call.
enum State {
    Idle,
    Up(Box<redis::Connection>),
    Down,
}

/// The connection and the outage it is in, if any.
struct Link {
    state: State,
    /// When the store stopped answering, and the pauses since.
    outage: Option<(Instant, Backoff)>,
}

/// What the remote store answered for a key.
#[derive(Debug)]
pub(crate) enum Fetch {
    /// A believed entry.
    Hit(Box<SharedEntry>),
    /// Nothing under the key.
    Miss,
    /// An entry that was not believed, and why.
    Refused(Refusal),
    /// The store cannot be used (down, no secret); the warning, the first
    /// time.
    Unavailable(Option<String>),
}

/// One entry of a listing: its key as stored, and the entry or why it is
/// refused.
pub(crate) type Listed = (String, Result<SharedEntry, Refusal>);

/// A remote failure: the warning to give, the first time only.
pub(crate) type Unavailable = Option<String>;

/// One node's handle on the remote store.
pub struct Remote {
    settings: RemoteSettings,
    link: Mutex<Link>,
    /// Whether the one warning was given.
    warned: AtomicBool,
    /// The keys whose entries were refused so far.
    refused: Mutex<std::collections::BTreeSet<Key>>,
    /// This process's lease token.
    token: String,
    /// Spreads this node's pauses from other nodes'.
    jitter: Jitter,
}

impl std::fmt::Debug for Remote {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Remote")
            .field("url", &self.settings.display())
            .field("mode", &self.settings.mode)
            .finish_non_exhaustive()
    }
}

impl Remote {
    /// A handle on the store `settings` name; nothing connects yet.
    pub fn new(settings: RemoteSettings) -> Remote {
        let host = std::fs::read_to_string("/proc/sys/kernel/hostname").unwrap_or_default();
        let nanos = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos());
        let token = format!("{}:{}:{nanos}", host.trim(), std::process::id());
        Remote {
            jitter: Jitter::new(&token),
            token,
            settings,
            link: Mutex::new(Link {
                state: State::Idle,
                outage: None,
            }),
            warned: AtomicBool::new(false),
            refused: Mutex::default(),
        }
    }

    /// The settings.
    pub(crate) fn settings(&self) -> &RemoteSettings {
        &self.settings
    }

    /// Whether this node may publish and take leases.
    pub(crate) fn publishes(&self) -> bool {
        self.settings.mode == Mode::ReadWrite
    }

    /// How many keys' entries were refused so far.
    pub(crate) fn refused(&self) -> usize {
        self.refused.lock().map_or(0, |r| r.len())
    }

    /// The one warning, the first time the store cannot be used.
    fn warn_once(&self, why: String) -> Unavailable {
        (!self.warned.swap(true, Ordering::Relaxed)).then(|| {
            format!(
                "remote store {}: {why}; answering from this node alone",
                self.settings.display()
            )
        })
    }

    /// This node's jitter, for pauses of its own.
    pub(crate) fn jitter_source(&self) -> &Jitter {
        &self.jitter
    }

    /// Run `command` on the connection (made now if need be). A failure
    /// that may pass is tried again, on a new connection, after a pause,
    /// until the store has failed for the retry time; then, or at once for
    /// one that cannot pass, the store is down.
    fn with<T>(
        &self,
        mut command: impl FnMut(&mut redis::Connection) -> redis::RedisResult<T>,
    ) -> Result<T, Unavailable> {
        // What the store says is no file this process can vouch for.
        crate::seen::taint("the fleet's remote store was asked");
        if self.settings.secret.is_none() {
            return Err(self.warn_once(format!(
                "{} is not set, and an unauthenticated entry is never trusted: nothing is read \
                 or published",
                settings::SECRET_ENV
            )));
        }
        loop {
            let mut link = self.link.lock().map_err(|_| None)?;
            let trouble = match &mut link.state {
                State::Down => return Err(None),
                State::Idle => match self.connect() {
                    Ok(con) => {
                        link.state = State::Up(Box::new(con));
                        continue;
                    }
                    Err(trouble) => trouble,
                },
                State::Up(con) => match command(con) {
                    Ok(value) => {
                        link.outage = None;
                        return Ok(value);
                    }
                    Err(e) => {
                        // A timed-out reply may still arrive: the
                        // connection is done with.
                        link.state = State::Idle;
                        Trouble::of(&e)
                    }
                },
            };
            let pause = self.troubled(&mut link, trouble)?;
            // Other threads of this node may try meanwhile.
            drop(link);
            std::thread::sleep(pause);
        }
    }

    /// The pause before trying again after `trouble`, or the store down
    /// (and the one warning) when trying again cannot help or has been
    /// tried for the retry time.
    fn troubled(&self, link: &mut Link, trouble: Trouble) -> Result<Duration, Unavailable> {
        let retry = self.settings.retry;
        let why = match trouble {
            Trouble::Transient(why) => {
                let (since, backoff) = link.outage.get_or_insert_with(|| {
                    (
                        Instant::now(),
                        Backoff::new(Duration::from_millis(50), Duration::from_secs(1)),
                    )
                });
                let left = retry.saturating_sub(since.elapsed());
                if !left.is_zero() {
                    return Ok(backoff.pause(&self.jitter).min(left));
                }
                format!(
                    "{why} (tried again for {})",
                    humantime::format_duration(retry)
                )
            }
            Trouble::Cluster(why) => format!(
                "a Redis Cluster ({why}), which is not supported: point {} at one \
                 Redis (a primary, or a managed Redis's primary endpoint)",
                settings::REMOTE_ENV
            ),
            Trouble::Fatal(why) => why,
        };
        link.state = State::Down;
        Err(self.warn_once(why))
    }

    /// A new connection, refused when the server is a node of a Redis
    /// Cluster.
    fn connect(&self) -> Result<redis::Connection, Trouble> {
        let mut con = self.open().map_err(|e| Trouble::of(&e))?;
        // A server that does not let this user read INFO is taken for a
        // single Redis; a cluster's redirections would say otherwise.
        match redis::cmd("INFO").arg("cluster").query::<String>(&mut con) {
            Ok(info) if info.lines().any(|l| l.trim() == "cluster_enabled:1") => {
                Err(Trouble::Cluster("it says cluster_enabled:1".into()))
            }
            Ok(_) => Ok(con),
            Err(e) => match Trouble::of(&e) {
                Trouble::Fatal(_)
                    if e.kind() == redis::ErrorKind::Server(redis::ServerErrorKind::NoPerm) =>
                {
                    Ok(con)
                }
                trouble => Err(trouble),
            },
        }
    }

    fn open(&self) -> redis::RedisResult<redis::Connection> {
        let timeout = self.settings.timeout;
        let client = if self.settings.url.starts_with("rediss://") {
            // rustls checks the server's certificate with ring's
            // algorithms (the first call in the process sets them).
            let _ = rustls::crypto::ring::default_provider().install_default();
            match &self.settings.ca {
                Some(ca) => redis::Client::build_with_tls(
                    self.settings.url.as_str(),
                    redis::TlsCertificates {
                        client_tls: None,
                        root_cert: Some(ca.clone()),
                    },
                )?,
                None => redis::Client::open(self.settings.url.as_str())?,
            }
        } else {
            redis::Client::open(self.settings.url.as_str())?
        };
        let con = client.get_connection_with_timeout(timeout)?;
        con.set_read_timeout(Some(timeout))?;
        con.set_write_timeout(Some(timeout))?;
        Ok(con)
    }

    /// The entry under `key` for the machine `fingerprint`, checked (see
    /// [`entry::open`]) against `expected` when given.
    pub(crate) fn get(
        &self,
        key: &Key,
        fingerprint: &str,
        expected: Option<&super::OutcomeKey>,
    ) -> Fetch {
        let bytes: Option<Vec<u8>> =
            match self.with(|con| redis::cmd("GET").arg(format!("{OUTCOMES}{key}")).query(con)) {
                Ok(bytes) => bytes,
                Err(warning) => return Fetch::Unavailable(warning),
            };
        let Some(bytes) = bytes else {
            return Fetch::Miss;
        };
        let Some(secret) = &self.settings.secret else {
            return Fetch::Unavailable(None);
        };
        match entry::open(secret, &bytes, key, Some(fingerprint), expected) {
            Ok(entry) => Fetch::Hit(Box::new(entry)),
            Err(refusal) => {
                if let Ok(mut refused) = self.refused.lock() {
                    refused.insert(key.clone());
                }
                Fetch::Refused(refusal)
            }
        }
    }

    /// Publish `entry` with the store's TTL (a read-only node publishes
    /// nothing).
    pub(crate) fn publish(&self, entry: &SharedEntry) -> Result<(), Unavailable> {
        let Some(secret) = self.settings.secret.as_ref().filter(|_| self.publishes()) else {
            return Ok(());
        };
        let bytes = entry::seal(secret, entry).map_err(|e| self.warn_once(e.to_string()))?;
        let ttl = millis(self.settings.ttl);
        self.with(|con| {
            redis::cmd("SET")
                .arg(format!("{OUTCOMES}{}", entry.key))
                .arg(&bytes)
                .arg("PX")
                .arg(ttl)
                .exec(con)
        })
    }

    /// Take the lease of `key`: `Ok(true)` when this node now holds it
    /// (taken now, or by an earlier try whose answer was lost).
    pub(crate) fn lease(&self, key: &Key) -> Result<bool, Unavailable> {
        let lease = millis(self.settings.lease);
        self.with(|con| {
            redis::cmd("EVAL")
                .arg(TAKE)
                .arg(1)
                .arg(format!("{LEASES}{key}"))
                .arg(&self.token)
                .arg(lease)
                .query::<u32>(con)
        })
        .map(|n| n > 0)
    }

    /// Whether another node holds the lease of `key`.
    pub(crate) fn leased(&self, key: &Key) -> Result<bool, Unavailable> {
        self.with(|con| {
            redis::cmd("EXISTS")
                .arg(format!("{LEASES}{key}"))
                .query::<u32>(con)
        })
        .map(|n| n > 0)
    }

    /// Whether another node holds the lease of any of `keys` (one round
    /// trip).
    pub(crate) fn any_leased<'k>(
        &self,
        keys: impl IntoIterator<Item = &'k Key>,
    ) -> Result<bool, Unavailable> {
        let names: Vec<String> = keys.into_iter().map(|k| format!("{LEASES}{k}")).collect();
        if names.is_empty() {
            return Ok(false);
        }
        self.with(|con| redis::cmd("EXISTS").arg(&names).query::<u32>(con))
            .map(|n| n > 0)
    }

    /// Extend the lease of `key` while this node holds it: `Ok(false)`
    /// when it does not any more.
    pub(crate) fn renew(&self, key: &Key) -> Result<bool, Unavailable> {
        let lease = millis(self.settings.lease);
        self.with(|con| {
            redis::cmd("EVAL")
                .arg(RENEW)
                .arg(1)
                .arg(format!("{LEASES}{key}"))
                .arg(&self.token)
                .arg(lease)
                .query::<u32>(con)
        })
        .map(|n| n > 0)
    }

    /// Give up the lease of `key`, if this node holds it.
    pub(crate) fn release(&self, key: &Key) -> Result<(), Unavailable> {
        self.with(|con| {
            redis::cmd("EVAL")
                .arg(RELEASE)
                .arg(1)
                .arg(format!("{LEASES}{key}"))
                .arg(&self.token)
                .exec(con)
        })
    }

    /// Every entry in the store, each believed or refused (with a
    /// `fingerprint`, an entry of another machine class is
    /// [`Refusal::AnotherMachine`]; without, entries of every class are
    /// believed); `Err`: the store cannot be listed, and why.
    pub(crate) fn entries(&self, fingerprint: Option<&str>) -> Result<Vec<Listed>, String> {
        let fail = |w: Unavailable| {
            w.unwrap_or_else(|| format!("remote store {}: unavailable", self.settings.display()))
        };
        let names: Vec<String> = self
            .with(|con| {
                let mut names = Vec::new();
                let mut cursor = 0u64;
                loop {
                    let (next, batch): (u64, Vec<String>) = redis::cmd("SCAN")
                        .arg(cursor)
                        .arg("MATCH")
                        .arg(format!("{OUTCOMES}*"))
                        .arg("COUNT")
                        .arg(500)
                        .query(con)?;
                    names.extend(batch);
                    if next == 0 {
                        return Ok(names);
                    }
                    cursor = next;
                }
            })
            .map_err(fail)?;
        let Some(secret) = &self.settings.secret else {
            return Err(fail(None));
        };
        let mut out = Vec::with_capacity(names.len());
        for name in names {
            let bytes: Option<Vec<u8>> = self
                .with(|con| redis::cmd("GET").arg(&name).query(con))
                .map_err(fail)?;
            let Some(bytes) = bytes else { continue };
            let raw = name.trim_start_matches(OUTCOMES).to_string();
            let opened = match Key::parse(&raw) {
                Ok(key) => entry::open(secret, &bytes, &key, fingerprint, None),
                Err(_) => Err(Refusal::WrongKey),
            };
            out.push((raw, opened));
        }
        out.sort_by(|a, b| a.0.cmp(&b.0));
        Ok(out)
    }
}

fn millis(d: Duration) -> u64 {
    u64::try_from(d.as_millis()).unwrap_or(u64::MAX)
}
