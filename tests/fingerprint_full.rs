//! The full fingerprint: facts measured in a child process through a fake
//! libcuda (built from `tests/fixtures/fingerprint/*.c`) and the real
//! Python, cached under the fast fingerprint; failures and hangs as facts.

#[path = "fixtures/fingerprint/machine.rs"]
mod machine;

use kernel_preflight::fingerprint::{Depth, Libcuda};
use machine::*;
use std::os::unix::fs::PermissionsExt;

#[test]
fn full_fingerprint_measures_devices_through_libcuda_and_caches_them() {
    let mut m = Machine::new();
    m.write("sys/module/nvidia/version", "570.86.10\n");
    m.gpu("0000:01:00.0", "0x2901", "NVIDIA B200");
    m.gpu("0000:41:00.0", "0x2330", "NVIDIA H100 80GB HBM3");
    let libcuda = fake_libcuda(&m, "fake_libcuda.c");
    m.set("LD_LIBRARY_PATH", libcuda.to_string_lossy());
    let venv = runnable_venv(&m);
    m.set("VIRTUAL_ENV", venv.to_string_lossy());

    let (fast, fast_hash) = m.fingerprint(&[]);
    let (full, full_hash) = m.fingerprint(&["--full"]);
    assert_eq!(full.depth, Depth::Full);
    assert_ne!(full_hash, fast_hash);
    assert_eq!(full.gpus.libcuda, Some(Libcuda::Ok));
    assert_eq!(full.gpus.cuda_driver_api.as_deref(), Some("12.8"));
    // CUDA's ordinals are not bus order here; facts are matched by bus id,
    // and CUDA's own numbering replaces the one inferred from files.
    let cc: Vec<_> = full
        .gpus
        .devices
        .iter()
        .map(|g| {
            (
                g.pci_bus_id.as_str(),
                g.compute_capability.as_deref(),
                g.cuda_index,
            )
        })
        .collect();
    assert_eq!(
        cc,
        [
            ("0000:01:00.0", Some("10.0"), Some(1)),
            ("0000:41:00.0", Some("9.0"), Some(0))
        ]
    );
    let (_, real_version) = real_python();
    assert_eq!(
        full.python.as_ref().and_then(|p| p.version.clone()),
        Some(real_version)
    );
    assert_eq!(fast.gpus.devices[0].compute_capability, None);

    // Measured once: with libcuda gone the cached facts still answer.
    std::fs::remove_file(libcuda.join("libcuda.so.1")).expect("rm");
    let (again, again_hash) = m.fingerprint(&["--full"]);
    assert_eq!(again_hash, full_hash);
    assert_eq!(again.gpus.libcuda, Some(Libcuda::Ok));
    // The fingerprints bucket keeps measured facts under the fast hash.
    let key = kernel_preflight::hash::sha256_hex(fast_hash.as_bytes());
    let cached = m.path(&format!(
        "cache/fingerprints-v2/measured/{}/{key}.json",
        &key[..2]
    ));
    assert_eq!(
        std::fs::metadata(&cached)
            .expect("cache file")
            .permissions()
            .mode()
            & 0o777,
        0o600
    );

    // A replaced interpreter (a copy: same path, same version, new inode)
    // is asked again, and finds no libcuda: a plain fact.
    let python = venv.join("bin/python");
    let real = std::fs::canonicalize(&python).expect("real python");
    std::fs::remove_file(&python).expect("rm");
    std::fs::copy(&real, &python).expect("copy python");
    let (missing, missing_hash) = m.fingerprint(&["--full"]);
    assert_eq!(missing.gpus.libcuda, Some(Libcuda::Missing));
    assert_eq!(missing.gpus.devices[0].compute_capability, None);
    assert_ne!(missing_hash, full_hash);

    // So does a fresh cache.
    std::fs::remove_file(&cached).expect("rm");
    let (fresh, _) = m.fingerprint(&["--full"]);
    assert_eq!(fresh.gpus.libcuda, Some(Libcuda::Missing));
    let out = m.run(&["--full"]);
    assert!(out.status.success());
    assert!(String::from_utf8_lossy(&out.stdout).contains("libcuda.so.1 not installed"));

    // Overrides win over what was measured.
    m.set("PREFLIGHT_CUDA_DRIVER_API", "13.0");
    assert_eq!(
        m.fingerprint(&["--full"]).0.gpus.cuda_driver_api.as_deref(),
        Some("13.0")
    );
}

#[test]
fn full_fingerprint_reports_a_failed_cu_init() {
    let mut m = Machine::new();
    let libcuda = fake_libcuda(&m, "init_fails_libcuda.c");
    m.set("LD_LIBRARY_PATH", libcuda.to_string_lossy());
    let venv = runnable_venv(&m);
    m.set("VIRTUAL_ENV", venv.to_string_lossy());
    let (fp, _) = m.fingerprint(&["--full"]);
    assert_eq!(fp.gpus.libcuda, Some(Libcuda::InitFailed { code: 100 }));
    assert_eq!(fp.gpus.cuda_driver_api.as_deref(), Some("13.0"));
}

#[test]
fn a_measurement_that_fails_or_hangs_is_a_fact_and_is_not_cached() {
    let mut m = Machine::new();
    let venv = m.venv("venv", "3.12.4");
    m.set("VIRTUAL_ENV", venv.to_string_lossy());
    m.set("HF_TOKEN", "hf_secret");
    m.set("AWS_SECRET_ACCESS_KEY", "secret");
    m.set("TRITON_PTXAS_PATH", "/opt/ptxas");
    let seen = m.path("child-env");
    m.script(
        "venv/bin/python",
        &format!(
            "/usr/bin/env > '{}'\necho 'Fatal Python error: boom' >&2\nexit 3",
            seen.display()
        ),
    );
    let (fp, _) = m.fingerprint(&["--full"]);
    match fp.gpus.libcuda {
        Some(Libcuda::NotMeasured { reason }) => assert!(
            reason.contains("exited with code 3") && reason.contains("Fatal Python error: boom"),
            "{reason}"
        ),
        other => panic!("expected not_measured, got {other:?}"),
    }
    // The child gets the environment kernels see, without credentials.
    let env = std::fs::read_to_string(&seen).expect("child env");
    assert!(env.contains("TRITON_PTXAS_PATH=/opt/ptxas"), "{env}");
    assert!(
        !env.contains("hf_secret") && !env.contains("AWS_SECRET"),
        "{env}"
    );
    assert!(
        !m.path("cache/fingerprints-v2/measured").exists(),
        "nothing measured is kept"
    );

    // A child that hangs (and leaves a grandchild holding its pipes) is killed.
    m.script("venv/bin/python", "/bin/sleep 600 &\n/bin/sleep 600");
    m.set("PREFLIGHT_FULL_TIMEOUT", "0.5");
    let (fp, _) = m.fingerprint(&["--full"]);
    match fp.gpus.libcuda {
        Some(Libcuda::NotMeasured { reason }) => assert!(reason.contains("timed out"), "{reason}"),
        other => panic!("expected not_measured, got {other:?}"),
    }

    // No Python at all.
    m.unset("VIRTUAL_ENV").set("PREFLIGHT_PYTHON", "none");
    let (fp, _) = m.fingerprint(&["--full"]);
    assert!(matches!(fp.gpus.libcuda, Some(Libcuda::NotMeasured { .. })));
    assert!(m.run(&["--full"]).status.success());
}
