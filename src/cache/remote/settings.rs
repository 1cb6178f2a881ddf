//! How a node reaches the fleet's remote store: the address, the fleet
//! secret, the mode and the times, read from the environment (or
//! `--remote URL`) and checked before anything runs.

use std::fmt;
use std::path::PathBuf;
use std::time::Duration;

/// The remote store's address (`redis://[user:password@]host:port/db`).
pub const REMOTE_ENV: &str = "PREFLIGHT_REMOTE";
/// A file holding the fleet secret entries are authenticated with.
pub const SECRET_ENV: &str = "PREFLIGHT_REMOTE_SECRET_FILE";
/// `read-write` (the default) or `read-only`.
pub const MODE_ENV: &str = "PREFLIGHT_REMOTE_MODE";
/// How long a published entry lives in the store (default 30 days).
pub const TTL_ENV: &str = "PREFLIGHT_REMOTE_TTL";
/// How long a probe's lease holds without renewal (default 30 s): the most
/// a node that dies while probing delays the others.
pub const LEASE_ENV: &str = "PREFLIGHT_REMOTE_LEASE";
/// How long a node waits for another node's verdict before it probes
/// itself (default 10 minutes).
pub const WAIT_ENV: &str = "PREFLIGHT_REMOTE_WAIT";
/// The bound on connecting and on each command (default 250 ms).
pub const TIMEOUT_ENV: &str = "PREFLIGHT_REMOTE_TIMEOUT";
/// How long a run tries a store that fails (no answer in time, refused or
/// dropped connections) again before it answers alone (default 10 s): the
/// most a store that is really down costs a run that asks it.
pub const RETRY_ENV: &str = "PREFLIGHT_REMOTE_RETRY";
/// With `rediss://`: a PEM file of the certificate authority that signed
/// the Redis server's certificate (a cluster's own CA); default: the
/// system's trusted roots.
pub const CA_ENV: &str = "PREFLIGHT_REMOTE_CA_FILE";

/// Whether this node publishes what it probes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Mode {
    /// Reads, takes leases and publishes.
    #[default]
    ReadWrite,
    /// Reads only: publishes nothing and takes no lease (it still waits
    /// for a verdict another node is probing).
    ReadOnly,
}

/// A setting of the remote store that cannot be used: the user's to fix.
#[derive(Debug, thiserror::Error)]
#[error("{setting}: {why}")]
pub struct SettingError {
    /// The variable or flag at fault.
    pub setting: String,
    /// What was expected and found.
    pub why: String,
}

/// The fleet secret: never printed.
#[derive(Clone)]
pub(crate) struct Secret(pub(crate) Vec<u8>);

impl fmt::Debug for Secret {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("Secret(…)")
    }
}

/// The remote store as this node is configured to use it, validated.
#[derive(Debug, Clone)]
pub struct RemoteSettings {
    /// The address as given.
    pub(crate) url: String,
    /// The fleet secret; `None`: none is configured, so nothing is read or
    /// published (one warning).
    pub(crate) secret: Option<Secret>,
    /// Read-write or read-only.
    pub mode: Mode,
    /// The life of a published entry.
    pub ttl: Duration,
    /// The life of an unrenewed lease.
    pub lease: Duration,
    /// The longest wait for another node's verdict.
    pub wait: Duration,
    /// The bound on connecting and on each command.
    pub timeout: Duration,
    /// How long a failing store is tried again before the run answers
    /// alone.
    pub retry: Duration,
    /// With `rediss://`, the PEM roots the server's certificate is checked
    /// against instead of the system's.
    pub(crate) ca: Option<Vec<u8>>,
}

impl RemoteSettings {
    /// The settings `flag` (`--remote URL`) or `PREFLIGHT_REMOTE` name,
    /// with the other `PREFLIGHT_REMOTE_*` variables; `Ok(None)`: no remote
    /// store is configured.
    pub fn from_env(flag: Option<&str>) -> Result<Option<RemoteSettings>, SettingError> {
        let (setting, url) = match flag {
            Some(url) => ("--remote", url.to_string()),
            None => match var(REMOTE_ENV)? {
                Some(url) => (REMOTE_ENV, url),
                None => return Ok(None),
            },
        };
        check_url(&url).map_err(|why| SettingError {
            setting: format!("{setting} {}", redacted(&url)),
            why,
        })?;
        let secret = var(SECRET_ENV)?
            .map(|path| read_secret(&path))
            .transpose()?;
        let ca = var(CA_ENV)?.map(|path| read_ca(&path)).transpose()?;
        let mode = match var(MODE_ENV)?.as_deref() {
            None | Some("read-write") => Mode::ReadWrite,
            Some("read-only") => Mode::ReadOnly,
            Some(other) => {
                return Err(SettingError {
                    setting: format!("{MODE_ENV}={other}"),
                    why: "expected read-write or read-only".into(),
                });
            }
        };
        Ok(Some(RemoteSettings {
            url,
            secret,
            mode,
            ttl: duration(TTL_ENV, Duration::from_secs(30 * 24 * 3600))?,
            lease: duration(LEASE_ENV, Duration::from_secs(30))?,
            wait: duration(WAIT_ENV, Duration::from_secs(600))?,
            timeout: duration(TIMEOUT_ENV, Duration::from_millis(250))?,
            retry: duration(RETRY_ENV, Duration::from_secs(10))?,
            ca,
        }))
    }

