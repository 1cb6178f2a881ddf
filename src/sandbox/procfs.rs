//! The few facts `/proc` gives about other processes that the sandbox needs
//! to find, place and name a process that outlived its probe.

use std::os::fd::BorrowedFd;

/// Longest command line kept for a report, in bytes.
const CMDLINE_LIMIT: usize = 1024;

/// One process as `/proc/PID/stat` describes it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Stat {
    pub(crate) pid: i32,
    pub(crate) ppid: i32,
    pub(crate) pgrp: i32,
    pub(crate) session: i32,
    pub(crate) zombie: bool,
    /// Stopped by a signal (`T`), not traced.
    pub(crate) stopped: bool,
}

/// `/proc/PID/stat` of `pid`, if it exists and parses.
pub(crate) fn stat(pid: i32) -> Option<Stat> {
    let text = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    parse_stat(pid, &text)
}

/// "pid (comm) state ppid pgrp session …": `comm` may hold spaces and
/// parentheses, so the fields are counted from the last `)`.
fn parse_stat(pid: i32, text: &str) -> Option<Stat> {
    let rest = &text[text.rfind(')')? + 1..];
    let mut fields = rest.split_whitespace();
    let state = fields.next()?;
    let mut number = || fields.next()?.parse::<i32>().ok();
    Some(Stat {
        pid,
        ppid: number()?,
        pgrp: number()?,
        session: number()?,
        zombie: state == "Z" || state == "X",
        stopped: state == "T",
    })
}

/// Every process this one can see, in `/proc` order.
pub(crate) fn all() -> Vec<Stat> {
    let Ok(entries) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    entries
        .flatten()
        .filter_map(|e| e.file_name().to_str()?.parse::<i32>().ok())
        .filter_map(stat)
        .collect()
}

/// The command line of `pid` as one line (arguments joined by spaces,
/// bounded); `[comm]` for a process without one (a kernel thread, a
/// process that cleared it).
pub(crate) fn cmdline(pid: i32) -> String {
    let raw = std::fs::read(format!("/proc/{pid}/cmdline")).unwrap_or_default();
    let args: Vec<String> = raw
        .split(|b| *b == 0)
        .filter(|arg| !arg.is_empty())
        .map(|arg| String::from_utf8_lossy(arg).into_owned())
        .collect();
    let mut line = args.join(" ");
    if line.is_empty() {
        let comm = std::fs::read_to_string(format!("/proc/{pid}/comm")).unwrap_or_default();
        line = format!("[{}]", comm.trim_end());
    }
    if line.len() > CMDLINE_LIMIT {
        let mut end = CMDLINE_LIMIT;
        while !line.is_char_boundary(end) {
            end -= 1;
        }
        line.truncate(end);
        line.push('…');
    }
    line
}

/// The inode of the pipe behind `fd`, which names the pipe in other
/// processes' `/proc/PID/fd` links (`pipe:[INODE]`); `None` for anything
/// but a pipe.
pub(crate) fn pipe_inode(fd: BorrowedFd<'_>) -> Option<u64> {
    let stat = nix::sys::stat::fstat(fd).ok()?;
    (stat.st_mode & libc::S_IFMT == libc::S_IFIFO).then_some(stat.st_ino)
}

/// Whether `pid` has one of the pipes `inodes` open.
pub(crate) fn holds_pipe(pid: i32, inodes: &[u64]) -> bool {
    let Ok(fds) = std::fs::read_dir(format!("/proc/{pid}/fd")) else {
        return false;
    };
    fds.flatten().any(|fd| {
        std::fs::read_link(fd.path()).is_ok_and(|target| {
            let target = target.to_string_lossy();
            target
                .strip_prefix("pipe:[")
                .and_then(|rest| rest.strip_suffix(']'))
                .and_then(|inode| inode.parse::<u64>().ok())
                .is_some_and(|inode| inodes.contains(&inode))
        })
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stat_fields_are_counted_from_the_last_parenthesis() {
        let text = "4242 (a (weird) name) S 17 4242 9 0 -1 4194560 …";
        assert_eq!(
            parse_stat(4242, text),
            Some(Stat {
                pid: 4242,
                ppid: 17,
                pgrp: 4242,
                session: 9,
                zombie: false,
                stopped: false,
            })
        );
        assert!(parse_stat(1, "1 (x) Z 0 1 1").is_some_and(|s| s.zombie));
        assert!(parse_stat(1, "1 (x) T 0 1 1").is_some_and(|s| s.stopped && !s.zombie));
        assert_eq!(parse_stat(1, "garbage"), None);
    }

    #[test]
    fn this_process_is_seen_and_named() {
        let me = std::process::id() as i32;
        let mine = stat(me).expect("own stat");
        assert_eq!(mine.ppid, nix::unistd::getppid().as_raw());
        assert!(all().iter().any(|s| s.pid == me));
        let line = cmdline(me);
        let exe = std::env::args().next().expect("argv[0]");
        assert!(line.starts_with(&exe), "{line}");
    }

    #[test]
    fn pipe_holders_are_found_by_inode() {
        let (read, write) = nix::unistd::pipe().expect("pipe");
        use std::os::fd::AsFd;
        let inode = pipe_inode(read.as_fd()).expect("a pipe");
        assert_eq!(pipe_inode(write.as_fd()), Some(inode));
        let me = std::process::id() as i32;
        assert!(holds_pipe(me, &[inode]));
        drop((read, write));
        assert!(!holds_pipe(me, &[inode]));
        let file = tempfile::tempfile().expect("temp file");
        assert_eq!(pipe_inode(file.as_fd()), None);
    }
}
