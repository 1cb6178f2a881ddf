//! The architecture table (`declared::nvcc`) against real toolchains: the
//! nvcc 13.5 of the NVIDIA wheels (`--list-gpu-arch`, and which `a` / `f`
//! targets it accepts) and the CUDA 12.2 ptxas (`--gpu-name`'s allowed
//! values), so that "nvcc too old" and "this GPU lacks the architecture"
//! are told apart by what each release really knows.

mod fake_cuda;

use kernel_preflight::declared::arch::Target;
use kernel_preflight::declared::nvcc::{Release, known_sms, knows};
use std::path::PathBuf;
use std::process::Command;

fn t(s: &str) -> Target {
    s.parse().unwrap()
}

fn accepts(nvcc: &std::path::Path, target: &str) -> bool {
    let dir = tempfile::tempdir().unwrap();
    let src = dir.path().join("k.cu");
    std::fs::write(&src, "__global__ void k() {}\n").unwrap();
    Command::new(nvcc)
        .arg(format!("--gpu-architecture={target}"))
        .args(["--dryrun", "-c", "-o"])
        .arg(dir.path().join("k.o"))
        .arg(&src)
        .output()
        .expect("nvcc runs")
        .status
        .success()
}

#[test]
fn the_table_matches_what_nvcc_13_5_knows() {
    let nvcc = fake_cuda::cu13().join("bin/nvcc");
    let release = Release::of("13.5").unwrap();
    let out = Command::new(&nvcc)
        .arg("--list-gpu-arch")
        .output()
        .expect("nvcc");
    let listed: Vec<u32> = String::from_utf8_lossy(&out.stdout)
        .split_whitespace()
        .filter_map(|a| a.strip_prefix("compute_")?.parse().ok())
        .collect();
    assert!(listed.contains(&90), "{listed:?}");
    for sm in known_sms() {
        let plain = format!("compute_{sm}");
        assert_eq!(
            knows(release, &t(&plain)),
            Some(listed.contains(&sm)),
            "{plain}: nvcc 13.5 lists {listed:?}"
        );
        if !listed.contains(&sm) {
            continue;
        }
        for suffix in ["a", "f"] {
            let target = format!("compute_{sm}{suffix}");
            assert_eq!(
                knows(release, &t(&target)),
                Some(accepts(&nvcc, &target)),
                "{target}"
            );
        }
    }
}

#[test]
fn the_table_matches_what_cuda_12_2_knows() {
    let ptxas =
        PathBuf::from(env!("CARGO_MANIFEST_DIR")).join(".toolkit-12.2/nvidia/cuda_nvcc/bin/ptxas");
    assert!(ptxas.exists(), "run scripts/setup-env.sh (CUDA 12.2 ptxas)");
    let help = Command::new(&ptxas).arg("--help").output().expect("ptxas");
    let help = String::from_utf8_lossy(&help.stdout);
    let option = help.find("--gpu-name").expect("--gpu-name in ptxas --help");
    let from = option + help[option..].find("Allowed values").expect("its values");
    let end = from + help[from..].find("Default value").expect("its default");
    let allowed: Vec<String> = help[from..end]
        .split('\'')
        .skip(1)
        .step_by(2)
        .map(str::to_owned)
        .collect();
    assert!(allowed.iter().any(|a| a == "compute_90a"), "{allowed:?}");
    let release = Release::of("12.2.140").unwrap();
    for sm in known_sms() {
        for suffix in ["", "a", "f"] {
            let target = format!("compute_{sm}{suffix}");
            assert_eq!(
                knows(release, &t(&target)),
                Some(allowed.contains(&target)),
                "{target}: CUDA 12.2 allows {allowed:?}"
            );
        }
    }
}
