"""Benchmarks for relu-demo in the hub's convention (`kernels benchmark`):
Benchmark subclasses with setup_<workload>, benchmark_<workload> and
verify_<workload>. Plain Python lists, so that they run without torch;
preflight runs the smallest workload once and verifies it."""

import random

from kernels.benchmark import Benchmark


class ReluBenchmark(Benchmark):
    seed = 0

    def setup_small(self):
        self.x = [random.uniform(-1.0, 1.0) for _ in range(64)]
        self.out = [0.0] * len(self.x)

    def benchmark_small(self):
        self.kernel.relu(self.out, self.x)

    def verify_small(self):
        return [max(v, 0.0) for v in self.x]

    def setup_large(self):
        self.x = [random.uniform(-1.0, 1.0) for _ in range(1 << 20)]
        self.out = [0.0] * len(self.x)

    def benchmark_large(self):
        self.kernel.relu(self.out, self.x)

    def verify_large(self):
        return [max(v, 0.0) for v in self.x]
