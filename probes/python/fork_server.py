"""preflight's fork server: one per (interpreter, environment), started by
the python executor (src/probe/fork.rs). It imports what the hub loader's
caller has imported before `get_kernel` (torch when installed, `kernels`
when installed) and nothing else, then forks one child per probe.

It never queries a device (no `torch.cuda.is_available()`, no Triton
driver, no hub arch check: a CUDA context made here poisons every forked
child), never runs a workload (an OpenMP pool started here hangs forked
children) and starts no thread of its own. Before every fork it checks
that it runs one thread (`unsafe()`); when it does not, it says so and
forks nothing: the executor then starts fresh processes.

One kind of thread its imports start is allowed, because it can be stopped
before the fork and started again in the child exactly as a fresh process
starts it: the workers of an OpenBLAS pool (`Pools`). numpy's wheel loads
its OpenBLAS when imported (torch imports numpy where it is installed, so
does transformers), and OpenBLAS starts its workers when it is loaded
(`blas_thread_init`, sized from OPENBLAS_NUM_THREADS, GOTO_NUM_THREADS,
OMP_NUM_THREADS and the CPUs the process may run on). The server stops
them with OpenBLAS's own `blas_thread_shutdown_` (what its fork handler
runs), counts its threads again, and the probe starts them again with
`blas_thread_init`: the same pool size, the same threads, before the driver
runs. Other pools need no exception: OpenMP (libgomp, torch's own), MKL and
torch's intra- and inter-op pools start on the first parallel region, and
the server runs none. Any other thread still refuses the fork, named.
Pools read their size when they are loaded: the server's environment is
the one every probe starts from (src/probe/fork.rs) and its CPUs are
preflight's, as a fresh probe's are, so the sizes are a fresh probe's.

A probe is asked for by preflight, not by anyone who finds the server:
the server has no name. Its stdin is a `SOCK_SEQPACKET` socket whose other
end only preflight holds (src/probe/fork.rs); each message on it is one
JSON object: `{"check": true}`, answered on stdout with `{"safe": true}` or
`{"safe": false, "why": ...}`, or `{"probe": ID}` carrying the server's end
of a socket pair made for that one probe, whose other end the sandbox gives
the client (`fork_client.py`) as its stdin. For each such request the
server forks one helper, which reads one request from the client within
`RECEIVE_WITHIN` (its command line, environment, working directory, umask
and standard streams; the client's pid and uid from the kernel's
credentials, never from what it says), joins the client's user, mount and
pid namespaces (one `setns` on a pidfd of the client), and forks the probe
there through a first child that stops it, hands it over and ends: the
probe, orphaned, is reparented to pid 1 of its namespace, the probe's
reaper, which adopts it as its child when the client exits 0
(src/sandbox/reaper.rs) and lets it go on. From there its parent is the
reaper as a fresh probe's is, and its end (an exit, a signal, SIGKILL
included) is the reaper's to report. What the helper did is said on the
server's stdout, `{"id": ID, "forked": true}` or `{"id": ID, "refused":
why}`, before the client hears of it: no probe can write there. The
helper then ends. Every helper dies with the server (a parent-death
signal), and the server ends at the end of its stdin (preflight ended);
at most `MAX_HELPERS` are in flight. The server prints one `ready` line
first.
"""

import ctypes
import importlib
import importlib.util
import json
import os
import select
import signal
import socket
import struct
import sys
import threading
import time

CLONE_NEWNS = 0x00020000
CLONE_NEWUSER = 0x10000000
CLONE_NEWPID = 0x20000000
NAMESPACES = (("user", CLONE_NEWUSER), ("mnt", CLONE_NEWNS), ("pid", CLONE_NEWPID))
MAX_REQUEST = 16 << 20
# How long a client has to send its whole request (it starts, a few
# milliseconds, then writes it at once).
RECEIVE_WITHIN = 10.0
# Helpers in flight at once (each lives for one request, milliseconds).
MAX_HELPERS = 64
SO_PASSCRED = getattr(socket, "SO_PASSCRED", 16)
SCM_CREDENTIALS = getattr(socket, "SCM_CREDENTIALS", 2)
PR_SET_PDEATHSIG = 1

libc = ctypes.CDLL(None, use_errno=True)


def preload():
    """The modules the hub loader's caller has imported: torch first (the
    hub's own validators import it to find the backend), then `kernels`,
    then those named by PREFLIGHT_FORK_PRELOAD (comma-separated: what a
    program imports before it loads kernels). Only those installed."""
    names = ["torch", "kernels"]
    names += [n for n in os.environ.pop("PREFLIGHT_FORK_PRELOAD", "").split(",") if n]
    imported = []
    for name in names:
        if importlib.util.find_spec(name) is None:
            continue
        importlib.import_module(name)
        imported.append(name)
    return imported


