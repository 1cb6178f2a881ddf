#!/usr/bin/env python3
"""A fleet warming up against one Redis, simulated on this machine.

N nodes, each a real `preflight warmup --lock` process with an outcome
cache of its own, against one real `redis-server` on loopback. Nodes fall
into machine classes of chosen sizes: a class is what the fingerprint says,
made here with the override the fingerprint reads for the NVIDIA driver
(`PREFLIGHT_NVIDIA_DRIVER`), one driver per class. The lock names K kernels
of V cheap pure-Python variants each, in a hub cache made here
(`KERNELS_CACHE`), so that the store, not the probes, is what is measured.

At most `--live` nodes run at once (the rest start as others finish, a
rolling start); `--live N` starts them all together. Measured: probes per
(class, variant), Redis commands per node and in total (INFO commandstats),
peak commands per second (INFO sampled every 100 ms), bytes stored per
entry and in total, each node's wall time (median, p99) against a node
alone, and the CPU time of every node and its probes (wait4) against N
cold nodes alone (N times a node alone, measured once: N cold nodes are
never run), split into what every node pays and what each probe costs
(least squares over the nodes; --json also writes each node's figures).

  scripts/fleet-sim.py --nodes 20 [--classes 20] [--kernels 20]
      [--variants 8] [--live 200] [--deadline 900] [--json FILE]

The binary is target/release/preflight (PREFLIGHT_BIN to choose another),
the probed interpreter .venv/bin/python (--python). Needs redis-server.
Exits 1 when a node fails or gives up on the store ("answering from this
node alone"), a (class, variant) is probed other than once, or the
deadline passes (every process it started is killed then).
"""

import argparse
import json
import os
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SAMPLE_S = 0.1


