//! Forked probes: one fork server per python executor (an interpreter and
//! its environment) that has imported what the hub loader's caller imports
//! before `get_kernel` (torch, `kernels`), and forks one child per probe
//! (`probes/python/fork_server.py`). The sandbox is the one a fresh probe
//! gets: the sandbox starts `fork_client.py` where it would start the
//! driver, the child forked for it joins the client's namespaces, session,
//! limits and streams, and the client hands its place to it, so that its
//! parent is the probe's reaper as a fresh child's is (docs/forked.md).
//!
//! The server has no name anyone could find. It is reached through one
//! socket pair per probe: this side sends the server's end on the server's
//! control socket (its stdin, a `SOCK_SEQPACKET` pair only preflight holds
//! the other end of) and gives the client's end to the sandbox as the
//! client's stdin. No other process, no other user and no other run can
//! make the server fork anything, and a probe cannot ask for a second one:
//! the server reads one request per pair. What it did with each request it
//! says on its stdout, which no probe can write: that, not anything found
//! in the probe's folder, is how a refusal is known.
//!
//! The server is started on the first forked probe and ends with the last
//! clone of its executor, or with preflight (end of its control socket);
//! the helpers it forks die with it. Its start counts against the first
//! probe's timeout. When it cannot start in time, has imported nothing
//! worth forking, or says its state went bad (a thread, a CUDA context),
//! every later probe of the executor is a fresh process, and the reason is
//! kept ([`PythonExecutor::fork_fallback`]).

use super::{ProbeError, PythonExecutor};
use crate::sandbox::scrubbed_env;
use nix::sys::socket::{
    AddressFamily, ControlMessage, MsgFlags, SockFlag, SockType, UnixAddr, sendmsg, setsockopt,
    socketpair, sockopt::PassCred,
};
use std::collections::HashMap;
use std::ffi::OsString;
use std::io::{BufRead, BufReader, IoSlice};
use std::os::fd::{AsRawFd, OwnedFd};
use std::os::unix::net::UnixStream;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::mpsc::{Receiver, RecvTimeoutError, channel};
use std::sync::{Arc, Condvar, Mutex};
use std::time::{Duration, Instant};

/// The server, written into a folder of its own.
pub const SERVER: &str = include_str!("../../probes/python/fork_server.py");
/// The client, written next to the driver of each forked probe.
pub const CLIENT: &str = include_str!("../../probes/python/fork_client.py");
/// The client's name next to the driver.
pub(super) const CLIENT_NAME: &str = "preflight_fork_client.py";
/// Modules the server imports after torch and `kernels`
/// (comma-separated): what a program imports before it loads kernels.
pub const PRELOAD_ENV: &str = "PREFLIGHT_FORK_PRELOAD";

/// How long the server may take to import torch and `kernels`, at most
/// (a probe's timeout bounds it further).
const READY_WITHIN: Duration = Duration::from_secs(120);
/// How long a `check` may take to be answered.
const CHECK_WITHIN: Duration = Duration::from_secs(10);
/// How long the server may take to say what it did with a request once
/// the probe's run ended (it says so before the probe runs: this is the
/// time its line takes to be read).
const ANSWER_WITHIN: Duration = Duration::from_secs(5);

/// What a forked probe needs: the client's end of its socket pair to the
/// server (the client's stdin), and the request's number.
#[derive(Debug)]
pub(super) struct Ticket {
    pub id: u64,
    pub client: OwnedFd,
}

/// What the server did with one request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum Answer {
    /// It forked the probe into the client's namespaces.
    Forked,
    /// It forked nothing, for this reason: the probe must run fresh.
    Refused(String),
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
    /// Preflight's end of the server's control socket (its stdin).
    control: OwnedFd,
    /// The server's lines that answer `ready` and `check`.
    lines: Receiver<String>,
    /// Its lines that answer requests, by number.
    answers: Arc<Answers>,
    next: u64,
    dir: tempfile::TempDir,
}

/// The answers to requests, as the server's stdout gives them.
#[derive(Debug, Default)]
struct Answers {
    by_id: Mutex<HashMap<u64, Answer>>,
    arrived: Condvar,
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

/// A line of the server's stdout about one request.
#[derive(serde::Deserialize)]
struct Said {
    id: u64,
    #[serde(default)]
    forked: bool,
    #[serde(default)]
    refused: Option<String>,
}

impl Forking {
    pub(super) fn new(require_torch: bool) -> Forking {
        Forking {
            state: Arc::default(),
            require_torch,
        }
    }