def threads():
    """The threads of this process, as the kernel counts them (a thread a
    C extension started is not in `threading`'s list)."""
    try:
        return len(os.listdir("/proc/self/task"))
    except OSError:
        return threading.active_count()


def thread_names():
    """The names of this process's threads (their `comm`)."""
    names = []
    for tid in sorted(os.listdir("/proc/self/task"), key=int):
        try:
            with open("/proc/self/task/%s/comm" % tid) as f:
                names.append(f.read().strip())
        except OSError:
            pass
    return names


class OpenBLAS:
    """An OpenBLAS this process has loaded (numpy's `scipy_openblas`,
    scipy's: each its own copy and pool), reached by the symbols every
    pthreads build exports whatever prefix its public API was given."""

    def __init__(self, lib):
        self.shutdown = lib.blas_thread_shutdown_
        self.init = lib.blas_thread_init
        self.avail = ctypes.c_int.in_dll(lib, "blas_server_avail")
        self.started = False

    @classmethod
    def of(cls, path):
        try:
            lib = ctypes.CDLL(path, mode=os.RTLD_NOLOAD | os.RTLD_LAZY)
            return cls(lib)
        except (OSError, ValueError, AttributeError):
            # Not loaded under this path, or without the pool's symbols:
            # not recognised, its threads refuse the fork.
            return None

    def stop(self):
        if self.avail.value:
            # Its pool ran once the server's imports were done, as it does
            # in a fresh process after the same imports.
            self.started = True
            self.shutdown()

    def restart(self):
        if self.started and not self.avail.value:
            self.init()


class Pools:
    """The thread pools the server stops before a fork and the probe
    starts again after it: OpenBLAS's, found by the libraries mapped in
    this process."""

    def __init__(self):
        self.known = {}

    def find(self):
        for path in mapped():
            if "openblas" in os.path.basename(path).lower() and path not in self.known:
                self.known[path] = OpenBLAS.of(path)

    def stop(self):
        self.find()
        for pool in self.known.values():
            if pool is not None:
                pool.stop()

    def restart(self):
        for pool in self.known.values():
            if pool is not None:
                pool.restart()

    def describe(self):
        names = [os.path.basename(p) for p, pool in sorted(self.known.items()) if pool is not None]
        return ", ".join(names) or "none loaded"


POOLS = Pools()


def mapped():
    """The files mapped in this process (its loaded libraries)."""
    try:
        with open("/proc/self/maps") as f:
            fields = [line.split(None, 5) for line in f]
    except OSError:
        return set()
    return {f[5].strip() for f in fields if len(f) == 6}


def unsafe():
    """Why forking now would give a child a state a fresh process does not
    have, or None. Stops the pools the server recognises first."""
    POOLS.stop()
    if threading.active_count() != 1 or threads() != 1:
        names = thread_names()
        return "the fork server runs %d threads (%s) besides the OpenBLAS pools it stops (%s)" % (
            max(threading.active_count(), len(names)),
            ", ".join(names),
            POOLS.describe(),
        )
    torch = sys.modules.get("torch")
    cuda = getattr(torch, "cuda", None)
    initialized = getattr(cuda, "is_initialized", None)
    if initialized is not None and initialized():
        return "the fork server holds a CUDA context (torch.cuda is initialized)"
    # torch.cuda.is_available() and device_count() call cuInit without
    # marking torch.cuda initialized; a child forked after any cuInit gets
    # CUDA error 3 from its first call. The driver is loaded only to start.
    driver = sorted(p for p in mapped() if os.path.basename(p).startswith("libcuda.so"))
    if driver:
        return "the fork server has the CUDA driver loaded (%s): an import started it" % driver[0]
    return None


def reply(sock, message):
    data = (json.dumps(message) + "\n").encode()
    try:
        sock.sendall(data)
    except OSError:
        pass


def say(message):
    """One line on the server's stdout, read by preflight alone: one
    `write`, whole (under PIPE_BUF), whichever process of the server says
    it."""
    os.write(1, (json.dumps(message) + "\n").encode())


