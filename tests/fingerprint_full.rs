//! The full fingerprint: CUDA facts measured by preflight's own cuda child
//! through the stand-in libcuda (`tests/fixtures/native/fake_libcuda.c`),
//! Python facts by the real interpreter when there is one, cached under the
//! fast fingerprint; failures, passing states and hangs as facts.

mod common;
mod fake_cuda;
#[path = "fixtures/fingerprint/machine.rs"]
mod machine;

use kernel_preflight::declared::embedded::Judge;
use kernel_preflight::fingerprint::{
    ComputeCapability, Depth, Fingerprint, Libcuda, PythonMeasured,
};
use kernel_preflight::variant::Version;
use machine::*;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};

/// Each GPU as (bus id, compute capability, CUDA ordinal).
fn devices(fp: &Fingerprint) -> Vec<(String, Option<String>, Option<u32>)> {
    fp.gpus
        .devices
        .iter()
        .map(|g| {
            (
                g.pci_bus_id.clone(),
                g.compute_capability.map(|c| c.to_string()),
                g.cuda_index,
            )
        })
        .collect()
}

/// Measured facts kept in the fingerprints bucket (one entry per machine,
/// in shard folders).
fn full_entries(m: &Machine) -> usize {
    let entries = |dir: &Path| std::fs::read_dir(dir).into_iter().flatten().flatten();
    entries(&m.path("cache/fingerprints-v2/measured"))
        .map(|shard| {
            entries(&shard.path())
                .filter(|e| e.path().extension().is_some_and(|x| x == "json"))
                .count()
        })
        .sum()
}

/// A machine with the B200 first on the bus and the H100 second, whose
/// driver (the stand-in, once installed) numbers the H100 0.
fn two_gpus() -> Machine {
    let mut m = Machine::new();
    m.write("sys/module/nvidia/version", "570.86.10\n");
    m.gpu("0000:01:00.0", "0x2901", "NVIDIA B200");
    m.gpu("0000:41:00.0", "0x2330", "NVIDIA H100 80GB HBM3");
    m.set("FAKE_CUDA_MACHINE", "two_gpus");
    m
}

/// The stand-in driver copied into `m` (so that a test can remove or
/// replace it): the folder holding its `libcuda.so.1`.
fn install_libcuda(m: &Machine) -> PathBuf {
    let dir = m.path("libcuda");
    std::fs::create_dir_all(&dir).expect("mkdir");
    std::fs::copy(fake_cuda::fake_libcuda(), dir.join("libcuda.so.1")).expect("copy libcuda");
    dir
}

#[test]
fn full_fingerprint_measures_devices_through_libcuda_and_caches_them() {
    let mut m = two_gpus();
    let libcuda = install_libcuda(&m);
    m.set("LD_LIBRARY_PATH", libcuda.to_string_lossy());
    let venv = runnable_venv(&m);
    m.set("VIRTUAL_ENV", venv.to_string_lossy());

    let (fast, fast_hash) = m.fingerprint(&[]);
    let (full, full_hash) = m.fingerprint(&["--full"]);
    assert_eq!(full.depth, Depth::Full);
    assert_ne!(full_hash, fast_hash);
    assert_eq!(full.gpus.libcuda, Some(Libcuda::Ok));
    assert_eq!(full.gpus.cuda_driver_api, Some(Version::new(12, 8)));
    // CUDA's ordinals are not bus order here; facts are matched by bus id,
    // and CUDA's own numbering replaces the one inferred from files.
    assert_eq!(
        devices(&full),
        [
            ("0000:01:00.0".into(), Some("10.0".into()), Some(1)),
            ("0000:41:00.0".into(), Some("9.0".into()), Some(0))
        ]
    );
    // The architecture verdict judges CUDA's device 0, not the first on the bus.
    assert_eq!(
        Judge::from_fingerprint(&full).gpu,
        Some(ComputeCapability::new(9, 0))
    );
    let (_, real_version) = real_python();
    let python = full.python.as_ref().expect("python");
    assert_eq!(python.version.as_deref(), Some(real_version.as_str()));
    assert!(
        matches!(&python.measured, Some(PythonMeasured::Ok { version, .. }) if *version == real_version),
        "{:?}",
        python.measured
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
    // is asked again, and this time no libcuda is found: a plain fact.
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
        m.fingerprint(&["--full"]).0.gpus.cuda_driver_api,
        Some(Version::new(13, 0))
    );
}

