"""preflight's bench mode of the python executor (loaded by the driver from
the sandbox directory when it is given `--bench`).

The child stays alive across rounds. It verifies the workload first (the
smoke file's expected value, or `verify_<workload>` of the hub's benchmark
convention), warms it up so that compilation, autotuning, library handles
and allocations never land in a sample, announces itself with a `bench`
event, then waits for commands on the FIFO named by `--commands`, one JSON
line each: `{"round": N, "samples": K}` runs K timed samples and writes one
`sample` event for each, then a line on the FIFO named by `--replies` (only
to wake the parent; the facts are in the channel); with `"bare": true` it
makes the K calls in a bare loop instead, timed as one, and writes one
sample of their mean (the baseline of the harness's own overhead). End of file (the parent closed its end) ends the
run: the workload is verified once more, and the driver writes `done`.

Timer: a pair of `torch.cuda.Event`s around each call where torch drives a
CUDA device, with no host synchronisation between them and, unless
`--flush no`, a write of a buffer twice the size of the L2 cache before
each sample so that no sample reads what the previous one left there;
`time.perf_counter_ns` (after a device synchronise) everywhere else, with
the process's CPU time over the same call beside it. Where
NVML can be loaded (`libnvidia-ml.so.1`, through ctypes) each sample
carries the SM clock and the clock-event reasons, and is marked throttled
when one of them is a slowdown.
"""

import ctypes
import json
import os
import sys
import time

from preflight_compare import check_close
import preflight_smoke_sources as smoke

# Warm-up: at least this many calls and this much time.
WARMUP_CALLS = 3
WARMUP_SECONDS = 0.1

# NVML clock-event reasons that slow the clock down: a software power cap,
# a hardware slowdown, software and hardware thermal limits, a power brake.
# (Idle, application clocks and display clocks are not slowdowns.)
THROTTLING = 0x4 | 0x8 | 0x20 | 0x40 | 0x80
NVML_CLOCK_SM = 1


# ---------------------------------------------------------------- events


def ev_bench(label, role, timer, flush_bytes, nvml, warmup_calls, estimate_ms, has_reference, exclusive=False):
    event = {"event": "bench", "label": label, "role": role, "timer": timer,
             "flush_bytes": int(flush_bytes), "nvml": bool(nvml),
             "warmup_calls": int(warmup_calls), "estimate_ms": float(estimate_ms),
             "has_reference": bool(has_reference)}
    if exclusive:
        event["exclusive"] = True
    return event


def ev_sample(label, round_, ms, cpu_ms=None, clock=None):
    event = {"event": "sample", "label": label, "round": int(round_), "ms": float(ms)}
    if cpu_ms is not None:
        event["cpu_ms"] = float(cpu_ms)
    if clock is not None:
        mhz, reasons = clock
        event["sm_clock_mhz"] = int(mhz)
        event["throttle_reasons"] = int(reasons)
        if reasons & THROTTLING:
            event["throttled"] = True
    return event


# ---------------------------------------------------------------- workloads


class Workload:
    """What one bench child times: `run` (the variant's call) or
    `reference`, with `verify` checking the variant's result."""

    def __init__(self, label, run, verify, reference=None):
        self.label = label
        self.run = run
        self.verify = verify
        self.reference = reference


def from_smoke_file(path, kernel, device):
    """A smoke file's `smoke(kernel, device)`, timed whole; verified by
    what it returns."""
    function = smoke.smoke_function(path)

    def run():
        return function(kernel, device)

    def verify():
        result = run()
        smoke.synchronize(device)
        comparison = smoke.unpack(result)
        if comparison is None:
            return False
        check_close(*comparison)
        return True

    return Workload("smoke", run, verify)


def from_benchmarks(bench_dir, repo, kernel, device, wanted):
    """Workload `wanted` (`benchmark_<wanted>`) of the first Benchmark class
    that has it, or the smallest workload of the first class: its
    `benchmark_<w>` is timed, its `verify_<w>` is the reference."""
    classes = smoke.benchmark_classes(bench_dir, repo)
    for cls in classes:
        workload = wanted if wanted is not None else smoke.smallest_workload(cls)
        if workload is not None and callable(getattr(cls, "benchmark_" + workload, None)):
            break
    else:
        names = sorted({n[len("benchmark_"):] for c in classes for n in dir(c) if n.startswith("benchmark_")})
        raise smoke.SmokeError(
            "no workload %s in %s (workloads: %s)" % (wanted, bench_dir, ", ".join(names) or "none")
            if wanted is not None
            else "no Benchmark subclass with a benchmark_<workload> method in %s" % bench_dir
        )
    bench = smoke.prepare(cls, workload, kernel, device)
    run = getattr(bench, "benchmark_" + workload)
    reference = getattr(bench, "verify_" + workload, None)

    def verify():
        if reference is None:
            return False
        run()
        smoke.synchronize(device)
        smoke.check_benchmark(bench, reference())
        return True

    return Workload("%s.%s" % (cls.__name__, workload), run, verify, reference)