    /// The ticket of a server that is safe to fork from now, starting it
    /// first if needed and waiting for it at most `within` (a probe's
    /// timeout); `None` (and the reason kept) when probes must be fresh
    /// processes.
    pub(super) fn ticket(&self, executor: &PythonExecutor, within: Duration) -> Option<Ticket> {
        let mut state = self.started(executor, within.min(READY_WITHIN));
        let State::Running(server) = &mut *state else {
            return None;
        };
        match server.check().and_then(|()| server.request()) {
            Ok(ticket) => Some(ticket),
            Err(why) => {
                *state = State::Off(why);
                None
            }
        }
    }

    /// Starts the server now, if it is not started yet, waiting for it at
    /// most as long as any start may take; why probes will be fresh
    /// processes, when they will.
    pub(super) fn start(&self, executor: &PythonExecutor) -> Option<String> {
        match &*self.started(executor, READY_WITHIN) {
            State::Off(why) => Some(why.clone()),
            _ => None,
        }
    }

    /// The state, locked, with the server started first (waiting for it
    /// at most `within`) if it was not yet.
    fn started(
        &self,
        executor: &PythonExecutor,
        within: Duration,
    ) -> std::sync::MutexGuard<'_, State> {
        let mut state = self.state.lock().unwrap_or_else(|e| e.into_inner());
        if let State::NotStarted = *state {
            *state = match Server::start(executor, self.require_torch, within) {
                Ok(server) => State::Running(server),
                Err(why) => State::Off(why),
            };
        }
        state
    }

