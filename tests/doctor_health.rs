//! `doctor --health`: one line and an exit status for a scheduler's health
//! check, with the node's device path run for real against the stand-in
//! libcuda (`tests/fixtures/native/fake_libcuda.c`): a working device, a
//! driver that fails, a launch that fails, a GPU on the PCI bus that the
//! driver does not answer for, and a driver older than the toolkit.

mod common;
mod fake_cuda;

use common::{preflight_cmd, stderr, stdout};
use fake_cuda::{cu13, fake_libcuda};
use std::path::{Path, PathBuf};
use std::process::Output;

/// A `/sys` with `gpus` NVIDIA GPUs bound to the nvidia driver.
fn sysfs(gpus: usize) -> PathBuf {
    let root = common::fresh_dir("sysfs");
    std::fs::create_dir_all(root.join("bus/pci/drivers/nvidia")).unwrap();
    for i in 0..gpus {
        let bus = format!("0000:{:02x}:00.0", i + 1);
        std::fs::create_dir_all(root.join("bus/pci/drivers/nvidia").join(&bus)).unwrap();
        let dev = root.join("bus/pci/devices").join(&bus);
        std::fs::create_dir_all(&dev).unwrap();
        std::fs::write(dev.join("class"), "0x030200\n").unwrap();
        std::fs::write(dev.join("device"), "0x2330\n").unwrap();
    }
    root
}

/// `doctor --health` on a node with `gpus` GPUs on its PCI bus, the driver
/// `libcuda` (behaving as `fake` says), and no CUDA toolkit unless `env`
/// names one.
fn health(gpus: usize, libcuda: &Path, env: &[(&str, &str)], args: &[&str]) -> Output {
    let mut cmd = preflight_cmd();
    cmd.args(["doctor", "--health", "--timeout", "30"])
        .args(args)
        .env("PREFLIGHT_SYSFS_ROOT", sysfs(gpus))
        .env("PREFLIGHT_LIBCUDA", libcuda)
        .env("PREFLIGHT_CUDA_DEFAULT_ROOT", "/nonexistent")
        .env_remove("CUDA_HOME")
        .env_remove("CUDA_PATH")
        .env_remove("CUDA_VISIBLE_DEVICES")
        .env_remove("FAKE_CUDA")
        .env_remove("FAKE_CUDA_MACHINE")
        .env("PATH", "/usr/bin:/bin");
    for (k, v) in env {
        cmd.env(k, v);
    }
    cmd.output().expect("run doctor --health")
}

/// Exit 1 and exactly one line, starting with `fault:`.
fn faulted(out: &Output, fault: &str) -> String {
    assert_eq!(out.status.code(), Some(1), "{}{}", stdout(out), stderr(out));
    let text = stdout(out);
    assert_eq!(text.lines().count(), 1, "{text}");
    assert!(text.starts_with(&format!("{fault}: ")), "{text}");
    text
}

#[test]
fn a_working_device_is_healthy() {
    let out = health(1, fake_libcuda(), &[], &[]);
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}{}",
        stdout(&out),
        stderr(&out)
    );
    let text = stdout(&out);
    assert_eq!(text.lines().count(), 1, "{text}");
    assert!(
        text.starts_with("healthy: 1 GPU(s), device 0 Fake GPU (sm_90)"),
        "{text}"
    );
}

#[test]
fn a_driver_that_fails_is_a_fault() {
    // CUDA_ERROR_UNKNOWN from cuInit: the GPU on the bus is not usable.
    let out = health(1, fake_libcuda(), &[("FAKE_CUDA", "init=999")], &[]);
    let line = faulted(&out, "no_device");
    assert!(line.contains("cuInit: CUDA_ERROR_UNKNOWN (999)"), "{line}");
}

#[test]
fn a_device_that_fails_its_launch_is_a_fault() {
    // CUDA_ERROR_ILLEGAL_ADDRESS after the launch.
    let out = health(1, fake_libcuda(), &[("FAKE_CUDA", "launch=700")], &[]);
    let line = faulted(&out, "device_failed");
    assert!(line.contains("fails a kernel launch"), "{line}");
}