    /// The address without its password, for messages.
    pub fn display(&self) -> String {
        redacted(&self.url)
    }
}

/// A variable's value, `None` when unset or empty.
fn var(name: &str) -> Result<Option<String>, SettingError> {
    match std::env::var(name) {
        Ok(v) if v.is_empty() => Ok(None),
        Ok(v) => Ok(Some(v)),
        Err(std::env::VarError::NotPresent) => Ok(None),
        Err(std::env::VarError::NotUnicode(_)) => Err(SettingError {
            setting: name.into(),
            why: "not valid UTF-8".into(),
        }),
    }
}

/// A duration variable (`30d`, `2s`, `250ms`, or plain seconds), or
/// `default` when unset; zero is refused.
fn duration(name: &str, default: Duration) -> Result<Duration, SettingError> {
    let Some(value) = var(name)? else {
        return Ok(default);
    };
    let parsed = match value.parse::<u64>() {
        Ok(secs) => Ok(Duration::from_secs(secs)),
        Err(_) => humantime::parse_duration(&value).map_err(|e| e.to_string()),
    };
    match parsed {
        Ok(d) if !d.is_zero() && d.as_millis() < u128::from(u32::MAX) * 1000 => Ok(d),
        Ok(_) => Err(SettingError {
            setting: format!("{name}={value}"),
            why: "expected a positive duration (30d, 2s, 250ms, or seconds)".into(),
        }),
        Err(e) => Err(SettingError {
            setting: format!("{name}={value}"),
            why: format!("expected a duration (30d, 2s, 250ms, or seconds): {e}"),
        }),
    }
}

/// The secret in `path`: its bytes, surrounding white space removed; an
/// unreadable or empty file is refused.
fn read_secret(path: &str) -> Result<Secret, SettingError> {
    let bad = |why: String| SettingError {
        setting: format!("{SECRET_ENV}={path}"),
        why,
    };
    let bytes = crate::fs::read_small(std::path::Path::new(path))
        .map_err(|e| bad(format!("cannot read the fleet secret: {e}")))?;
    let secret = bytes.trim_ascii();
    if secret.is_empty() {
        return Err(bad("the fleet secret file is empty".into()));
    }
    // A probe must not read it: it is the fleet's, not the kernel's.
    crate::sandbox::hide_by_default(
        std::path::absolute(path).unwrap_or_else(|_| PathBuf::from(path)),
    );
    Ok(Secret(secret.to_vec()))
}

/// The certificate authority in `path`, PEM: an unreadable file, or one
/// without a certificate, is refused.
fn read_ca(path: &str) -> Result<Vec<u8>, SettingError> {
    let bad = |why: String| SettingError {
        setting: format!("{CA_ENV}={path}"),
        why,
    };
    let bytes = crate::fs::read_small(std::path::Path::new(path))
        .map_err(|e| bad(format!("cannot read the certificate authority: {e}")))?;
    if !bytes
        .windows(b"-----BEGIN CERTIFICATE-----".len())
        .any(|w| w == b"-----BEGIN CERTIFICATE-----")
    {
        return Err(bad("no PEM certificate in it".into()));
    }
    Ok(bytes)
}

/// Why `url` is not a Redis address this build can use, if it is not.
fn check_url(url: &str) -> Result<(), String> {
    let expected = "expected redis://[user:password@]host:port/db or rediss://…";
    let (scheme, rest) = url
        .split_once("://")
        .ok_or_else(|| format!("not a URL ({expected})"))?;
    match scheme {
        "redis" | "rediss" => {}
        other => return Err(format!("unknown scheme {other}:// ({expected})")),
    }
    let host = rest.rsplit_once('@').map_or(rest, |(_, h)| h);
    let host = host.split(['/', '?', '#']).next().unwrap_or_default();
    if host.is_empty() {
        return Err(format!("no host ({expected})"));
    }
    let info = redis::IntoConnectionInfo::into_connection_info(url)
        .map_err(|e| format!("{e} ({expected})"))?;
    if let redis::ConnectionAddr::Tcp(_, port) = info.addr()
        && *port == 0
    {
        return Err(format!("port 0 ({expected})"));
    }
    Ok(())
}

/// `url` with its password replaced by `***`.
fn redacted(url: &str) -> String {
    match url.split_once("://") {
        Some((scheme, rest)) => match rest.rsplit_once('@') {
            Some((user, host)) => {
                let user = user.split_once(':').map_or(user, |(u, _)| u);
                format!("{scheme}://{user}:***@{host}")
            }
            None => url.to_string(),
        },
        None => url.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn urls() {
        assert!(check_url("redis://127.0.0.1:6379/0").is_ok());
        assert!(check_url("redis://u:p@host:1/2").is_ok());
        assert!(
            check_url("http://host:1")
                .unwrap_err()
                .contains("unknown scheme")
        );
        assert!(check_url("host:6379").unwrap_err().contains("not a URL"));
        assert!(check_url("redis://").unwrap_err().contains("no host"));
        assert!(check_url("redis://h:99999/0").is_err());
        assert!(check_url("redis://h:1/notadb").is_err());
        assert!(check_url("rediss://h:1/0").is_ok());
        assert!(check_url("rediss://").unwrap_err().contains("no host"));
    }

    #[test]
    fn passwords_never_shown() {
        assert_eq!(redacted("redis://u:pw@h:1/0"), "redis://u:***@h:1/0");
        assert_eq!(redacted("redis://h:1/0"), "redis://h:1/0");
    }
}
