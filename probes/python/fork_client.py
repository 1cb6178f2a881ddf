"""preflight's fork client: what the sandbox starts, in the probe's
namespaces, instead of `python -B driver.py ARGS` when the python executor
forks its probes (src/probe/fork.rs). It asks the fork server named by
PREFLIGHT_FORK_SERVER for the probe (`fork_server.py`), hands over its
command line, environment, folder and standard streams, forwards the
sandbox's SIGTERM to the probe's process group, and ends the way the probe
ended. Run with `-I -S`: it imports nothing but the standard library's core.
"""

import json
import os
import signal
import socket
import struct
import sys

REFUSED = "preflight_fork_refused"


def main():
    name = os.environ.pop("PREFLIGHT_FORK_SERVER")
    token = os.environ.pop("PREFLIGHT_FORK_NONCE")
    probe = []

    def forward(sig, _frame):
        if probe:
            try:
                os.killpg(probe[0], sig)
            except OSError:
                pass

    for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
        signal.signal(sig, forward)
    umask = os.umask(0)
    os.umask(umask)
    request = json.dumps({"token": token, "argv": sys.argv[1:], "env": dict(os.environ),
                          "cwd": os.getcwd(), "umask": umask}).encode()
    conn = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    conn.connect("\0" + name)
    socket.send_fds(conn, [struct.pack("!I", len(request))], [0, 1, 2])
    conn.sendall(request)
    reader = conn.makefile("r")
    while True:
        try:
            line = reader.readline()
        except InterruptedError:
            continue
        if not line:
            return fault("the fork server ended before the probe did")
        message = json.loads(line)
        if "pid" in message:
            probe.append(message["pid"])
        elif "exit" in message:
            return message["exit"]
        elif "signal" in message:
            signal.signal(message["signal"], signal.SIG_DFL)
            signal.pthread_sigmask(signal.SIG_UNBLOCK, [message["signal"]])
            os.kill(os.getpid(), message["signal"])
            return 128 + message["signal"]
        else:
            return fault("the fork server refused the probe: %s" % (message.get("unsafe") or message.get("error")))


def fault(why):
    """No probe ran: the executor finds why in REFUSED and probes afresh."""
    with open(REFUSED, "w") as out:
        out.write(why)
    return 3


if __name__ == "__main__":
    sys.exit(main())
