//! Forked probes: one fork server per python executor (an interpreter and
//! its environment) that has imported what the hub loader's caller imports
//! before `get_kernel` (torch, `kernels`), and forks one child per probe
//! (`probes/python/fork_server.py`). The sandbox is the one a fresh probe
//! gets: the sandbox starts `fork_client.py` where it would start the
//! driver, and the child forked for it joins the client's namespaces,
//! session, limits and streams before it runs the driver (docs/forked.md).
//!
//! The server is started on the first forked probe and ends with the last
//! clone of its executor. When it cannot start, has imported nothing worth
//! forking, or says its state went bad (a thread, a CUDA context), every
//! later probe of the executor is a fresh process, and the reason is kept
//! ([`PythonExecutor::fork_fallback`]).

use super::{ProbeError, PythonExecutor};
use crate::sandbox::scrubbed_env;
use std::ffi::OsString;
use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::mpsc::{Receiver, RecvTimeoutError, channel};
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// The server, written into a folder of its own.
pub const SERVER: &str = include_str!("../../probes/python/fork_server.py");
/// The client, written next to the driver of each forked probe.
pub const CLIENT: &str = include_str!("../../probes/python/fork_client.py");
/// The client's name next to the driver.
pub(super) const CLIENT_NAME: &str = "preflight_fork_client.py";
/// What the client leaves when the server forked no probe for it.
pub(super) const REFUSED_NAME: &str = "preflight_fork_refused";
/// The variables the client reads (and removes before the probe sees them).
pub(super) const SERVER_ENV: &str = "PREFLIGHT_FORK_SERVER";
/// The client's proof that it was started by this executor.
pub(super) const NONCE_ENV: &str = "PREFLIGHT_FORK_NONCE";
/// Modules the server imports after torch and `kernels`
/// (comma-separated): what a program imports before it loads kernels.
pub const PRELOAD_ENV: &str = "PREFLIGHT_FORK_PRELOAD";

/// How long the server may take to import torch and `kernels`.
const READY_WITHIN: Duration = Duration::from_secs(120);
/// How long a `check` may take to be answered.
const CHECK_WITHIN: Duration = Duration::from_secs(10);

/// What a forked probe needs to reach its server.
#[derive(Debug, Clone)]
pub(super) struct Ticket {
    pub name: String,
    pub nonce: String,
}

/// The state of an executor's fork server, shared by its clones.
#[derive(Debug, Clone)]
pub(super) struct Forking {
    state: Arc<Mutex<State>>,
    /// Whether a server without torch is given up (nothing to share).
    require_torch: bool,
}

#[derive(Debug, Default)]
enum State {
    #[default]
    NotStarted,
    Running(Server),
    /// Probes are fresh processes, for this reason.
    Off(String),
}

#[derive(Debug)]
struct Server {
    child: Child,
    stdin: ChildStdin,
    lines: Receiver<String>,
    ticket: Ticket,
    _dir: tempfile::TempDir,
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

#[derive(serde::Deserialize)]
struct Ready {
    ready: bool,
    #[serde(default)]
    imported: Vec<String>,
    #[serde(default)]
    safe: bool,
    #[serde(default)]
    why: Option<String>,
}

#[derive(serde::Deserialize)]
struct Check {
    safe: bool,
    #[serde(default)]
    why: Option<String>,
}

impl Forking {
    pub(super) fn new(require_torch: bool) -> Forking {
        Forking {
            state: Arc::default(),
            require_torch,
        }
    }

    /// The ticket of a server that is safe to fork from now, starting it
    /// first if needed; `None` (and the reason kept) when probes must be
    /// fresh processes.
    pub(super) fn ticket(&self, executor: &PythonExecutor) -> Option<Ticket> {
        let mut state = self.state.lock().unwrap_or_else(|e| e.into_inner());
        if let State::NotStarted = *state {
            *state = match Server::start(executor, self.require_torch) {
                Ok(server) => State::Running(server),
                Err(why) => State::Off(why),
            };
        }
        let State::Running(server) = &mut *state else {
            return None;
        };
        match server.check() {
            Ok(()) => Some(server.ticket.clone()),
            Err(why) => {
                *state = State::Off(why);
                None
            }
        }
    }

    /// Turns forking off for the rest of the executor's life.
    pub(super) fn refuse(&self, why: String) {
        *self.state.lock().unwrap_or_else(|e| e.into_inner()) = State::Off(why);
    }

