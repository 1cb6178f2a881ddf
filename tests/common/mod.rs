//! Helpers shared by the integration tests.
#![allow(dead_code)]

use std::path::PathBuf;
use std::process::{Command, Output};

/// The project-local Python environment made by `scripts/setup-env.sh`.
///
/// Tests that need it fail (never skip) when it is missing: CI creates it.
pub fn venv() -> PathBuf {
    let dir = std::env::var_os("PREFLIGHT_TEST_VENV")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(env!("CARGO_MANIFEST_DIR")).join(".venv"));
    assert!(
        dir.join("bin/python").exists(),
        "test environment {} is missing: run scripts/setup-env.sh",
        dir.display()
    );
    dir
}

/// The venv's Python interpreter.
pub fn venv_python() -> PathBuf {
    venv().join("bin/python")
}

/// Run the `preflight` binary with arguments.
pub fn preflight(args: &[&str]) -> Output {
    preflight_cmd().args(args).output().expect("run preflight")
}

/// A `Command` for the `preflight` binary, for tests that set env or cwd.
pub fn preflight_cmd() -> Command {
    Command::new(env!("CARGO_BIN_EXE_preflight"))
}

/// Stdout as text.
pub fn stdout(o: &Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned()
}

/// Stderr as text.
pub fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}