# ---------------------------------------------------------------- timing


class Clock:
    """Device events with an L2 flush on CUDA, the host clock elsewhere."""

    def __init__(self, device, flush):
        self.device = device
        self.flush_buffer = None
        self.events = None
        self.stream = None
        torch = sys.modules.get("torch")
        if torch is not None and device.startswith("cuda") and torch.cuda.is_available():
            self.stream = smoke.stream_of(torch, device)
            self.events = (torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True))
            if flush:
                props = torch.cuda.get_device_properties(torch.device(device))
                l2 = int(getattr(props, "L2_cache_size", 0) or 0) or 64 << 20
                self.flush_buffer = torch.empty(2 * l2 // 4, dtype=torch.int32, device=device)

    @property
    def timer(self):
        return "device_events" if self.events else "host_clock"

    @property
    def flush_bytes(self):
        buffer = self.flush_buffer
        return 0 if buffer is None else buffer.numel() * buffer.element_size()

    def sample(self, call):
        """Milliseconds of one call, and the CPU time this process spent
        in it (host clock only: what other load on the machine cannot
        lengthen, though it counts every thread's time)."""
        if self.events:
            start, end = self.events
            if self.flush_buffer is not None:
                self.flush_buffer.zero_()
            start.record(self.stream)
            call()
            end.record(self.stream)
            end.synchronize()
            return float(start.elapsed_time(end)), None
        cpu = time.process_time_ns()
        begin = time.perf_counter_ns()
        call()
        smoke.synchronize(self.device)
        end = time.perf_counter_ns()
        return (end - begin) / 1e6, (time.process_time_ns() - cpu) / 1e6


class Nvml:
    """The SM clock and clock-event reasons of one device, through
    libnvidia-ml loaded at run time; `None` where it cannot be loaded."""

    @staticmethod
    def open(device):
        torch = sys.modules.get("torch")
        if torch is None or not device.startswith("cuda"):
            return None
        try:
            lib = ctypes.CDLL("libnvidia-ml.so.1")
            if lib.nvmlInit_v2() != 0:
                return None
            index = torch.device(device).index
            index = torch.cuda.current_device() if index is None else index
            props = torch.cuda.get_device_properties(index)
            handle = ctypes.c_void_p()
            found = -1
            if hasattr(props, "pci_bus_id"):
                bus = b"%08x:%02x:%02x.0" % (props.pci_domain_id, props.pci_bus_id, props.pci_device_id)
                found = lib.nvmlDeviceGetHandleByPciBusId_v2(bus, ctypes.byref(handle))
            if found != 0:
                found = nvml_handle(lib, index, handle)
            if found != 0:
                return None
            reasons = getattr(lib, "nvmlDeviceGetCurrentClocksEventReasons", None) or getattr(
                lib, "nvmlDeviceGetCurrentClocksThrottleReasons"
            )
            nvml = Nvml(lib, handle, reasons)
            return nvml if nvml.read() is not None else None
        except (OSError, AttributeError, RuntimeError):
            return None

    def __init__(self, lib, handle, reasons):
        self.lib, self.handle, self.reasons = lib, handle, reasons

    def exclusive(self):
        """Whether the device admits one process's context at a time
        (NVML_COMPUTEMODE_EXCLUSIVE_PROCESS): the parent then times each
        participant alone."""
        mode = ctypes.c_uint()
        get = getattr(self.lib, "nvmlDeviceGetComputeMode", None)
        return get is not None and get(self.handle, ctypes.byref(mode)) == 0 and mode.value == 3

    def read(self):
        mhz, reasons = ctypes.c_uint(), ctypes.c_ulonglong()
        if self.lib.nvmlDeviceGetClockInfo(self.handle, NVML_CLOCK_SM, ctypes.byref(mhz)) != 0:
            return None
        if self.reasons(self.handle, ctypes.byref(reasons)) != 0:
            return None
        return mhz.value, reasons.value


def nvml_handle(lib, ordinal, handle):
    """NVML's handle of CUDA device `ordinal` into `handle` (an NVML
    status, 0 when found). NVML numbers the machine's GPUs, ignoring
    CUDA_VISIBLE_DEVICES; CUDA numbers the entries of that list: entry
    `ordinal` is the GPU, by NVML index or by UUID. An entry NVML cannot
    take (a MIG instance) finds nothing, rather than another GPU."""
    visible = os.environ.get("CUDA_VISIBLE_DEVICES")
    if visible is None:
        return lib.nvmlDeviceGetHandleByIndex_v2(ordinal, ctypes.byref(handle))
    entries = [e.strip() for e in visible.split(",")]
    entry = entries[ordinal] if ordinal < len(entries) else ""
    if entry.isdigit():
        return lib.nvmlDeviceGetHandleByIndex_v2(int(entry), ctypes.byref(handle))
    if entry.startswith("GPU-"):
        return lib.nvmlDeviceGetHandleByUUID(entry.encode(), ctypes.byref(handle))
    return -1


def warm_up(clock, call):
    """Calls until both minimums are met; the median of the second half
    estimates one sample (the parent sizes its rounds by it)."""
    times, begin = [], time.perf_counter()
    while len(times) < WARMUP_CALLS or time.perf_counter() - begin < WARMUP_SECONDS:
        times.append(clock.sample(call)[0])
    tail = sorted(times[len(times) // 2:])
    return len(times), tail[len(tail) // 2]


# ---------------------------------------------------------------- serving


def serve(chan, args, kernel, device):
    """Verify, warm up, then time rounds on command until end of file.
    Returns the depth reached, as the smoke would."""
    role = args.bench
    if role not in ("variant", "reference"):
        raise smoke.SmokeError("--bench %s: expected variant or reference" % role)
    if args.smoke:
        workload = from_smoke_file(args.smoke, kernel, device)
    elif args.benchmarks:
        workload = from_benchmarks(args.benchmarks, args.repo or args.variant, kernel, device, args.workload)
    else:
        raise smoke.SmokeError("nothing to time: no smoke file and no benchmarks/ scripts")
    call = workload.run if role == "variant" else workload.reference
    if call is None:
        raise smoke.SmokeError("%s has no reference to time" % workload.label)
    chan.enter("verify", what=workload.label)
    verified = workload.verify()
    chan.enter("launch", what="warm-up %s" % workload.label)
    clock = Clock(device, args.flush != "no")
    nvml = Nvml.open(device)
    calls, estimate = warm_up(clock, call)
    label = workload.label if role == "variant" else "reference:" + workload.label
    chan.enter("launch", what="rounds %s" % label)
    replies = os.open(args.replies, os.O_WRONLY)
    chan.send(ev_bench(label, role, clock.timer, clock.flush_bytes, nvml is not None, calls, estimate,
                       workload.reference is not None, nvml is not None and nvml.exclusive()))
    os.write(replies, b"ready\n")
    with open(args.commands, "r") as commands:
        while True:
            line = commands.readline()
            if not line:
                break
            command = json.loads(line)
            round_, samples = int(command["round"]), int(command["samples"])
            if command.get("bare"):
                # The same calls in a bare loop, timed as one: what the
                # harness's overhead per sample is measured against.
                cpu, begin = time.process_time_ns(), time.perf_counter_ns()
                for _ in range(samples):
                    call()
                smoke.synchronize(device)
                total_ms = (time.perf_counter_ns() - begin) / 1e6
                cpu_ms = (time.process_time_ns() - cpu) / 1e6
                chan.send(ev_sample("bare:" + label, round_, total_ms / samples, cpu_ms / samples))
                os.write(replies, b"%d\n" % round_)
                continue
            for _ in range(samples):
                ms, cpu_ms = clock.sample(call)
                chan.send(ev_sample(label, round_, ms, cpu_ms, nvml.read() if nvml else None))
            os.write(replies, b"%d\n" % round_)
    if verified and role == "variant":
        # A kernel whose result drifts under repetition is caught here.
        chan.enter("verify", what="%s after timing" % workload.label)
        workload.verify()
    return "verified" if verified else "smoke"
