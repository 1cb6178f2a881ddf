//! Run a short-lived helper (`nvcc --version`, the measuring child) with a
//! time limit. A plain child in its own process group, killed as a group on
//! timeout; the sandbox layer will take this over.

use std::io::Read;
use std::os::unix::process::CommandExt;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// What a helper printed, if it exited on its own.
pub(crate) struct Finished {
    /// Exit code; `None` when a signal ended it.
    pub code: Option<i32>,
    /// Standard output.
    pub stdout: String,
    /// The first few KiB of standard error.
    pub stderr: String,
}

const STDERR_KEEP: usize = 4096;

/// Run `cmd` to completion or until `timeout`; `Err` says why there is no
/// result (could not start, timed out).
pub(crate) fn run(mut cmd: Command, timeout: Duration) -> Result<Finished, String> {
    cmd.stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .process_group(0);
    let mut child = cmd.spawn().map_err(|e| format!("cannot start: {e}"))?;
    let stdout = child.stdout.take().map(|mut pipe| {
        std::thread::spawn(move || {
            let mut buf = Vec::new();
            let _ = pipe.read_to_end(&mut buf);
            buf
        })
    });
    let stderr = child.stderr.take().map(|mut pipe| {
        std::thread::spawn(move || {
            let mut kept = Vec::new();
            let mut chunk = [0u8; 4096];
            while let Ok(n) = pipe.read(&mut chunk) {
                if n == 0 {
                    break;
                }
                let room = STDERR_KEEP.saturating_sub(kept.len());
                kept.extend_from_slice(&chunk[..n.min(room)]);
            }
            kept
        })
    });
    let deadline = Instant::now() + timeout;
    let status = loop {
        match child.try_wait() {
            Ok(Some(status)) => break Ok(status),
            Ok(None) if Instant::now() < deadline => std::thread::sleep(Duration::from_millis(2)),
            Ok(None) => break Err(format!("timed out after {:.0} s", timeout.as_secs_f64())),
            Err(e) => break Err(format!("cannot wait: {e}")),
        }
    };
    // Also reaps grandchildren that still hold the pipes, so the readers end.
    kill_group(child.id());
    if status.is_err() {
        let _ = child.kill();
        let _ = child.wait();
    }
    let text = |h: Option<std::thread::JoinHandle<Vec<u8>>>| {
        h.and_then(|h| h.join().ok())
            .map(|b| String::from_utf8_lossy(&b).into_owned())
            .unwrap_or_default()
    };
    let (stdout, stderr) = (text(stdout), text(stderr));
    let status = status?;
    Ok(Finished {
        code: status.code(),
        stdout,
        stderr,
    })
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
