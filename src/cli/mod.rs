//! Argument parsing and exit codes; every command is a thin shell over the
//! library.
//!
//! Exit codes: 0 success; 1 the answer is "no"; 2 bad input or usage; 3 an
//! internal error.

mod bench;
mod cache;
mod check;
mod cuda_child;
mod doctor;
mod fingerprint;
mod fleet;
mod inspect;
mod labels;
mod output;
mod probing;
mod reaper;
mod repo;
mod resolve;
mod select;
mod startup;
mod warmup;

use clap::{Parser, Subcommand};
use std::io::Write;
use std::process::ExitCode;

/// Will this build variant of a compute kernel actually run here?
#[derive(Parser)]
#[command(name = "preflight", version, about, long_about = None)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Describe this machine (GPUs, driver, CUDA toolkits, Python
    /// environment, host) and print the hash that keys cached outcomes.
    Fingerprint(fingerprint::Args),
    /// Declared, name-level check: which variants the hub loader would accept
    /// here, in its preference order.
    Resolve(resolve::Args),
    /// Architectures embedded in shared objects, cubins and fatbins: SASS
    /// and PTX per target, and whether a given GPU can run them.
    Inspect(inspect::Args),
    /// Probe every variant in an isolated child: declared vs observed.
    Check(check::Args),
    /// Print the path of the best variant that works here (instant when
    /// its outcomes are cached): the fallback for get_kernel.
    Select(select::Args),
    /// Time the variants that work here (or native targets) side by side,
    /// each in a child of its own, with verdicts (faster, slower, same,
    /// ambiguous).
    Bench(bench::Args),
    /// Probe every variant that has no cached outcome yet (default: every
    /// kernel in the hub cache), for a new machine.
    Warmup(warmup::Args),
    /// What this machine can do for compute kernels: driver, devices,
    /// NVRTC, nvcc, PTX JIT, bf16 / fp8 / wgmma, torch, Triton, CuTe-DSL.
    Doctor(doctor::Args),
    /// This node's kernel verdicts as scheduler labels, from the outcome
    /// cache alone (no probe): NFD feature file, Slurm features, Ray
    /// labels, JSON.
    Labels(labels::Args),
    /// Manage the outcome cache.
    Cache(cache::Args),
    /// The fleet's verdicts from its remote store: per machine class, the
    /// variant chosen for each kernel; what differs between two classes.
    Fleet(fleet::Args),
    /// The cuda executor's child mode (internal: run by preflight itself).
    #[command(name = "__cuda-child", hide = true)]
    CudaChild(cuda_child::Args),
}

/// Why a command failed, and whose fault it is; printed as one line.
#[derive(Debug)]
pub enum Failure {
    /// Bad input or usage, which the user can fix: exit 2.
    BadInput(String),
    /// A fault of preflight or of the machine (a failed fork, no
    /// `current_exe`, a cache that cannot be written inside a usable root):
    /// exit 3.
    Internal(String),
}

pub use Failure::{BadInput, Internal};

// Each library error is mapped on purpose: a new error type or variant must
// say which side it is on before `?` accepts it.

impl From<kernel_preflight::discover::DiscoverError> for Failure {
    fn from(e: kernel_preflight::discover::DiscoverError) -> Self {
        BadInput(e.to_string())
    }
}

impl From<kernel_preflight::fingerprint::FingerprintError> for Failure {
    fn from(e: kernel_preflight::fingerprint::FingerprintError) -> Self {
        BadInput(e.to_string())
    }
}

impl From<kernel_preflight::declared::SystemError> for Failure {
    fn from(e: kernel_preflight::declared::SystemError) -> Self {
        BadInput(e.to_string())
    }
}

impl From<kernel_preflight::variant::InvalidVariantName> for Failure {
    fn from(e: kernel_preflight::variant::InvalidVariantName) -> Self {
        BadInput(e.to_string())
    }
}

impl From<kernel_preflight::declared::embedded::InspectError> for Failure {
    fn from(e: kernel_preflight::declared::embedded::InspectError) -> Self {
        BadInput(e.to_string())
    }
}

impl From<kernel_preflight::discover::project::ProjectError> for Failure {
    fn from(e: kernel_preflight::discover::project::ProjectError) -> Self {
        BadInput(e.to_string())
    }
}

impl From<kernel_preflight::discover::NativeError> for Failure {
    fn from(e: kernel_preflight::discover::NativeError) -> Self {
        BadInput(e.to_string())
    }
}

/// A probe that could not be run at all is always preflight's fault.
impl From<kernel_preflight::probe::ProbeError> for Failure {
    fn from(e: kernel_preflight::probe::ProbeError) -> Self {
        Internal(e.to_string())
    }
}