class Redis:
    """A redis-server of this run on a free loopback port, and a minimal
    RESP client for INFO and the few commands the measurement needs."""

    def __init__(self, work):
        s = socket.socket()
        s.bind(("127.0.0.1", 0))
        self.port = s.getsockname()[1]
        s.close()
        self.proc = subprocess.Popen(
            ["redis-server", "--port", str(self.port), "--bind", "127.0.0.1",
             "--save", "", "--appendonly", "no", "--dir", work,
             "--maxclients", "10000"],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        deadline = time.time() + 10
        while True:
            try:
                self.sock = socket.create_connection(("127.0.0.1", self.port), 1)
                # A thousand nodes on two cores can starve this process.
                self.sock.settimeout(120)
                break
            except OSError:
                if time.time() > deadline:
                    raise SystemExit("redis-server did not answer within 10 s")
                time.sleep(0.05)
        self.file = self.sock.makefile("rb")
        self.lock = threading.Lock()

    def url(self):
        return f"redis://127.0.0.1:{self.port}/0"

    def call(self, *args):
        parts = [f"*{len(args)}\r\n".encode()]
        for a in args:
            a = a if isinstance(a, bytes) else str(a).encode()
            parts.append(b"$%d\r\n%s\r\n" % (len(a), a))
        with self.lock:
            self.sock.sendall(b"".join(parts))
            return self._reply()

    def _reply(self):
        line = self.file.readline()
        kind, rest = line[:1], line[1:-2]
        if kind in (b"+", b":"):
            return int(rest) if kind == b":" else rest.decode()
        if kind == b"-":
            raise RuntimeError(rest.decode())
        if kind == b"$":
            n = int(rest)
            return None if n < 0 else self.file.read(n + 2)[:-2]
        if kind == b"*":
            return [self._reply() for _ in range(int(rest))]
        raise RuntimeError(f"unexpected reply {line!r}")

    def info(self, section):
        text = self.call("INFO", section).decode()
        return dict(l.split(":", 1) for l in text.splitlines() if ":" in l)

    def keys(self, pattern):
        out, cursor = [], 0
        while True:
            cursor, batch = self.call("SCAN", cursor, "MATCH", pattern, "COUNT", 1000)
            out.extend(batch)
            cursor = int(cursor)
            if cursor == 0:
                return out

    def stop(self):
        self.proc.kill()
        self.proc.wait()


def hub(work, kernels, variants):
    """A hub cache of `kernels` kernels of `variants` pure-Python variants,
    and a kernels.lock naming each at its commit."""
    root = os.path.join(work, "hub")
    arch = os.uname().machine
    names = ["torch-universal", "torch-cpu"] + [
        f"torch2{m}-cpu-{arch}-linux" for m in range(variants)]
    lock = []
    for k in range(kernels):
        commit = f"{k + 1:040x}"
        folder = os.path.join(root, f"kernels--sim--k{k:03}")
        for i, v in enumerate(names[:variants]):
            d = os.path.join(folder, "snapshots", commit, "build", v)
            os.makedirs(d)
            with open(os.path.join(d, "__init__.py"), "w") as f:
                f.write("X = 1\n")
            with open(os.path.join(d, "metadata.json"), "w") as f:
                json.dump({"name": f"k{k:03}", "id": f"_sim_k{k:03}_{i}", "version": 1,
                           "license": "MIT", "python-depends": [],
                           "backend": {"type": "cpu"}}, f)
        for ref in ("main", "v1"):
            os.makedirs(os.path.join(folder, "refs"), exist_ok=True)
            with open(os.path.join(folder, "refs", ref), "w") as f:
                f.write(commit)
        lock.append({"dependency": {"repo-id": f"sim/k{k:03}", "version": 1},
                     "lock": {"commit": commit}})
    path = os.path.join(work, "kernels.lock")
    with open(path, "w") as f:
        json.dump(lock, f)
    return root, path


class Fleet:
    """Starts nodes, at most `live` at once, and reaps them with wait4."""

    def __init__(self, args, work, hub_root, lock, secret):
        self.args, self.work, self.hub_root, self.lock, self.secret = (
            args, work, hub_root, lock, secret)
        self.live = {}
        self.done = []

    def command(self, name, driver, url):
        cache = os.path.join(self.work, "nodes", name)
        env = dict(os.environ)
        for k in list(env):
            if k.startswith("PREFLIGHT_REMOTE") or k in ("CUDA_VISIBLE_DEVICES", "PYTHONPATH"):
                del env[k]
        env.update(PREFLIGHT_CACHE=cache, KERNELS_CACHE=self.hub_root,
                   PREFLIGHT_NVIDIA_DRIVER=driver, PREFLIGHT_REMOTE_SECRET_FILE=self.secret)
        if url:
            env["PREFLIGHT_REMOTE"] = url
        argv = [self.args.bin, "warmup", "--lock", self.lock, "--json",
                "--python", self.args.python]
        return argv, env, cache

    def start(self, name, cls, driver, url):
        argv, env, cache = self.command(name, driver, url)
        os.makedirs(cache, exist_ok=True)
        out = open(os.path.join(cache, "stdout.json"), "wb")
        err = open(os.path.join(cache, "stderr.txt"), "wb")
        proc = subprocess.Popen(argv, env=env, stdout=out, stderr=err)
        out.close()
        err.close()
        self.live[proc.pid] = (proc, name, cls, cache, time.monotonic())

    def reap(self, deadline):
        """Wait for one node to end; False when the deadline passed."""
        while True:
            pid, status, usage = os.wait4(-1, os.WNOHANG)
            if pid:
                break
            if time.monotonic() > deadline:
                return False
            time.sleep(0.01)
        proc, name, cls, cache, began = self.live.pop(pid)
        proc.returncode = os.waitstatus_to_exitcode(status)
        self.done.append({
            "name": name, "class": cls, "rc": proc.returncode,
            "wall": time.monotonic() - began,
            "cpu": usage.ru_utime + usage.ru_stime, "cache": cache})
        return True

    def run(self, nodes, url, deadline):
        """Run `nodes` ((name, class, driver) each); False on the deadline."""
        pending = list(nodes)
        while pending or self.live:
            while pending and len(self.live) < self.args.live:
                name, cls, driver = pending.pop(0)
                self.start(name, cls, driver, url)
            if not self.reap(deadline):
                return False
        return True

    def kill(self):
        for proc, *_ in self.live.values():
            proc.kill()
        for proc, *_ in list(self.live.values()):
            proc.wait()


def class_sizes(spec, nodes):
    sizes = [int(s) for s in spec.split(",")]
    if sum(sizes) != nodes or min(sizes) < 1:
        raise SystemExit(f"--classes {spec}: sizes must be positive and add up to --nodes {nodes}")
    return sizes


def sampler(redis, stop, samples):
    """Every 100 ms: (time, connected clients)."""
    while not stop.is_set():
        samples.append((time.monotonic(), int(redis.info("clients")["connected_clients"])))
        stop.wait(SAMPLE_S)


class Monitor:
    """Every command a client sends, from MONITOR: counted by name, by
    second and by connection (a script's own calls, `[0 lua]`, are not
    commands a node sent; neither are this run's own)."""

    def __init__(self, port, own):
        self.sock = socket.create_connection(("127.0.0.1", port), 5)
        self.sock.settimeout(None)
        self.sock.sendall(b"MONITOR\r\n")
        self.file = self.sock.makefile("rb")
        if self.file.readline() != b"+OK\r\n":
            raise SystemExit("MONITOR refused")
        me = self.sock.getsockname()
        self.own = set(own) | {f"{me[0]}:{me[1]}"}
        self.by_name, self.by_second, self.by_client = {}, {}, {}
        self.thread = threading.Thread(target=self.read, daemon=True)
        self.thread.start()

    def read(self):
        for line in self.file:
            # +1700000000.123456 [0 127.0.0.1:5555] "get" "key"
            try:
                stamp, rest = line[1:].split(b" [", 1)
                client, rest = rest.split(b"] ", 1)
                name = rest.split(b'"', 2)[1].decode().lower()
            except (ValueError, IndexError):
                continue
            client = client.decode().split(" ", 1)[-1]
            if client == "lua" or client in self.own:
                continue
            self.by_name[name] = self.by_name.get(name, 0) + 1
            second = int(float(stamp))
            self.by_second[second] = self.by_second.get(second, 0) + 1
            self.by_client[client] = self.by_client.get(client, 0) + 1

    def stop(self):
        self.sock.shutdown(socket.SHUT_RDWR)
        self.thread.join(5)


def percentile(values, p):
    values = sorted(values)
    return values[min(len(values) - 1, int(round(p / 100 * (len(values) - 1))))]


def summary(node):
    with open(os.path.join(node["cache"], "stdout.json"), "rb") as f:
        doc = json.load(f)
    return sum(k["probed"] for k in doc), sum(k["cached"] for k in doc), sum(
        k["variants"] for k in doc)


def arguments():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--nodes", type=int, default=20)
    p.add_argument("--classes", help="sizes of the machine classes, adding up to --nodes "
                   "(default: one class)")
    p.add_argument("--kernels", type=int, default=20)
    p.add_argument("--variants", type=int, default=8)
    p.add_argument("--live", type=int, help="nodes running at once (default: all)")
    p.add_argument("--alone", type=int, default=1, help="runs of a node alone (default 1)")
    p.add_argument("--deadline", type=float, default=900, help="seconds for the whole run")
    p.add_argument("--python", default=os.path.join(ROOT, ".venv/bin/python"))
    p.add_argument("--json", help="write the figures to this file too")
    args = p.parse_args()
    args.bin = os.environ.get("PREFLIGHT_BIN") or os.path.join(ROOT, "target/release/preflight")
    args.live = args.live or args.nodes
    args.sizes = class_sizes(args.classes or str(args.nodes), args.nodes)
    if not 1 <= args.variants <= 12 or args.kernels < 1:
        raise SystemExit("--variants: 1 to 12 (those that load on a CPU); --kernels: 1 or more")
    for path, what in ((args.bin, "the preflight binary (cargo build --release)"),
                       (args.python, "the probed interpreter (scripts/setup-env.sh)")):
        if not os.access(path, os.X_OK):
            raise SystemExit(f"{path}: not found: {what}")
    if not shutil.which("redis-server"):
        raise SystemExit("redis-server not found (Debian: apt-get install -y redis-server)")
    return args


def measure(args, work, redis, deadline):
    """The node alone, then the fleet; the figures."""
    hub_root, lock = hub(work, args.kernels, args.variants)
    secret = os.path.join(work, "secret")
    with open(secret, "w") as f:
        f.write(os.urandom(16).hex())
    drivers = [f"5{50 + c}.54.15" for c in range(len(args.sizes))]

    # A node alone: cold, no remote store.
    alone = Fleet(args, work, hub_root, lock, secret)
    try:
        if not alone.run([(f"alone-{i}", 0, drivers[0]) for i in range(args.alone)], None,
                         deadline):
            raise TimeoutError
    finally:
        alone.kill()
    for node in alone.done:
        if node["rc"] != 0:
            raise SystemExit(f"a node alone failed: {node['cache']}/stderr.txt")
    alone_wall = statistics.median(n["wall"] for n in alone.done)
    alone_cpu = statistics.median(n["cpu"] for n in alone.done)

    # The fleet: classes interleaved, as a rollout does not sort nodes by
    # class.
    redis.call("CONFIG", "RESETSTAT")
    memory_before = int(redis.info("memory")["used_memory"])
    nodes = []
    for c, size in enumerate(args.sizes):
        nodes += [(i, f"c{c}-n{i}", c, drivers[c]) for i in range(size)]
    nodes = [n[1:] for n in sorted(nodes)]
    own = redis.sock.getsockname()
    monitor = Monitor(redis.port, [f"{own[0]}:{own[1]}"])
    stop, samples = threading.Event(), []
    watcher = threading.Thread(target=sampler, args=(redis, stop, samples))
    fleet = Fleet(args, work, hub_root, lock, secret)
    t0 = time.monotonic()
    watcher.start()
    try:
        finished = fleet.run(nodes, redis.url(), deadline)
    finally:
        fleet.kill()
        stop.set()
        watcher.join()
    fleet_wall = time.monotonic() - t0
    if not finished:
        raise TimeoutError
    time.sleep(0.5)
    monitor.stop()
    stats = redis.info("stats")
    memory_after = int(redis.info("memory")["used_memory"])

    failed = [n for n in fleet.done if n["rc"] != 0]
    per_class = {c: {"nodes": 0, "probed": 0, "cached": 0} for c in range(len(args.sizes))}
    warned = 0
    for n in fleet.done:
        if n["rc"] != 0:
            continue
        probed, cached, _ = summary(n)
        row = per_class[n["class"]]
        row["nodes"] += 1
        row["probed"] += probed
        row["cached"] += cached
        with open(os.path.join(n["cache"], "stderr.txt"), "rb") as f:
            warned += b"answering from this node alone" in f.read()
    # Every (class, variant) has one entry, published by a node that probed
    # it: with as many probes as entries in each class, each was probed
    # once.
    entries = redis.keys("preflight:outcomes-v2:*")
    leases = redis.keys("preflight:lease-v2:*")
    by_class, stored = {}, []
    for key in entries:
        value = redis.call("GET", key)
        stored.append(len(value))
        fingerprint = json.loads(json.loads(value)["entry"])["parts"]["fingerprint"]
        by_class[fingerprint] = by_class.get(fingerprint, 0) + 1
    usage = [redis.call("MEMORY", "USAGE", k, "SAMPLES", 0) for k in entries[:100]]
    jobs = args.kernels * args.variants
    once = (not failed and len(by_class) == len(args.sizes)
            and all(v == jobs for v in by_class.values())
            and all(r["probed"] == jobs for r in per_class.values()))
    total = sum(monitor.by_name.values())
    per_connection = sorted(monitor.by_client.values())
    walls = [n["wall"] for n in fleet.done]
    cpu = sum(n["cpu"] for n in fleet.done)
    return {
        "nodes": args.nodes, "classes": args.sizes, "kernels": args.kernels,
        "variants": args.variants, "live": args.live,
        "failed": len(failed), "answered_alone": warned,
        "failed_stderr": [os.path.join(n["cache"], "stderr.txt") for n in failed[:3]],
        "probes_per_class": [per_class[c]["probed"] for c in sorted(per_class)],
        "answered_from_store": sum(r["cached"] for r in per_class.values()),
        "entries": len(entries), "leases_left": len(leases),
        "each_class_variant_probed_once": once,
        "commands": dict(sorted(monitor.by_name.items(), key=lambda kv: -kv[1])),
        "commands_total": total, "commands_per_node": total / args.nodes,
        "commands_per_connection_max": per_connection[-1] if per_connection else 0,
        "peak_commands_per_s": max(monitor.by_second.values(), default=0),
        "peak_clients": max((s[1] for s in samples), default=2) - 2,
        "connections": int(stats["total_connections_received"]) - 1,
        "entry_bytes_median": statistics.median(stored) if stored else 0,
        "entry_memory_usage_median": statistics.median(usage) if usage else 0,
        "used_memory_delta": memory_after - memory_before,
        "wall_median_s": statistics.median(walls), "wall_p99_s": percentile(walls, 99),
        "wall_fleet_s": fleet_wall, "alone_wall_s": alone_wall,
        "cpu_sum_s": cpu, "alone_cpu_s": alone_cpu,
        "cpu_ratio": cpu / (args.nodes * alone_cpu),
        "cpu_floor": len(args.sizes) / args.nodes,
        "cpu_split": cpu_split(fleet.done),
        # Each node's own figures, to see where the fleet's CPU went.
        "per_node": [{"name": n["name"], "rc": n["rc"], "wall_s": round(n["wall"], 3),
                      "cpu_s": round(n["cpu"], 3),
                      "probed": summary(n)[0] if n["rc"] == 0 else None}
                     for n in fleet.done],
    }


def cpu_split(done):
    """A node's CPU as what every node pays (measuring its machine, planning,
    asking Redis, waiting) plus what each probe it ran costs: the least-squares
    line through (probes, CPU) of the nodes that succeeded; None when every
    node probed as many."""
    points = [(summary(n)[0], n["cpu"]) for n in done if n["rc"] == 0]
    if len({p for p, _ in points}) < 2:
        return None
    line = statistics.linear_regression([p for p, _ in points], [c for _, c in points])
    return {"per_node_s": line.intercept, "per_probe_s": line.slope}


def show(f, args):
    jobs = args.kernels * args.variants
    print(f"fleet: {f['nodes']} nodes in {len(f['classes'])} class(es) {f['classes']}, a lock of "
          f"{f['kernels']} kernels x {f['variants']} variants, at most {f['live']} live")
    print(f"  failed nodes: {f['failed']}; nodes that answered alone: {f['answered_alone']}")
    print(f"  probes per class: {f['probes_per_class']} (jobs per class: {jobs}); each (class, "
          f"variant) probed once: {'yes' if f['each_class_variant_probed_once'] else 'NO'}")
    print(f"  answered from the store: {f['answered_from_store']}; entries: {f['entries']}; "
          f"leases left: {f['leases_left']}")
    print(f"  Redis commands sent: {f['commands_total']} ({f['commands_per_node']:.0f} per node, "
          f"at most {f['commands_per_connection_max']} on one connection): "
          + ", ".join(f"{k} {v}" for k, v in f["commands"].items()))
    print(f"  peak commands/s: {f['peak_commands_per_s']}; peak clients: {f['peak_clients']}; "
          f"connections: {f['connections']}")
    print(f"  bytes per entry: {f['entry_bytes_median']:.0f} stored, "
          f"{f['entry_memory_usage_median']:.0f} in memory (MEMORY USAGE); used_memory grew "
          f"{f['used_memory_delta'] / 1024:.0f} KiB")
    print(f"  wall per node: median {f['wall_median_s']:.1f} s, p99 {f['wall_p99_s']:.1f} s "
          f"(a node alone: {f['alone_wall_s']:.1f} s); the whole fleet: {f['wall_fleet_s']:.1f} s")
    print(f"  CPU of every node and its probes: {f['cpu_sum_s']:.1f} s, against {f['nodes']} x "
          f"{f['alone_cpu_s']:.2f} s alone: {f['cpu_ratio']:.3f} (floor: {len(f['classes'])}/"
          f"{f['nodes']} = {f['cpu_floor']:.3f})")
    if f["cpu_split"]:
        print(f"  CPU per node, least squares over the nodes: {f['cpu_split']['per_node_s']:.2f} s "
              f"+ {f['cpu_split']['per_probe_s']:.3f} s per probe it ran (a node alone: "
              f"{f['alone_cpu_s'] / jobs:.3f} s per job, all in)")


def main():
    args = arguments()
    began = time.monotonic()
    work = tempfile.mkdtemp(prefix="fleet-sim.", dir=os.path.join(ROOT, "target"))
    redis = Redis(work)
    try:
        figures = measure(args, work, redis, began + args.deadline)
    except TimeoutError:
        print(f"fleet-sim: the deadline ({args.deadline:.0f} s) passed; every node was killed",
              file=sys.stderr)
        sys.exit(1)
    finally:
        redis.stop()
    figures["elapsed_s"] = time.monotonic() - began
    show(figures, args)
    if args.json:
        with open(args.json, "w") as f:
            json.dump(figures, f, indent=1)
    if (figures["failed"] or figures["answered_alone"]
            or not figures["each_class_variant_probed_once"]):
        for path in figures["failed_stderr"]:
            print(f"fleet-sim: a node failed: {path}", file=sys.stderr)
        print(f"fleet-sim: kept {work}", file=sys.stderr)
        sys.exit(1)
    shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    main()