#[test]
fn without_python_the_cuda_child_still_measures_every_device() {
    let mut m = two_gpus();
    let libcuda = install_libcuda(&m).join("libcuda.so.1");
    // No interpreter anywhere: PATH holds none, and no venv is set.
    assert!(!m.path("bin/python3").exists());
    m.set("PREFLIGHT_LIBCUDA", libcuda.to_string_lossy());
    let (fp, _) = m.fingerprint(&["--full"]);
    assert!(fp.python.is_none());
    assert_eq!(fp.gpus.libcuda, Some(Libcuda::Ok));
    assert_eq!(fp.gpus.cuda_driver_api, Some(Version::new(12, 8)));
    assert_eq!(
        devices(&fp),
        [
            ("0000:01:00.0".into(), Some("10.0".into()), Some(1)),
            ("0000:41:00.0".into(), Some("9.0".into()), Some(0))
        ]
    );
    let table = String::from_utf8_lossy(&m.run(&["--full"]).stdout).into_owned();
    assert!(
        table.contains("cuda:0  NVIDIA H100 80GB HBM3 [0x2330] at 0000:41:00.0, compute 9.0"),
        "{table}"
    );
    assert!(table.contains("12.8"), "{table}");

    // The driver applies CUDA_VISIBLE_DEVICES in its own order: device 0 is
    // now the B200, the H100 is hidden, and the verdict judges the B200.
    m.set("CUDA_VISIBLE_DEVICES", "1");
    let (fp, _) = m.fingerprint(&["--full"]);
    assert_eq!(
        devices(&fp),
        [
            ("0000:01:00.0".into(), Some("10.0".into()), Some(0)),
            ("0000:41:00.0".into(), None, None)
        ]
    );
    assert_eq!(
        Judge::from_fingerprint(&fp).gpu,
        Some(ComputeCapability::new(10, 0))
    );
    m.unset("CUDA_VISIBLE_DEVICES");

    // A different driver library at the same path is asked again.
    let (before, _) = m.fingerprint(&["--full"]);
    assert_eq!(before.gpus.libcuda, Some(Libcuda::Ok));
    std::fs::remove_file(&libcuda).expect("rm");
    std::fs::write(&libcuda, "not a library").expect("write");
    let (after, _) = m.fingerprint(&["--full"]);
    assert_eq!(after.gpus.libcuda, Some(Libcuda::Missing));
}

#[test]
fn no_libcuda_at_all_is_a_fact_not_a_failure() {
    let mut m = two_gpus();
    m.set("PREFLIGHT_PYTHON", "none");
    let (fp, hash) = m.fingerprint(&["--full"]);
    assert_eq!(fp.depth, Depth::Full);
    assert_eq!(fp.gpus.libcuda, Some(Libcuda::Missing));
    assert_eq!(fp.gpus.cuda_driver_api, None);
    // The fast numbering stands; without a capability there is nothing to judge.
    assert_eq!(
        devices(&fp),
        [
            ("0000:01:00.0".into(), None, Some(0)),
            ("0000:41:00.0".into(), None, Some(1))
        ]
    );
    assert_eq!(Judge::from_fingerprint(&fp).gpu, None);
    // A settled fact: kept, and answered from the cache next time.
    assert_eq!(full_entries(&m), 1);
    assert_eq!(m.fingerprint(&["--full"]).1, hash);
    let out = m.run(&["--full"]);
    assert!(out.status.success());
    assert!(String::from_utf8_lossy(&out.stdout).contains("none (libcuda.so.1 not installed)"));
}

#[test]
fn a_busy_or_unknown_cu_init_is_reported_and_measured_again() {
    let mut m = two_gpus();
    m.set("PREFLIGHT_PYTHON", "none");
    let libcuda = install_libcuda(&m).join("libcuda.so.1");
    m.set("PREFLIGHT_LIBCUDA", libcuda.to_string_lossy());
    for code in [46, 999] {
        m.set("FAKE_CUDA", format!("init={code}"));
        let (fp, _) = m.fingerprint(&["--full"]);
        assert_eq!(fp.gpus.libcuda, Some(Libcuda::InitFailed { code }));
        // cuDriverGetVersion answers before cuInit.
        assert_eq!(fp.gpus.cuda_driver_api, Some(Version::new(12, 8)));
        assert_eq!(full_entries(&m), 0, "CUresult {code} is not kept");
        let table = String::from_utf8_lossy(&m.run(&["--full"]).stdout).into_owned();
        assert!(
            table.contains(&format!("cuInit failed with CUresult {code}"))
                && table.contains("measured again next time"),
            "{table}"
        );
    }
    // The GPU is free again: the next call measures it.
    m.unset("FAKE_CUDA");
    let (fp, _) = m.fingerprint(&["--full"]);
    assert_eq!(fp.gpus.libcuda, Some(Libcuda::Ok));
    assert_eq!(full_entries(&m), 1);

    // No device (100) is what the machine is: kept.
    let mut m = two_gpus();
    m.set("PREFLIGHT_PYTHON", "none");
    let libcuda = install_libcuda(&m).join("libcuda.so.1");
    m.set("PREFLIGHT_LIBCUDA", libcuda.to_string_lossy());
    m.set("FAKE_CUDA", "init=100");
    let (fp, _) = m.fingerprint(&["--full"]);
    assert_eq!(fp.gpus.libcuda, Some(Libcuda::InitFailed { code: 100 }));
    assert_eq!(fp.gpus.cuda_driver_api, Some(Version::new(12, 8)));
    assert_eq!(full_entries(&m), 1);
}

