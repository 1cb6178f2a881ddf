"""preflight's fork client: what the sandbox starts, in the probe's
namespaces, instead of `python -B driver.py ARGS` when the python executor
forks its probes (src/probe/fork.rs). Its stdin is its socket to the fork
server (`fork_server.py`), the only way to it. It sends its command line,
environment, folder and umask, with `/dev/null` and its stdout and stderr
as the probe's standard streams (a fresh probe's stdin is `/dev/null`),
and waits for the probe's pid: then it exits 0 and so hands its place to
the probe, which the reaper adopts (src/sandbox/reaper.rs). The probe's end
is the reaper's to report, not the client's to imitate. When the server
forks nothing it says why on stderr and exits 3; preflight learns of the
refusal from the server itself and probes afresh. Run with `-I -S`: it
imports nothing but the standard library's core.
"""

import json
import os
import socket
import struct
import sys


def main():
    conn = socket.socket(fileno=os.dup(0))
    null = os.open("/dev/null", os.O_RDONLY)
    os.dup2(null, 0)
    umask = os.umask(0)
    os.umask(umask)
    request = json.dumps({"argv": sys.argv[1:], "env": dict(os.environ),
                          "cwd": os.getcwd(), "umask": umask}).encode()
    socket.send_fds(conn, [struct.pack("!I", len(request))], [null, 1, 2])
    conn.sendall(request)
    line = conn.makefile("r").readline()
    try:
        message = json.loads(line) if line else {}
    except ValueError:
        message = {}
    if "pid" in message:
        return 0
    why = message.get("error") or "the fork server ended before it answered"
    sys.stderr.write("preflight: the fork server forked no probe: %s\n" % why)
    return 3


if __name__ == "__main__":
    sys.exit(main())
