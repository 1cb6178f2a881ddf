//! A variant that writes 500 MB to stdout: the probe finishes and the
//! parent's memory stays bounded. Its own test binary, so that the peak
//! resident size measured is this probe's alone.

mod probe_fixtures;

use kernel_preflight::classify::OutcomeKind;
use kernel_preflight::probe::SmokeSource;
use probe_fixtures::{Repo, probe, quick_limits};

fn peak_rss_kib() -> u64 {
    let status = std::fs::read_to_string("/proc/self/status").expect("/proc/self/status");
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmHWM:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .expect("VmHWM")
}

#[test]
fn writing_500_mb_to_stdout_finishes_with_bounded_parent_memory() {
    let repo = Repo::new();
    let v = repo.variant(
        "torch-universal",
        "import os\n\
         def flood():\n    \
             block = memoryview(b'x' * (1 << 20))\n    \
             written = 0\n    \
             for _ in range(500):\n        \
                 done = 0\n        \
                 while done < len(block):\n            \
                     done += os.write(1, block[done:])\n        \
                 written += done\n    \
             return written\n",
    );
    // The smoke passes only once every byte went through the pipe, which
    // the parent drains while keeping a bounded head and tail.
    let smoke = SmokeSource::File(repo.file(
        "smoke.py",
        "def smoke(kernel, device):\n    return kernel.flood(), 500 << 20\n",
    ));
    let (_, outcome) = probe(&v, smoke, quick_limits());
    assert_eq!(outcome.kind, OutcomeKind::Pass, "{outcome:?}");
    assert_eq!(
        outcome.depth,
        Some(kernel_preflight::classify::Depth::Verified)
    );
    let peak_mib = peak_rss_kib() / 1024;
    assert!(peak_mib < 100, "parent peak RSS {peak_mib} MiB");
}
