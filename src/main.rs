//! The `preflight` command line: a thin shell over the `kernel_preflight` library.

mod cli;

fn main() -> std::process::ExitCode {
    cli::main()
}
