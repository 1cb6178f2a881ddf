//! Run a short-lived helper (`nvcc --version`, the measuring child) with a
//! time limit. A plain child in its own process group, killed as a group on
//! timeout; the sandbox layer will take this over.

use std::io::Read;
use std::os::unix::process::CommandExt;
use std::process::{Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

/// What a helper printed, if it exited on its own.
pub(crate) struct Finished {
    /// Exit code; `None` when a signal ended it.
    pub code: Option<i32>,
    /// The last [`KEEP`] bytes of standard output.
    pub stdout: String,
    /// The first [`KEEP`] bytes of standard error.
    pub stderr: String,
}

/// How much of each stream is kept.
const KEEP: usize = 64 * 1024;

/// How long the pipes may stay open after the child exited (a grandchild
/// holding them) before its process group is killed.
const PIPE_GRACE: Duration = Duration::from_millis(200);

/// Run `cmd` to completion or until `timeout`; `Err` says why there is no
/// result (could not start, timed out).
pub(crate) fn run(mut cmd: Command, timeout: Duration) -> Result<Finished, String> {
    cmd.stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .process_group(0);
    let mut child = cmd.spawn().map_err(|e| format!("cannot start: {e}"))?;
    let (tx, rx) = mpsc::channel::<(bool, Vec<u8>)>();
    let mut readers = 0;
    if let Some(pipe) = child.stdout.take() {
        let tx = tx.clone();
        std::thread::spawn(move || tx.send((true, drain(pipe, true))));
        readers += 1;
    }
    if let Some(pipe) = child.stderr.take() {
        let tx = tx.clone();
        std::thread::spawn(move || tx.send((false, drain(pipe, false))));
        readers += 1;
    }
    drop(tx);
    let deadline = Instant::now() + timeout;
    let status = loop {
        match child.try_wait() {
            Ok(Some(status)) => break Ok(status),
            Ok(None) if Instant::now() < deadline => std::thread::sleep(Duration::from_millis(2)),
            Ok(None) => break Err(format!("timed out after {timeout:?}")),
            Err(e) => break Err(format!("cannot wait: {e}")),
        }
    };
    if status.is_err() {
        // The child is alive, so its process group id is still its own.
        kill_group(child.id());
        let _ = child.kill();
        let _ = child.wait();
    }
    let (mut stdout, mut stderr) = (Vec::new(), Vec::new());
    let mut grace = Instant::now() + PIPE_GRACE;
    let mut killed = false;
    while readers > 0 {
        let wait = grace.saturating_duration_since(Instant::now());
        match rx.recv_timeout(wait) {
            Ok((is_stdout, bytes)) => {
                readers -= 1;
                *(if is_stdout { &mut stdout } else { &mut stderr }) = bytes;
            }
            Err(mpsc::RecvTimeoutError::Timeout) if !killed => {
                // A grandchild still holds the pipes; while it lives the
                // group id cannot be reused, so this reaches only the group.
                kill_group(child.id());
                killed = true;
                grace = Instant::now() + PIPE_GRACE;
            }
            Err(_) => break,
        }
    }
    let status = status?;
    Ok(Finished {
        code: status.code(),
        stdout: String::from_utf8_lossy(&stdout).into_owned(),
        stderr: String::from_utf8_lossy(&stderr).into_owned(),
    })
}

/// Read a pipe to its end, keeping the tail (stdout: the result is the last
/// line) or the head (stderr: the first error explains the rest).
fn drain(mut pipe: impl Read, keep_tail: bool) -> Vec<u8> {
    let mut kept = Vec::new();
    let mut chunk = [0u8; 8192];
    while let Ok(n) = pipe.read(&mut chunk) {
        if n == 0 {
            break;
        }
        if keep_tail {
            kept.extend_from_slice(&chunk[..n]);
            if kept.len() > KEEP {
                kept.drain(..kept.len() - KEEP);
            }
        } else {
            let room = KEEP.saturating_sub(kept.len());
            kept.extend_from_slice(&chunk[..n.min(room)]);
        }
    }
    kept
}

fn kill_group(pid: u32) {
    if let Ok(pid) = libc::pid_t::try_from(pid) {
        // SAFETY: kill(2) with a negative pid signals the process group that
        // the child leads (it was started with process_group(0)); it touches
        // no memory of ours.
        unsafe {
            libc::kill(-pid, libc::SIGKILL);
        }
    }
}
