//! The reaper's child, from its fork to its `execve`: its user namespace
//! and id maps where the probe has namespaces, its process group, its
//! privileges dropped, and its gate.

use super::{FAIL_FD, Namespaced, Step, privileges, report_errno, report_failure};
use std::ffi::{CString, OsString};
use std::os::fd::{AsRawFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;

/// Forks the child into a process group of its own (and, in the probe's
/// namespaces, a user namespace of its own) and executes `command` once
/// its gate opens (the returned pipe's write end: one byte opens it, its
/// closing without one ends the child), so that nothing of the command
/// runs before its start is reported; returns its pid and, when the
/// parent sees it under another number, that one. A failure before or at
/// `execve` is reported by the child on [`FAIL_FD`].
///
/// # Safety
/// Only in the reaper, which is single-threaded.
pub(super) unsafe fn fork_child(
    command: &[OsString],
    me: libc::pid_t,
    namespaced: Option<&Namespaced>,
    host_proc: Option<&OwnedFd>,
) -> (libc::pid_t, Option<i32>, OwnedFd) {
    let strings = |items: &mut dyn Iterator<Item = Vec<u8>>| -> Vec<CString> {
        items.filter_map(|bytes| CString::new(bytes).ok()).collect()
    };
    let argv_c = strings(&mut command.iter().map(|a| a.as_bytes().to_vec()));
    let envp_c = strings(&mut std::env::vars_os().map(|(name, value)| {
        let mut pair = name.as_bytes().to_vec();
        pair.push(b'=');
        pair.extend_from_slice(value.as_bytes());
        pair
    }));
    let pointers = |strings: &[CString]| -> Vec<*const libc::c_char> {
        strings
            .iter()
            .map(|s| s.as_ptr())
            .chain(std::iter::once(std::ptr::null()))
            .collect()
    };
    let (argv, envp) = (pointers(&argv_c), pointers(&envp_c));
    let last_cap = privileges::last_cap();
    let pipe = || nix::unistd::pipe2(nix::fcntl::OFlag::O_CLOEXEC);
    // The child tells when its user namespace exists (and its pid as the
    // parent sees it) on this pipe…
    let handshake = namespaced.map(|_| match pipe() {
        Ok(ready) => ready,
        Err(_) => unsafe { report_failure(FAIL_FD, Step::ProbeUserNamespace) },
    });
    // …and waits at its gate for its id maps and its start's report.
    let Ok((gate_r, gate)) = pipe() else {
        unsafe { report_failure(FAIL_FD, Step::ReaperFork) }
    };
    unsafe {
        let pid = libc::fork();
        if pid < 0 {
            report_failure(FAIL_FD, Step::ReaperFork);
        }
        if pid == 0 {
            // Rust's runtime ignores SIGPIPE, and exec keeps ignored signals.
            privileges::default_dispositions();
            libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL);
            if libc::getppid() != me {
                libc::_exit(127);
            }
            libc::close(gate.as_raw_fd());
            if let Some((_, ready)) = &handshake {
                let host_pid = host_proc.map_or(-1, |proc| own_pid_in(proc));
                // Before the user namespace exists: it is made with this
                // as the most its user may hold in it. Never above the hard
                // limit, which only a privileged process may raise.
                let mut nproc: libc::rlimit = std::mem::zeroed();
                libc::getrlimit(libc::RLIMIT_NPROC, &mut nproc);
                let pids = namespaced.map_or(nproc.rlim_max, |ns| ns.pids.min(nproc.rlim_max));
                nproc.rlim_cur = pids;
                nproc.rlim_max = pids;
                if libc::setrlimit(libc::RLIMIT_NPROC, &nproc) < 0 {
                    report_failure(FAIL_FD, Step::ProcessLimit);
                }
                if libc::unshare(libc::CLONE_NEWUSER) < 0 {
                    report_failure(FAIL_FD, Step::ProbeUserNamespace);
                }
                let word = host_pid.to_ne_bytes();
                if libc::write(ready.as_raw_fd(), word.as_ptr().cast(), 4) != 4 {
                    libc::_exit(127);
                }
            }
            let mut byte = 0u8;
            if libc::read(gate_r.as_raw_fd(), (&raw mut byte).cast(), 1) != 1 {
                libc::_exit(127);
            }
            if libc::setpgid(0, 0) < 0 {
                report_failure(FAIL_FD, Step::ProcessGroup);
            }
            // Last, in its own user namespace, where it holds every
            // capability until now (`CAP_SETPCAP` empties its bounding set).
            if let Err(errno) = privileges::drop_all(last_cap) {
                report_errno(FAIL_FD, Step::DropPrivileges, errno);
            }
            if let Some(program) = argv_c.first() {
                libc::execve(program.as_ptr(), argv.as_ptr(), envp.as_ptr());
            }
            report_failure(FAIL_FD, Step::Exec);
        }
        // Also from this side, so that no group signal can come before it.
        libc::setpgid(pid, pid);
        drop(gate_r);
        let Some((ready, ready_w)) = handshake else {
            return (pid, None, gate);
        };
        drop(ready_w);
        let mut word = [0u8; 4];
        let told = nix::unistd::read(&ready, &mut word) == Ok(4);
        if told
            && let Some(ns) = namespaced
            && write_id_maps(pid, ns).is_err()
        {
            libc::kill(pid, libc::SIGKILL);
            report_failure(FAIL_FD, Step::ProbeUserMap);
        }
        let host_pid = i32::from_ne_bytes(word);
        (pid, (told && host_pid > 0).then_some(host_pid), gate)
    }
}

/// This process's pid in the pid namespace of the `/proc` that `proc`
/// refers to: the number its `self` link names; -1 if it cannot be read.
///
/// # Safety
/// Async-signal-safe (one `readlinkat`), for a forked child.
unsafe fn own_pid_in(proc: &OwnedFd) -> i32 {
    let mut buf = [0u8; 16];
    let n = unsafe {
        libc::readlinkat(
            proc.as_raw_fd(),
            c"self".as_ptr(),
            buf.as_mut_ptr().cast(),
            buf.len(),
        )
    };
    if n <= 0 {
        return -1;
    }
    let mut pid: i32 = 0;
    for &digit in &buf[..n as usize] {
        if !digit.is_ascii_digit() {
            return -1;
        }
        pid = pid
            .saturating_mul(10)
            .saturating_add(i32::from(digit - b'0'));
    }
    pid
}

/// Writes the id maps of the child's user namespace: every id to itself
/// when the reaper is root of the machine, else the parent's ids to the
/// reaper's root (the ids they are).
fn write_id_maps(child: libc::pid_t, ns: &Namespaced) -> std::io::Result<()> {
    let (uids, gids) = if ns.identity {
        ("0 0 4294967295\n".to_owned(), "0 0 4294967295\n".to_owned())
    } else {
        (format!("{} 0 1\n", ns.uid), format!("{} 0 1\n", ns.gid))
    };
    std::fs::write(format!("/proc/{child}/uid_map"), uids)?;
    std::fs::write(format!("/proc/{child}/gid_map"), gids)
}
