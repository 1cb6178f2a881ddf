//! The `preflight` command line: a thin shell over the `kernel_preflight` library.

mod cli;
mod lazy_libm;

fn main() -> std::process::ExitCode {
    cli::main()
}