def receive(conn):
    """The client's request: a 4-byte length and its standard streams as
    descriptors (with the kernel's record of who sent them), then the
    JSON. Within RECEIVE_WITHIN in all. Returns the request, the three
    descriptors and the sender's pid and uid."""
    deadline = time.monotonic() + RECEIVE_WITHIN

    def left():
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            raise ValueError("no whole request within %.0f s" % RECEIVE_WITHIN)
        return remaining

    conn.settimeout(left())
    space = socket.CMSG_SPACE(3 * 4) + socket.CMSG_SPACE(struct.calcsize("3i"))
    head, ancillary, flags, _ = conn.recvmsg(4, space)
    fds, creds = [], None
    for level, kind, data in ancillary:
        if level == socket.SOL_SOCKET and kind == socket.SCM_RIGHTS:
            fds += list(struct.unpack("%di" % (len(data) // 4), data[: len(data) - len(data) % 4]))
        elif level == socket.SOL_SOCKET and kind == SCM_CREDENTIALS:
            creds = struct.unpack("3i", data[: struct.calcsize("3i")])
    try:
        if flags & socket.MSG_CTRUNC or len(head) != 4 or len(fds) != 3 or creds is None:
            raise ValueError("not a request")
        (size,) = struct.unpack("!I", head)
        if size > MAX_REQUEST:
            raise ValueError("request of %d bytes" % size)
        body = b""
        while len(body) < size:
            conn.settimeout(left())
            chunk = conn.recv(size - len(body))
            if not chunk:
                raise ValueError("truncated request")
            body += chunk
        request = json.loads(body.decode())
        if not isinstance(request, dict):
            raise ValueError("not a request")
    except BaseException:
        for fd in fds:
            os.close(fd)
        raise
    pid, uid, _ = creds
    return request, fds, pid, uid


def join(pid, pidfd):
    """Joins the namespaces of the client (`pid`, held by `pidfd`) that are
    not this process's own: the probe forked after this lives in them,
    below the client's reaper."""
    flags = 0
    for name, flag in NAMESPACES:
        if os.stat("/proc/self/ns/" + name).st_ino != os.stat("/proc/%d/ns/%s" % (pid, name)).st_ino:
            flags |= flag
    if flags & CLONE_NEWPID == 0:
        # A probe outside the reaper's pid namespace would not be held by it.
        raise OSError("the client runs in no pid namespace of its own")
    # What was read through the pid is the client's only if the client is
    # still alive now (while it lives, no other process can have its pid).
    signal.pidfd_send_signal(pidfd, 0)
    if libc.setns(pidfd, flags) != 0:
        err = ctypes.get_errno()
        raise OSError(err, "setns: " + os.strerror(err))


def limits_of(pid):
    import resource

    return [(r, resource.prlimit(pid, r)) for r in (getattr(resource, n) for n in dir(resource) if n.startswith("RLIMIT_"))]


def probe(request, fds, limits):
    """In the probe, after the fork: re-enters the sandbox the client was
    given, stops until the reaper adopted it, then runs the driver as
    `python -B driver.py ARGS` would."""
    import resource

    os.setsid()
    for r, value in limits:
        try:
            resource.setrlimit(r, value)
        except (ValueError, OSError):
            pass
    for target, fd in enumerate(fds):
        os.dup2(fd, target)
    keep = {0, 1, 2}
    for fd in os.listdir("/proc/self/fd"):
        fd = int(fd)
        if fd not in keep:
            try:
                os.close(fd)
            except OSError:
                pass
    # Nothing of the kernel has run yet: the process that forked this one
    # ends once it is stopped, and the reaper it is reparented to adopts it
    # and continues it (src/sandbox/reaper.rs).
    os.kill(os.getpid(), signal.SIGSTOP)
    os.umask(request["umask"])
    os.environ.clear()
    os.environ.update(request["env"])
    os.chdir(request["cwd"])
    argv = request["argv"]
    sys.argv = argv
    sys.path[0] = os.path.dirname(os.path.abspath(argv[0]))
    sys.dont_write_bytecode = True
    # A fresh interpreter seeds `random` from the system; a forked one would
    # repeat the server's sequence in every child.
    if "random" in sys.modules:
        sys.modules["random"].seed()
    # The dispositions a fresh interpreter starts with: its own SIGINT
    # handler (KeyboardInterrupt), SIGPIPE and SIGXFSZ ignored, the rest
    # the default.
    for sig in (signal.SIGCHLD, signal.SIGTERM, signal.SIGHUP):
        signal.signal(sig, signal.SIG_DFL)
    for sig in (signal.SIGPIPE, signal.SIGXFSZ):
        signal.signal(sig, signal.SIG_IGN)
    signal.signal(signal.SIGINT, signal.default_int_handler)
    signal.pthread_sigmask(signal.SIG_SETMASK, [])
    # The workers a fresh process's OpenBLAS started when it was loaded,
    # started again under the probe's limits.
    POOLS.restart()
    import runpy

    code = 0
    try:
        runpy.run_path(argv[0], run_name="__main__")
    except SystemExit as e:
        code = e.code if isinstance(e.code, int) else (0 if e.code is None else 1)
        if not isinstance(e.code, (int, type(None))):
            sys.stderr.write("%s\n" % e.code)
    except BaseException:
        import traceback

        traceback.print_exc()
        code = 1
    # What the interpreter does at exit that a program loading the kernel
    # would wait for or die of still happens: threads that are not daemons
    # are joined, `atexit` handlers run. Its teardown of every module (0.6-
    # 1.3 s with torch) and C-level exit handlers do not (docs/forked.md).
    threading._shutdown()
    import atexit

    atexit._run_exitfuncs()
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except Exception:
            pass
    os._exit(code & 0xFF)


class Handoff(BaseException):
    """Raised in the probe right after its fork, caught at the bottom of
    the stack (`__main__`): the probe runs with none of the server's frames
    under it, so a traceback it prints (faulthandler's on a crash) is a
    fresh probe's but for the frame that runs the driver."""


def hand_over(request, fds, limits, report):
    """The first child in the client's namespaces: forks the probe, waits
    until it stopped itself, says its pid (as the namespace numbers it) on
    `report` and ends, which leaves the probe to the reaper."""
    child = os.fork()
    if child == 0:
        os.close(report)
        raise Handoff(request, fds, limits)
    _, status = os.waitpid(child, os.WUNTRACED)
    if os.WIFSTOPPED(status):
        os.write(report, b"%d" % child)
    os._exit(0)


def helper(conn, request_id, server):
    """The forked helper, for one request: reads it, checks who sent it,
    joins the client's namespaces, has the probe forked there and handed
    over, says what it did, and ends."""
    libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL)
    if os.getppid() != server:
        os._exit(1)
    fds = []
    try:
        request, fds, pid, uid = receive(conn)
        if uid != os.getuid():
            raise ValueError("a client of another user (uid %d)" % uid)
        pidfd = os.pidfd_open(pid)
        limits = limits_of(pid)
        join(pid, pidfd)
        os.close(pidfd)
        report, told = os.pipe()
        first = os.fork()
        if first == 0:
            os.close(report)
            hand_over(request, fds, limits, told)
        os.close(told)
        os.waitpid(first, 0)
        probe_pid = os.read(report, 32)
        if not probe_pid:
            raise ValueError("the probe ended before it was handed over")
    except (OSError, ValueError) as e:
        why = "%s: %s" % (type(e).__name__, e) if isinstance(e, OSError) else str(e)
        say({"id": request_id, "refused": why})
        reply(conn, {"error": why})
        os._exit(1)
    for fd in fds:
        os.close(fd)
    say({"id": request_id, "forked": True})
    reply(conn, {"pid": int(probe_pid)})
    os._exit(0)


def serve():
    control = socket.socket(fileno=0)
    server = os.getpid()
    helpers = set()
    while True:
        select.select([control], [], [], 1.0)
        while helpers:
            try:
                pid, _ = os.waitpid(-1, os.WNOHANG)
            except ChildProcessError:
                helpers.clear()
                break
            if pid == 0:
                break
            helpers.discard(pid)
        try:
            message, fds, _, _ = socket.recv_fds(control, 4096, 1, socket.MSG_DONTWAIT)
        except BlockingIOError:
            continue
        if not message:
            # Preflight ended: so do the helpers (their parent-death signal).
            return 0
        conn = socket.socket(fileno=fds[0]) if fds else None
        try:
            asked = json.loads(message.decode())
        except ValueError:
            asked = {}
        if asked.get("check"):
            why = unsafe()
            say({"safe": why is None, "why": why})
        if "probe" in asked and conn is not None:
            why = unsafe()
            if why is None and len(helpers) >= MAX_HELPERS:
                why = "%d probes are being handed over already" % len(helpers)
            if why is not None:
                say({"id": asked["probe"], "refused": why})
                reply(conn, {"error": why})
            else:
                pid = os.fork()
                if pid == 0:
                    control.close()
                    helper(conn, asked["probe"], server)
                helpers.add(pid)
        if conn is not None:
            conn.close()


def main():
    # No parent-death signal: it would fire when the executor's thread that
    # started the server ends, not the executor. The server ends at the end
    # of its stdin instead, which the kernel closes when preflight dies.
    try:
        imported = preload()
    except BaseException as e:
        say({"ready": False, "why": "%s: %s" % (type(e).__name__, e)})
        return 1
    why = unsafe()
    say({"ready": True, "imported": imported, "safe": why is None, "why": why})
    return serve()


if __name__ == "__main__":
    handoff = None
    try:
        code = main()
    except Handoff as handed:
        handoff = handed.args
    # Outside the handler: no exception of the kernel's has this one as
    # its context.
    if handoff is not None:
        probe(*handoff)
    sys.exit(code)
