//! Run a helper (`nvcc --version`, the measuring children) in the sandbox:
//! its own session and process group, a fresh working directory, no
//! credentials, a time limit, bounded output, no process left behind.

use super::facts::Asked;
use crate::sandbox::{Cancel, ChildCommand, Limits, RunReport, Sandbox, SandboxError, Termination};
use std::collections::BTreeMap;
use std::ffi::OsStr;
use std::path::Path;
use std::time::Duration;

/// Name of the variable that tells the child where to write its result.
pub(crate) const RESULT_VAR: &str = "PREFLIGHT_RESULT";

/// The result file's name in the child's working directory.
pub(crate) const RESULT_NAME: &str = "result.json";

/// How a helper's run went.
pub(crate) struct Ran {
    /// How it ended and what it printed.
    pub report: RunReport,
    /// The result file it wrote (at `$PREFLIGHT_RESULT`), if it wrote one.
    pub result: Option<Vec<u8>>,
}

/// Why a helper could not be run.
pub(crate) enum NotRun {
    /// The program cannot be executed (missing, not executable, bad
    /// interpreter line): a fact about it.
    Unusable(String),
    /// The sandbox itself failed (no temp dir, a system call): says nothing
    /// about the program.
    Sandbox(String),
}

/// Run `program args…` with `env` set on top of this process's environment
/// (credentials are never passed), within `timeout`. `input` is a file
/// (name, content) written into the child's working directory first: a
/// request it reads.
pub(crate) fn run(
    program: &Path,
    args: &[&str],
    input: Option<(&str, &[u8])>,
    env: &BTreeMap<String, String>,
    timeout: Duration,
) -> Result<Ran, NotRun> {
    let sandbox = Sandbox::new().map_err(|e| NotRun::Sandbox(e.to_string()))?;
    if let Some((name, content)) = input {
        std::fs::write(sandbox.dir().join(name), content)
            .map_err(|e| NotRun::Sandbox(format!("cannot write {name}: {e}")))?;
    }
    let result = sandbox.dir().join(RESULT_NAME);
    let mut cmd = ChildCommand::new(program);
    for arg in args {
        cmd = cmd.arg(arg);
    }
    for (k, v) in env {
        if !crate::sandbox::is_secret_name(OsStr::new(k)) {
            cmd = cmd.env(k, v);
        }
    }
    cmd = cmd.env(RESULT_VAR, &result);
    let limits = Limits {
        timeout,
        grace: Duration::from_secs(2),
        ..Limits::default()
    };
    let report = sandbox
        .run(&cmd, &limits, &Cancel::new())
        .map_err(|e| match e {
            SandboxError::NotFound { .. }
            | SandboxError::Exec { .. }
            | SandboxError::NulByte { .. } => NotRun::Unusable(e.to_string()),
            other => NotRun::Sandbox(other.to_string()),
        })?;
    let result = std::fs::read(&result).ok();
    Ok(Ran { report, result })
}

/// Ask a tool about itself (`nvcc --version`, an interpreter its version):
/// what it printed when it exited 0; otherwise why not, as a fact about it
/// (it cannot start, it failed) or as inconclusive (timed out, the sandbox
/// failed), which says nothing about the tool.
pub(crate) fn ask(program: &Path, args: &[&str], timeout: Duration) -> Result<String, Asked> {
    let ran = match run(program, args, None, &BTreeMap::new(), timeout) {
        Ok(ran) => ran,
        Err(NotRun::Unusable(why)) => return Err(Asked::Failed(why)),
        Err(NotRun::Sandbox(why)) => return Err(Asked::Inconclusive(why)),
    };
    match ran.report.termination {
        Termination::Exited { code: 0 } => Ok(ran.report.stdout.text()),
        Termination::TimedOut { .. } | Termination::Cancelled => {
            Err(Asked::Inconclusive(ran.report.termination.to_string()))
        }
        ended => {
            let said = ran.report.stderr.tail_lines(1).trim().to_string();
            Err(Asked::Failed(if said.is_empty() {
                ended.to_string()
            } else {
                format!("{ended}: {said}")
            }))
        }
    }
}
