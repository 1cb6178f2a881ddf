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

A probe is asked for by a client (`fork_client.py`), which the sandbox
starts in the probe's namespaces as it would start the driver. The client
sends its command line, environment, working directory, umask and its
standard streams; the server forks a helper that joins the client's user,
mount and pid namespaces (one `setns` on a pidfd of the client) and forks
the probe itself there: a new session, the client's resource limits, its
streams, its environment, its folder, then the driver. The helper relays
how the probe ended to the client, which ends the same way. The reaper of
the probe is pid 1 of the namespace the probe runs in: orphans of the
probe go to it, and when it ends the kernel kills what is left.

Control, on stdin/stdout (one line each): the server prints one `ready`
line; `check` is answered with `{"safe": true}` or `{"safe": false,
"why": ...}`; end of stdin ends the server.
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

CLONE_NEWNS = 0x00020000
CLONE_NEWUSER = 0x10000000
CLONE_NEWPID = 0x20000000
NAMESPACES = (("user", CLONE_NEWUSER), ("mnt", CLONE_NEWNS), ("pid", CLONE_NEWPID))
MAX_REQUEST = 16 << 20
SO_PEERPIDFD = getattr(socket, "SO_PEERPIDFD", 77)

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
        try:
            with open("/proc/self/maps") as f:
                fields = [line.split(None, 5) for line in f]
        except OSError:
            return
        paths = {f[5].strip() for f in fields if len(f) == 6}
        for path in paths:
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
    return None


def reply(sock, message):
    data = (json.dumps(message) + "\n").encode()
    try:
        sock.sendall(data)
    except OSError:
        pass


def receive(conn):
    """The client's request: a 4-byte length, the JSON, and its standard
    streams as descriptors."""
    head, fds, _, _ = socket.recv_fds(conn, 4, 3)
    if len(head) != 4 or len(fds) != 3:
        raise ValueError("short request")
    (size,) = struct.unpack("!I", head)
    if size > MAX_REQUEST:
        raise ValueError("request of %d bytes" % size)
    body = b""
    while len(body) < size:
        chunk = conn.recv(size - len(body))
        if not chunk:
            raise ValueError("truncated request")
        body += chunk
    return json.loads(body.decode()), fds


def peer_pidfd(conn, pid):
    """A pidfd of the client that connected. From the socket itself where
    the kernel gives one (SO_PEERPIDFD, Linux 6.5): a process that took the
    pid of a client that died since cannot stand in for it. Else opened
    from the pid the socket names."""
    try:
        return conn.getsockopt(socket.SOL_SOCKET, SO_PEERPIDFD)
    except OSError:
        return os.pidfd_open(pid)


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


def probe(conn, request, fds, limits):
    """In the probe, after the fork: re-enters the sandbox the client was
    given, then runs the driver as `python -B driver.py ARGS` would."""
    import resource

    os.setsid()
    for r, value in limits:
        try:
            resource.setrlimit(r, value)
        except (ValueError, OSError):
            pass
    for target, fd in enumerate(fds):
        os.dup2(fd, target)
    reply(conn, {"pid": os.getpid()})
    keep = {0, 1, 2}
    for fd in os.listdir("/proc/self/fd"):
        fd = int(fd)
        if fd not in keep:
            try:
                os.close(fd)
            except OSError:
                pass
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
    for sig in (signal.SIGCHLD, signal.SIGPIPE, signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
        signal.signal(sig, signal.SIG_DFL)
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


def helper(conn, token):
    """The forked helper: checks the request, joins the client's
    namespaces, forks the probe and relays its end."""
    try:
        creds = conn.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, struct.calcsize("3i"))
        pid, uid, _ = struct.unpack("3i", creds)
        request, fds = receive(conn)
        if request.get("token") != token or uid != os.getuid():
            raise ValueError("a client this server did not expect")
        pidfd = peer_pidfd(conn, pid)
        limits = limits_of(pid)
        join(pid, pidfd)
        os.close(pidfd)
    except (OSError, ValueError) as e:
        reply(conn, {"error": str(e)})
        os._exit(1)
    child = os.fork()
    if child == 0:
        probe(conn, request, fds, limits)
    for fd in fds:
        os.close(fd)
    _, status = os.waitpid(child, 0)
    if os.WIFSIGNALED(status):
        reply(conn, {"signal": os.WTERMSIG(status)})
    else:
        reply(conn, {"exit": os.WEXITSTATUS(status)})
    os._exit(0)


def serve(name, token):
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    listener.bind("\0" + name)
    listener.listen(64)
    control = sys.stdin.buffer
    while True:
        ready, _, _ = select.select([control, listener], [], [], 1.0)
        while True:
            try:
                pid, _ = os.waitpid(-1, os.WNOHANG)
            except ChildProcessError:
                break
            if pid == 0:
                break
        if control in ready:
            line = control.readline()
            if not line:
                return 0
            why = unsafe()
            print(json.dumps({"safe": why is None, "why": why}), flush=True)
        if listener in ready:
            conn, _ = listener.accept()
            why = unsafe()
            if why is not None:
                reply(conn, {"unsafe": why})
                conn.close()
                continue
            if os.fork() == 0:
                listener.close()
                helper(conn, token)
            conn.close()


def main():
    # No parent-death signal: it would fire when the executor's thread that
    # started the server ends, not the executor. The server ends at the end
    # of its stdin instead, which the kernel closes when preflight dies.
    name, token = sys.argv[1], os.environ.pop("PREFLIGHT_FORK_NONCE", "")
    try:
        imported = preload()
    except BaseException as e:
        print(json.dumps({"ready": False, "why": "%s: %s" % (type(e).__name__, e)}), flush=True)
        return 1
    why = unsafe()
    print(json.dumps({"ready": True, "imported": imported, "safe": why is None, "why": why}), flush=True)
    return serve(name, token)


if __name__ == "__main__":
    sys.exit(main())
