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
             block = b'x' * (1 << 20)\n    \
             for _ in range(500):\n        \
                 os.write(1, block)\n",
    );
    let smoke = SmokeSource::File(repo.file(
        "smoke.py",
        "def smoke(kernel, device):\n    kernel.flood()\n",
    ));
    let (run, outcome) = probe(&v, smoke, quick_limits());
    assert_eq!(outcome.kind, OutcomeKind::Pass, "{outcome:?}");
    assert_eq!(run.run.stdout.total_bytes, 500 << 20);
    assert!(run.run.stdout.truncated());
    let peak_mib = peak_rss_kib() / 1024;
    assert!(peak_mib < 100, "parent peak RSS {peak_mib} MiB");
}