    /// Why probes are fresh processes, once the server was given up.
    pub(super) fn fallback(&self) -> Option<String> {
        match &*self.state.lock().unwrap_or_else(|e| e.into_inner()) {
            State::Off(why) => Some(why.clone()),
            _ => None,
        }
    }
}

impl Server {
    fn start(executor: &PythonExecutor, require_torch: bool) -> Result<Server, String> {
        let dir = tempfile::Builder::new()
            .prefix("preflight-fork-")
            .tempdir()
            .map_err(|e| format!("cannot make the fork server's folder: {e}"))?;
        let script = dir.path().join("preflight_fork_server.py");
        std::fs::write(&script, SERVER)
            .map_err(|e| format!("cannot write {}: {e}", script.display()))?;
        let ticket = Ticket {
            name: format!("preflight-fork-{}-{}", std::process::id(), nonce()),
            nonce: nonce(),
        };
        let stderr = std::fs::File::create(dir.path().join("stderr"))
            .map_err(|e| format!("cannot make the fork server's stderr: {e}"))?;
        // The server runs in its own folder: a relative interpreter path
        // is the caller's.
        let python = std::path::absolute(&executor.python)
            .map_err(|e| format!("cannot find {}: {e}", executor.python.display()))?;
        let mut command = Command::new(&python);
        command
            .arg("-B")
            .arg(&script)
            .arg(&ticket.name)
            .current_dir(dir.path())
            .env_clear()
            .envs(server_env(executor, &ticket))
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(stderr);
        let mut child = command
            .spawn()
            .map_err(|e| format!("cannot start {}: {e}", executor.python.display()))?;
        let (Some(stdin), Some(stdout)) = (child.stdin.take(), child.stdout.take()) else {
            return Err("the fork server has no control pipes".into());
        };
        let (send, lines) = channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines() {
                let Ok(line) = line else { break };
                if send.send(line).is_err() {
                    break;
                }
            }
        });
        let mut server = Server {
            child,
            stdin,
            lines,
            ticket,
            _dir: dir,
        };
        let ready: Ready = server.answer(READY_WITHIN, "start")?;
        if !ready.ready {
            return Err(format!(
                "the fork server could not import what it holds: {}",
                ready.why.unwrap_or_default()
            ));
        }
        if require_torch && !ready.imported.iter().any(|m| m == "torch") {
            return Err("torch is not installed: nothing to share between probes".into());
        }
        if !ready.safe {
            return Err(ready.why.unwrap_or_else(|| "unsafe".into()));
        }
        Ok(server)
    }

    fn answer<T: serde::de::DeserializeOwned>(
        &mut self,
        within: Duration,
        what: &str,
    ) -> Result<T, String> {
        let line = match self.lines.recv_timeout(within) {
            Ok(line) => line,
            Err(RecvTimeoutError::Timeout) => {
                return Err(format!(
                    "the fork server did not answer `{what}` within {} s",
                    within.as_secs()
                ));
            }
            Err(RecvTimeoutError::Disconnected) => {
                let tail =
                    std::fs::read_to_string(self._dir.path().join("stderr")).unwrap_or_default();
                let tail = tail.lines().last().unwrap_or("no stderr").to_owned();
                return Err(format!("the fork server ended ({tail})"));
            }
        };
        serde_json::from_str(&line)
            .map_err(|e| format!("the fork server's answer to `{what}` is not JSON: {e}"))
    }

    fn check(&mut self) -> Result<(), String> {
        self.stdin
            .write_all(b"check\n")
            .and_then(|()| self.stdin.flush())
            .map_err(|e| format!("the fork server is gone: {e}"))?;
        let check: Check = self.answer(CHECK_WITHIN, "check")?;
        if check.safe {
            Ok(())
        } else {
            Err(check.why.unwrap_or_else(|| "unsafe".into()))
        }
    }
}

/// The server's environment: the one every probe child starts from (the
/// scrubbed environment, the executor's additions), so that what torch
/// reads when it is imported is what a fresh probe's torch reads.
fn server_env(executor: &PythonExecutor, ticket: &Ticket) -> Vec<(OsString, OsString)> {
    let mut env = scrubbed_env();
    let probe = executor.child(Path::new(""), Vec::new()).env;
    for (name, value) in probe {
        env.retain(|(n, _)| *n != name);
        env.push((name, value));
    }
    env.retain(|(n, _)| n != "PREFLIGHT_RESULT_FILE");
    env.push((NONCE_ENV.into(), ticket.nonce.clone().into()));
    env
}

/// 128 random bits, hex.
fn nonce() -> String {
    let mut bytes = [0u8; 16];
    if let Ok(mut urandom) = std::fs::File::open("/dev/urandom") {
        use std::io::Read;
        let _ = urandom.read_exact(&mut bytes);
    }
    crate::hash::hex(&bytes)
}

/// The client's command line for a probe whose fresh command line is
/// `python -B DRIVER ARGS…`.
pub(super) fn client_args(dir: &Path, fresh: &[OsString]) -> Result<Vec<OsString>, ProbeError> {
    let client: PathBuf = dir.join(CLIENT_NAME);
    std::fs::write(&client, CLIENT).map_err(|source| ProbeError::Setup {
        path: client.clone(),
        source,
    })?;
    let mut args: Vec<OsString> = vec!["-I".into(), "-S".into(), "-B".into(), client.into()];
    args.extend(fresh.iter().skip(1).cloned());
    Ok(args)
}