#[test]
fn a_gpu_on_the_bus_that_the_driver_does_not_answer_for_is_a_fault() {
    let out = health(1, Path::new("/nonexistent/libcuda.so.1"), &[], &[]);
    let line = faulted(&out, "no_device");
    assert!(
        line.contains("1 NVIDIA GPU(s) on the PCI bus and reachable here"),
        "{line}"
    );
    // Fewer answer than the bus shows.
    let out = health(3, fake_libcuda(), &[("FAKE_CUDA_MACHINE", "two_gpus")], &[]);
    let line = faulted(&out, "no_device");
    assert!(line.contains("the CUDA driver answers 2"), "{line}");
}

#[test]
fn a_container_given_one_gpu_of_eight_is_healthy_with_its_one() {
    // /sys lists the host's eight GPUs; the driver's folder in /proc and
    // /dev show the container's one (minor 3), which the driver answers.
    let root = common::fresh_dir("one-of-eight");
    let info = root.join("proc/driver/nvidia/gpus/0000:04:00.0");
    std::fs::create_dir_all(&info).unwrap();
    std::fs::write(
        info.join("information"),
        "Model: \t\t Fake GPU\nDevice Minor: \t 3\n",
    )
    .unwrap();
    std::fs::create_dir_all(root.join("dev")).unwrap();
    for node in ["nvidiactl", "nvidia3"] {
        std::fs::write(root.join("dev").join(node), "").unwrap();
    }
    let (proc, dev) = (root.join("proc"), root.join("dev"));
    let env = [
        ("PREFLIGHT_PROCFS_ROOT", proc.to_str().unwrap()),
        ("PREFLIGHT_DEVFS_ROOT", dev.to_str().unwrap()),
    ];
    let out = health(8, fake_libcuda(), &env, &[]);
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}{}",
        stdout(&out),
        stderr(&out)
    );
    assert!(
        stdout(&out).starts_with("healthy: 1 GPU(s)"),
        "{}",
        stdout(&out)
    );
}

#[test]
fn expect_gpus_overrides_the_bus() {
    let out = health(
        0,
        Path::new("/nonexistent/libcuda.so.1"),
        &[],
        &["--expect-gpus", "2"],
    );
    let line = faulted(&out, "no_device");
    assert!(line.contains("2 NVIDIA GPU(s) --expect-gpus"), "{line}");
}

#[test]
fn a_node_without_gpus_expected_is_healthy() {
    let out = health(0, Path::new("/nonexistent/libcuda.so.1"), &[], &[]);
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}{}",
        stdout(&out),
        stderr(&out)
    );
    assert!(stdout(&out).starts_with("healthy: no NVIDIA GPU expected"));
}

#[test]
fn a_driver_older_than_the_toolkit_is_a_fault() {
    // The two-GPU machine's driver supports CUDA 12.8; the toolkit is 13.
    let toolkit = cu13();
    let out = health(
        2,
        fake_libcuda(),
        &[
            ("FAKE_CUDA_MACHINE", "two_gpus"),
            ("CUDA_HOME", toolkit.to_str().unwrap()),
        ],
        &[],
    );
    let line = faulted(&out, "driver_too_old");
    assert!(line.contains("the driver supports CUDA 12.8"), "{line}");
    assert!(line.contains("needs a CUDA 13.x driver"), "{line}");
    // The same toolkit on the 13.0 driver is fine.
    let out = health(
        1,
        fake_libcuda(),
        &[("CUDA_HOME", toolkit.to_str().unwrap())],
        &[],
    );
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}{}",
        stdout(&out),
        stderr(&out)
    );
}

#[test]
fn json_names_the_fault() {
    let out = health(
        1,
        fake_libcuda(),
        &[("FAKE_CUDA", "launch=700")],
        &["--json"],
    );
    assert_eq!(out.status.code(), Some(1));
    let doc: serde_json::Value = serde_json::from_str(&stdout(&out)).unwrap();
    assert_eq!(doc["health"], "fault");
    assert_eq!(doc["fault"], "device_failed");
}
