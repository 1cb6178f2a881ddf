//! Tables on real terminals: a pseudo-terminal of unknown size (0×0, as
//! `script` or `docker exec -t` give) is printed to like a pipe, and one of
//! 80 columns gets lines no wider, with no word broken.

mod common;

use common::{preflight_cmd, stdout};
use std::io::Read;
use std::os::fd::{FromRawFd, OwnedFd};
use std::process::{Command, Stdio};

/// Runs `cmd` with stdout on a new pty of `cols` × `rows` (COLUMNS unset):
/// what it printed, with the terminal's `\r\n` back to `\n`.
fn on_pty(mut cmd: Command, cols: u16, rows: u16) -> String {
    let (mut master, mut slave) = (-1, -1);
    let size = libc::winsize {
        ws_row: rows,
        ws_col: cols,
        ws_xpixel: 0,
        ws_ypixel: 0,
    };
    // SAFETY: openpty writes two descriptors, which are then owned here.
    let rc = unsafe {
        libc::openpty(
            &mut master,
            &mut slave,
            std::ptr::null_mut(),
            std::ptr::null(),
            &size,
        )
    };
    assert_eq!(rc, 0, "openpty: {}", std::io::Error::last_os_error());
    let (master, slave) = unsafe { (OwnedFd::from_raw_fd(master), OwnedFd::from_raw_fd(slave)) };
    let mut child = cmd
        .env_remove("COLUMNS")
        .stdin(Stdio::null())
        .stdout(Stdio::from(slave))
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    // `cmd` still holds a copy of the slave end: drop it, so that the
    // master reads EIO once the child is gone.
    drop(cmd);
    let mut text = Vec::new();
    let mut master = std::fs::File::from(master);
    let mut buf = [0u8; 65536];
    loop {
        match master.read(&mut buf) {
            Ok(0) | Err(_) => break,
            Ok(n) => text.extend_from_slice(&buf[..n]),
        }
    }
    child.wait().unwrap();
    String::from_utf8_lossy(&text).replace("\r\n", "\n")
}

/// The same command into a pipe.
fn piped(mut cmd: Command) -> String {
    stdout(&cmd.env_remove("COLUMNS").output().unwrap())
}

/// The words of a text, box-drawing characters and spaces apart (a
/// header's word in the list layout is followed by a colon).
fn words(text: &str) -> Vec<&str> {
    text.split(|c: char| c.is_whitespace() || ('\u{2500}'..='\u{257f}').contains(&c))
        .map(|w| w.strip_suffix(':').unwrap_or(w))
        .filter(|w| !w.is_empty())
        .collect()
}

fn relu_demo() -> String {
    concat!(env!("CARGO_MANIFEST_DIR"), "/examples/kernels/relu-demo").to_owned()
}

/// `preflight ARGS` with the test environment's interpreter and one
/// outcome cache for every run of the test (the probes run once).
fn preflight(args: &[&str], cache: &std::path::Path) -> Command {
    let mut cmd = preflight_cmd();
    cmd.args(args)
        .env("PREFLIGHT_CACHE", cache)
        .env("VIRTUAL_ENV", common::venv());
    cmd
}

/// The commands, run once into `cache` first, so that every later run of
/// `check` is answered from it alike.
fn commands(cache: &std::path::Path) -> Vec<Vec<String>> {
    let python = common::venv_python().display().to_string();
    let commands: Vec<Vec<String>> = vec![
        vec!["resolve".into(), relu_demo()],
        vec!["check".into(), relu_demo(), "--python".into(), python],
        vec!["fingerprint".into()],
    ];
    for args in &commands {
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        piped(preflight(&args, cache));
    }
    commands
}

#[test]
fn a_terminal_of_unknown_size_gets_what_a_pipe_gets() {
    let cache = common::fresh_dir("pty-cache");
    for args in commands(&cache) {
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        let pipe = piped(preflight(&args, &cache));
        let pty = on_pty(preflight(&args, &cache), 0, 0);
        // Timings may differ between runs; the layout may not.
        let shape = |t: &str| t.lines().map(|l| l.chars().count()).collect::<Vec<_>>();
        assert_eq!(
            shape(&pty),
            shape(&pipe),
            "{args:?}\npty:\n{pty}\npipe:\n{pipe}"
        );
        assert!(pty.lines().count() > 3, "{args:?}: {pty}");
    }
}

#[test]
fn at_80_columns_no_line_is_wider_and_no_word_is_broken() {
    let cache = common::fresh_dir("pty-cache");
    for args in commands(&cache) {
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        let pipe = piped(preflight(&args, &cache));
        let pty = on_pty(preflight(&args, &cache), 80, 24);
        // The tables: their lines, and every word of them, kept whole.
        // A table's lines, and a list's (indented) unless one word.
        let table = |l: &str| l.starts_with(['│', '┌', '└', '╞']);
        // (A failure's hint is a sentence, not a table: the terminal wraps it.)
        let listed = |l: &str| {
            l.starts_with("  ") && !l.trim_start().starts_with("hint:") && l.trim().contains(' ')
        };
        for line in pty.lines().filter(|l| table(l) || listed(l)) {
            assert!(line.chars().count() <= 80, "{args:?}: {line}\n{pty}");
        }
        let at_80 = words(&pty);
        // (The list layout names no first column: its header is left out.)
        for line in pipe.lines().filter(|l| l.starts_with('│')).skip(1) {
            for word in words(line) {
                if word.ends_with(" ms") || word.chars().all(|c| c.is_ascii_digit() || c == '.') {
                    continue;
                }
                assert!(at_80.contains(&word), "{args:?}: {word:?} broken\n{pty}");
            }
        }
    }
    // The fingerprint's hash on a line of its own.
    let pty = on_pty(preflight(&["fingerprint"], &cache), 80, 24);
    let hash = pty.lines().last().unwrap_or_default();
    assert!(
        hash.len() == 64 && hash.chars().all(|c| c.is_ascii_hexdigit()),
        "{pty}"
    );
}
