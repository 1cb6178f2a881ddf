//! What a probe may not keep from the process that made it: capabilities
//! (it drops every one, as bubblewrap and nsjail do: the bounding,
//! ambient and inheritable sets, then the permitted and effective ones,
//! and sets `no_new_privs`, so that no `execve` of a set-user-id or
//! file-capability program gives any back), and signal dispositions
//! other than the default.
//!
//! Both run in a forked child before its `execve` (the reaper's child,
//! the fork server), so they make raw system calls only, on values read
//! before the fork.

/// The capability that lets a process drop from its bounding set.
const CAP_SETPCAP: u32 = 8;
/// `_LINUX_CAPABILITY_VERSION_3`: two 32-bit words per set.
const CAPABILITY_VERSION_3: u32 = 0x2008_0522;

#[repr(C)]
struct CapHeader {
    version: u32,
    pid: libc::c_int,
}

#[repr(C)]
#[derive(Clone, Copy)]
struct CapData {
    effective: u32,
    permitted: u32,
    inheritable: u32,
}

/// The highest capability this kernel knows (`cap_last_cap`), read once
/// before any fork; 63 where it cannot be read, so that every one it may
/// know is dropped (dropping one it does not know fails, and is ignored).
pub(crate) fn last_cap() -> u32 {
    static LAST: std::sync::OnceLock<u32> = std::sync::OnceLock::new();
    *LAST.get_or_init(|| {
        std::fs::read_to_string("/proc/sys/kernel/cap_last_cap")
            .ok()
            .and_then(|text| text.trim().parse().ok())
            .unwrap_or(63)
    })
}

/// Drops every capability of the calling process and sets
/// `no_new_privs`; the `errno` of the first call that failed.
///
/// The bounding set is dropped where the process may (it holds
/// `CAP_SETPCAP`, as root does and as a process does in a user namespace
/// it made or joined). One that may not holds no capability to lose, and
/// `no_new_privs` keeps `execve` from granting one.
///
/// # Safety
/// Async-signal-safe: for a child between `fork` and `execve`.
pub(crate) unsafe fn drop_all(last_cap: u32) -> Result<(), i32> {
    unsafe {
        let errno = || *libc::__errno_location();
        // Absent before Linux 4.3: then there is no ambient set to clear.
        if libc::prctl(
            libc::PR_CAP_AMBIENT,
            libc::PR_CAP_AMBIENT_CLEAR_ALL,
            0,
            0,
            0,
        ) < 0
            && errno() != libc::EINVAL
        {
            return Err(errno());
        }
        if holds_setpcap() {
            for cap in 0..=last_cap {
                if libc::prctl(libc::PR_CAPBSET_DROP, cap, 0, 0, 0) < 0 && errno() != libc::EINVAL {
                    return Err(errno());
                }
            }
        }
        let header = CapHeader {
            version: CAPABILITY_VERSION_3,
            pid: 0,
        };
        let none = [CapData {
            effective: 0,
            permitted: 0,
            inheritable: 0,
        }; 2];
        if libc::syscall(libc::SYS_capset, &header, none.as_ptr()) < 0 {
            return Err(errno());
        }
        if libc::prctl(libc::PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) < 0 {
            return Err(errno());
        }
        Ok(())
    }
}

/// Whether the calling process's effective set holds `CAP_SETPCAP`.
///
/// # Safety
/// Async-signal-safe.
unsafe fn holds_setpcap() -> bool {
    let mut header = CapHeader {
        version: CAPABILITY_VERSION_3,
        pid: 0,
    };
    let mut sets = [CapData {
        effective: 0,
        permitted: 0,
        inheritable: 0,
    }; 2];
    let read = unsafe { libc::syscall(libc::SYS_capget, &mut header, sets.as_mut_ptr()) };
    read == 0 && sets[0].effective & (1 << CAP_SETPCAP) != 0
}

/// The kernel's `struct sigaction` on the architectures this builds for:
/// glibc's `sigaction` refuses the two signals it keeps for itself (32
/// and 33), which a parent started by `posix_spawn` hands down ignored.
#[repr(C)]
struct KernelSigaction {
    handler: usize,
    flags: libc::c_ulong,
    restorer: usize,
    mask: u64,
}

/// Sets every signal's disposition to the default and unblocks them all,
/// as a process whose ancestors ignored none starts: an ignored signal
/// survives `execve`, and a probe must start the same however preflight
/// itself was started (a shell's `nohup`, `posix_spawn`'s ignored 32 and
/// 33).
///
/// # Safety
/// Async-signal-safe; for a child between `fork` and `execve` (a handler
/// of the parent's would be lost in the parent too otherwise).
pub unsafe fn default_dispositions() {
    unsafe {
        let mut empty: libc::sigset_t = std::mem::zeroed();
        libc::sigemptyset(&mut empty);
        libc::sigprocmask(libc::SIG_SETMASK, &empty, std::ptr::null_mut());
        let default = KernelSigaction {
            handler: libc::SIG_DFL,
            flags: 0,
            restorer: 0,
            mask: 0,
        };
        for signal in 1..=64 {
            if signal == libc::SIGKILL || signal == libc::SIGSTOP {
                continue;
            }
            libc::syscall(
                libc::SYS_rt_sigaction,
                signal,
                &default,
                std::ptr::null_mut::<KernelSigaction>(),
                std::mem::size_of::<u64>(),
            );
        }
    }
}