    /// What the server did with request `id`, once the probe's run ended:
    /// `None` when it never said (it never got the request: the client did
    /// not start, or was ended before it asked).
    pub(super) fn answer(&self, id: u64) -> Option<Answer> {
        let answers = match &*self.state.lock().unwrap_or_else(|e| e.into_inner()) {
            State::Running(server) => Arc::clone(&server.answers),
            _ => return None,
        };
        answers.wait(id, ANSWER_WITHIN)
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

impl Answers {
    fn put(&self, said: Said) {
        let answer = match (said.forked, said.refused) {
            (true, _) => Answer::Forked,
            (false, why) => Answer::Refused(why.unwrap_or_else(|| "no reason given".into())),
        };
        let mut by_id = self.by_id.lock().unwrap_or_else(|e| e.into_inner());
        by_id.insert(said.id, answer);
        self.arrived.notify_all();
    }

    fn wait(&self, id: u64, within: Duration) -> Option<Answer> {
        let deadline = Instant::now() + within;
        let mut by_id = self.by_id.lock().unwrap_or_else(|e| e.into_inner());
        loop {
            if let Some(answer) = by_id.remove(&id) {
                return Some(answer);
            }
            let left = deadline.checked_duration_since(Instant::now())?;
            by_id = self
                .arrived
                .wait_timeout(by_id, left)
                .unwrap_or_else(|e| e.into_inner())
                .0;
        }
    }
}

impl Server {
    fn start(
        executor: &PythonExecutor,
        require_torch: bool,
        within: Duration,
    ) -> Result<Server, String> {
        let dir = tempfile::Builder::new()
            .prefix("preflight-fork-")
            .tempdir()
            .map_err(|e| format!("cannot make the fork server's folder: {e}"))?;
        let script = dir.path().join("preflight_fork_server.py");
        std::fs::write(&script, SERVER)
            .map_err(|e| format!("cannot write {}: {e}", script.display()))?;
        let stderr = std::fs::File::create(dir.path().join("stderr"))
            .map_err(|e| format!("cannot make the fork server's stderr: {e}"))?;
        let (control, theirs) = socketpair(
            AddressFamily::Unix,
            SockType::SeqPacket,
            None,
            SockFlag::SOCK_CLOEXEC,
        )
        .map_err(|e| format!("cannot make the fork server's control socket: {e}"))?;
        // The server runs in its own folder: a relative interpreter path
        // is the caller's.
        let python = std::path::absolute(&executor.python)
            .map_err(|e| format!("cannot find {}: {e}", executor.python.display()))?;
        let mut command = Command::new(&python);
        command
            .arg("-B")
            .arg(&script)
            .current_dir(dir.path())
            .env_clear()
            .envs(server_env(executor))
            .stdin(Stdio::from(theirs))
            .stdout(Stdio::piped())
            .stderr(stderr);
        // The server's dispositions are every forked probe's: the default
        // ones, as a fresh probe's reaper gives its child. (With a step
        // before `execve`, std forks rather than `posix_spawn`s, which
        // would hand signals 32 and 33 down ignored.)
        // SAFETY: `default_dispositions` makes raw system calls only.
        unsafe {
            command.pre_exec(|| {
                crate::sandbox::default_dispositions();
                Ok(())
            });
        }
        let mut child = command
            .spawn()
            .map_err(|e| format!("cannot start {}: {e}", executor.python.display()))?;
        let Some(stdout) = child.stdout.take() else {
            return Err("the fork server has no stdout".into());
        };
        let (send, lines) = channel();
        let answers = Arc::new(Answers::default());
        let said = Arc::clone(&answers);
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines() {
                let Ok(line) = line else { break };
                if let Ok(message) = serde_json::from_str::<Said>(&line) {
                    said.put(message);
                } else if send.send(line).is_err() {
                    break;
                }
            }
        });
        let mut server = Server {
            child,
            control,
            lines,
            answers,
            next: 0,
            dir,
        };
        let ready: Ready = server.answer(within, "start")?;
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
                    "the fork server did not answer `{what}` within {:.1} s",
                    within.as_secs_f64()
                ));
            }
            Err(RecvTimeoutError::Disconnected) => {
                let tail =
                    std::fs::read_to_string(self.dir.path().join("stderr")).unwrap_or_default();
                let tail = tail.lines().last().unwrap_or("no stderr").to_owned();
                return Err(format!("the fork server ended ({tail})"));
            }
        };
        serde_json::from_str(&line)
            .map_err(|e| format!("the fork server's answer to `{what}` is not JSON: {e}"))
    }

    /// One control message, with the descriptors it carries.
    fn send(&self, message: &serde_json::Value, fds: &[std::os::fd::RawFd]) -> Result<(), String> {
        let bytes = message.to_string();
        let cmsgs: Vec<ControlMessage> = if fds.is_empty() {
            Vec::new()
        } else {
            vec![ControlMessage::ScmRights(fds)]
        };
        sendmsg::<UnixAddr>(
            self.control.as_raw_fd(),
            &[IoSlice::new(bytes.as_bytes())],
            &cmsgs,
            MsgFlags::MSG_NOSIGNAL,
            None,
        )
        .map(drop)
        .map_err(|e| format!("the fork server is gone: {e}"))
    }

    fn check(&mut self) -> Result<(), String> {
        self.send(&serde_json::json!({ "check": true }), &[])?;
        let check: Check = self.answer(CHECK_WITHIN, "check")?;
        if check.safe {
            Ok(())
        } else {
            Err(check.why.unwrap_or_else(|| "unsafe".into()))
        }
    }

    /// A new socket pair for one probe: the server's end sent to it now
    /// (the server reads the peer's credentials from it: `SO_PASSCRED` is
    /// set before any peer can write), the client's end returned.
    fn request(&mut self) -> Result<Ticket, String> {
        let (server_end, client) =
            UnixStream::pair().map_err(|e| format!("cannot make a socket pair: {e}"))?;
        setsockopt(&server_end, PassCred, &true)
            .map_err(|e| format!("cannot ask for the client's credentials: {e}"))?;
        self.next += 1;
        let id = self.next;
        self.send(
            &serde_json::json!({ "probe": id }),
            &[server_end.as_raw_fd()],
        )?;
        Ok(Ticket {
            id,
            client: client.into(),
        })
    }
}

/// The server's environment: the one every probe child starts from (the
/// scrubbed environment, the executor's additions), so that what torch
/// reads when it is imported is what a fresh probe's torch reads.
fn server_env(executor: &PythonExecutor) -> Vec<(OsString, OsString)> {
    let mut env = scrubbed_env();
    let probe = executor.child(Path::new(""), Vec::new()).env;
    for (name, value) in probe {
        env.retain(|(n, _)| *n != name);
        env.push((name, value));
    }
    env.retain(|(n, _)| n != "PREFLIGHT_RESULT_FILE");
    env
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