impl From<kernel_preflight::cache::CacheError> for Failure {
    fn from(e: kernel_preflight::cache::CacheError) -> Self {
        use kernel_preflight::cache::CacheError as E;
        let message = e.to_string();
        match e {
            E::Root { .. } | E::Unreadable { .. } | E::Bundle { .. } | E::BadKey(_) => {
                BadInput(message)
            }
            E::Io { .. } | E::Encode(_) => Internal(message),
        }
    }
}

/// What a command decided.
pub enum Answer {
    /// Exit 0.
    Yes,
    /// Exit 1: the question was answered "no".
    No,
}

/// Run the command line and map the result to an exit code.
pub fn main() -> ExitCode {
    if let Some(code) = reaper::run_if_asked() {
        return code;
    }
    let command = startup::command().unwrap_or_else(|| Cli::parse().command);
    if let Command::CudaChild(args) = &command {
        return cuda_child::run(args);
    }
    // Every probe's child runs under this binary as its reaper. Without a
    // path to it, runs say they were not contained.
    kernel_preflight::sandbox::set_default_reaper_with(kernel_preflight::fs::current_exe);
    // Folders the user lets every probe write to the host (a harness that
    // collects what probes leave): named in the walls doctor prints.
    if let Some(folders) = std::env::var_os("PREFLIGHT_PROBE_WRITABLE") {
        for folder in std::env::split_paths(&folders).filter(|f| !f.as_os_str().is_empty()) {
            if !folder.is_absolute() || !folder.is_dir() {
                eprintln!(
                    "error: PREFLIGHT_PROBE_WRITABLE: {} is not an absolute path to a folder",
                    folder.display()
                );
                return ExitCode::from(2);
            }
            kernel_preflight::sandbox::write_by_default(folder);
        }
    }
    // Tables fit the terminal stdout is (none: a pipe, a file, a terminal
    // of unknown size).
    kernel_preflight::report::grid::set_width(kernel_preflight::report::grid::terminal_width(1));
    let result = std::panic::catch_unwind(|| match command {
        Command::Fingerprint(args) => fingerprint::run(args),
        Command::Resolve(args) => resolve::run(args),
        Command::Inspect(args) => inspect::run(args),
        Command::Check(args) => check::run(args),
        Command::Select(args) => select::run(args),
        Command::Warmup(args) => warmup::run(args),
        Command::Bench(args) => bench::run(args),
        Command::Doctor(args) => doctor::run(args),
        Command::Labels(args) => labels::run(args),
        Command::Cache(args) => cache::run(args),
        Command::Fleet(args) => fleet::run(args),
        Command::CudaChild(_) => unreachable!("handled before"),
    });
    match result {
        Ok(Ok(Answer::Yes)) => ExitCode::SUCCESS,
        Ok(Ok(Answer::No)) => ExitCode::from(1),
        Ok(Err(BadInput(message))) => {
            eprintln!("preflight: error: {message}");
            ExitCode::from(2)
        }
        Ok(Err(Internal(message))) => {
            eprintln!("preflight: internal error: {message}");
            ExitCode::from(3)
        }
        Err(_) => {
            eprintln!("preflight: internal error (this is a bug in preflight, please report it)");
            ExitCode::from(3)
        }
    }
}

/// After a Ctrl-C (or SIGTERM, SIGHUP) every child has been stopped: say so
/// and exit with 128 + the signal, as a shell does.
pub fn exit_if_interrupted(cancel: &kernel_preflight::sandbox::Cancel, what: &str) {
    if let Some(signal) = cancel.signal() {
        eprintln!("preflight: interrupted; {what}");
        std::process::exit(128 + signal);
    }
}

/// Print to stdout; a closed pipe (`preflight … | head`) is not an error.
pub fn emit(text: &str) {
    let mut out = std::io::stdout().lock();
    // One write: stdout is line-buffered, and the text and its newline
    // apart would be two system calls.
    let _ = if text.ends_with('\n') {
        out.write_all(text.as_bytes())
    } else {
        out.write_all(format!("{text}\n").as_bytes())
    };
    let _ = out.flush();
}

/// Print what a command printed: its lines for people on stderr, its
/// answer on stdout.
pub fn print(printed: &kernel_preflight::report::Printed) {
    for line in &printed.stderr {
        eprintln!("{line}");
    }
    if let Some(text) = &printed.stdout {
        emit(text);
    }
}

/// Print a value as pretty JSON.
pub fn emit_json<T: serde::Serialize>(value: &T) {
    match serde_json::to_string_pretty(value) {
        Ok(text) => emit(&text),
        Err(e) => panic!("cannot serialize output: {e}"),
    }
}