#[test]
fn a_measurement_that_fails_or_hangs_is_a_fact_and_is_not_cached() {
    let mut m = Machine::new();
    let venv = m.venv("venv", "3.12.4");
    m.set("VIRTUAL_ENV", venv.to_string_lossy());
    m.set("HF_TOKEN", "hf_secret");
    m.set("AWS_SECRET_ACCESS_KEY", "secret");
    m.set("TRITON_PTXAS_PATH", "/opt/ptxas");
    // Where the machine's tools may write past the walls (Machine::runs).
    let seen = m.runs("child-env");
    m.script(
        "venv/bin/python",
        &format!(
            "/usr/bin/env > '{}'\necho 'Fatal Python error: boom' >&2\nexit 3",
            seen.display()
        ),
    );
    let (fp, _) = m.fingerprint(&["--full"]);
    let python = fp.python.as_ref().expect("python");
    match &python.measured {
        Some(PythonMeasured::NotMeasured { reason }) => assert!(
            reason.contains("exited with code 3") && reason.contains("Fatal Python error: boom"),
            "{reason}"
        ),
        other => panic!("expected not_measured, got {other:?}"),
    }
    // What the files say stands.
    assert_eq!(python.version.as_deref(), Some("3.12.4"));
    // The CUDA side does not depend on Python: no libcuda is a plain fact.
    assert_eq!(fp.gpus.libcuda, Some(Libcuda::Missing));
    // The child gets the environment kernels see, without credentials.
    let env = std::fs::read_to_string(&seen).expect("child env");
    assert!(env.contains("TRITON_PTXAS_PATH=/opt/ptxas"), "{env}");
    assert!(
        !env.contains("hf_secret") && !env.contains("AWS_SECRET"),
        "{env}"
    );
    assert_eq!(full_entries(&m), 0);
    let table = String::from_utf8_lossy(&m.run(&["--full"]).stdout).into_owned();
    assert!(
        table.contains("not measured: the Python child exited with code 3"),
        "{table}"
    );

    // A child that hangs (and leaves a grandchild holding its pipes) is killed.
    m.script("venv/bin/python", "/bin/sleep 600 &\n/bin/sleep 600");
    m.set("PREFLIGHT_FULL_TIMEOUT", "0.5");
    let (fp, _) = m.fingerprint(&["--full"]);
    match fp.python.and_then(|p| p.measured) {
        Some(PythonMeasured::NotMeasured { reason }) => {
            assert!(reason.contains("timed out"), "{reason}")
        }
        other => panic!("expected not_measured, got {other:?}"),
    }
    assert_eq!(full_entries(&m), 0);
}

#[test]
fn the_stand_in_drivers_default_machine_answers_the_device_list_too() {
    // Its default machine, the one the cuda executor's tests use: one
    // "Fake GPU" (9.0) behind a CUDA 13.0 driver, at a bus id this
    // machine's /sys does not list.
    let mut m = Machine::new();
    m.set("PREFLIGHT_PYTHON", "none");
    let lib = install_libcuda(&m).join("libcuda.so.1");
    m.set("PREFLIGHT_LIBCUDA", lib.to_string_lossy());
    let (fp, _) = m.fingerprint(&["--full"]);
    assert_eq!(fp.gpus.libcuda, Some(Libcuda::Ok));
    assert_eq!(fp.gpus.cuda_driver_api, Some(Version::new(13, 0)));
    // CUDA sees a GPU that the PCI listing did not show: kept, not lost.
    let gpu = &fp.gpus.devices[0];
    assert_eq!(
        (
            gpu.pci_bus_id.as_str(),
            gpu.model.as_deref(),
            gpu.cuda_index
        ),
        ("0000:01:00.0", Some("Fake GPU"), Some(0))
    );
    assert_eq!(
        Judge::from_fingerprint(&fp).gpu,
        Some(ComputeCapability::new(9, 0))
    );

    let mut m = Machine::new();
    m.set("PREFLIGHT_PYTHON", "none");
    m.set("PREFLIGHT_LIBCUDA", lib.to_string_lossy());
    m.set("FAKE_CUDA", "init=100");
    let (fp, _) = m.fingerprint(&["--full"]);
    assert_eq!(fp.gpus.libcuda, Some(Libcuda::InitFailed { code: 100 }));
    assert_eq!(fp.gpus.cuda_driver_api, Some(Version::new(13, 0)));
    assert!(fp.gpus.devices.is_empty());
}
