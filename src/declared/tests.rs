//! Expected decision tables, written by hand from the hub's rules.

use super::*;
use crate::variant::VariantName;

fn system(spec: &str) -> System {
    System::bare_host()
        .with_overrides(&format!("cpu=x86_64,os=linux,{spec}"))
        .unwrap()
}

/// Resolve and render as `name` or `name: reason-code`, in order.
fn table(names: &[&str], spec: &str) -> Vec<String> {
    let names: Vec<VariantName> = names.iter().map(|n| n.parse().unwrap()).collect();
    resolve(&names, &system(spec))
        .iter()
        .map(|d| match &d.rejection {
            None => d.variant.to_string(),
            Some(r) => format!("{}: {}", d.variant, r.code()),
        })
        .collect()
}

#[test]
fn cuda_minor_versions_are_compatible_within_a_major() {
    let got = table(
        &[
            "torch29-cxx11-cu126-x86_64-linux",
            "torch29-cxx11-cu128-x86_64-linux",
            "torch29-cxx11-cu129-x86_64-linux",
            "torch29-cxx11-cu130-x86_64-linux",
            "torch29-cxx11-cu118-x86_64-linux",
        ],
        "cuda=12.8,torch=2.9,cxx11=true,tvm-ffi=none",
    );
    assert_eq!(
        got,
        [
            "torch29-cxx11-cu128-x86_64-linux",
            "torch29-cxx11-cu126-x86_64-linux",
            // Rejected variants keep the hub's order too: by minor version only.
            "torch29-cxx11-cu129-x86_64-linux: cuda_version",
            "torch29-cxx11-cu118-x86_64-linux: cuda_version",
            "torch29-cxx11-cu130-x86_64-linux: cuda_version",
        ]
    );
}

#[test]
fn full_preference_order() {
    let got = table(
        &[
            "torch-universal",
            "torch-cuda",
            "tvm-ffi01-cu128-x86_64-linux",
            "torch29-cxx11-cu128-x86_64-linux",
            "torch29-cu126-x86_64-linux",
            "torch-stable-abi28-cu128-x86_64-linux",
            "torch-stable-abi29-cu126-x86_64-linux",
        ],
        "cuda=12.9,torch=2.9,cxx11=true,tvm-ffi=0.1",
    );
    assert_eq!(
        got,
        [
            // Newest stable ABI first, then the backend's minor version.
            "torch-stable-abi29-cu126-x86_64-linux",
            "torch-stable-abi28-cu128-x86_64-linux",
            // Untagged torch before the C++ ABI-tagged one, even with an older CUDA.
            "torch29-cu126-x86_64-linux",
            "torch29-cxx11-cu128-x86_64-linux",
            "tvm-ffi01-cu128-x86_64-linux",
            "torch-cuda",
            "torch-universal",
        ]
    );
}

#[test]
fn framework_versions() {
    let names = [
        "torch-stable-abi210-cpu-x86_64-linux",
        "torch-stable-abi29-cpu-x86_64-linux",
        "torch29-cxx98-cpu-x86_64-linux",
        "torch28-cpu-x86_64-linux",
        "tvm-ffi02-cpu-x86_64-linux",
    ];
    assert_eq!(
        table(&names, "backend=cpu,torch=2.9,cxx11=true,tvm-ffi=0.1"),
        [
            "torch-stable-abi29-cpu-x86_64-linux",
            "torch-stable-abi210-cpu-x86_64-linux: stable_abi_too_new",
            "torch28-cpu-x86_64-linux: torch_version",
            "torch29-cxx98-cpu-x86_64-linux: cxx11_abi",
            "tvm-ffi02-cpu-x86_64-linux: tvm_ffi_version",
        ]
    );
    // Without torch, no torch variant and no stable-ABI variant applies.
    assert_eq!(
        table(&names[..2], "backend=cpu,torch=none"),
        [
            "torch-stable-abi210-cpu-x86_64-linux: stable_abi_too_new",
            "torch-stable-abi29-cpu-x86_64-linux: stable_abi_too_new",
        ]
    );
}

#[test]
fn rocm_matches_exactly_in_0_17_and_within_its_major_from_0_18() {
    let names = [
        "torch29-rocm63-x86_64-linux",
        "torch29-rocm64-x86_64-linux",
        "torch29-cu128-x86_64-linux",
        "torch-rocm",
        "torch-cuda",
    ];
    assert_eq!(
        table(&names, "backend=rocm,rocm=6.4,torch=2.9,kernels=0.17.2"),
        [
            "torch29-rocm64-x86_64-linux",
            "torch-rocm",
            "torch29-cu128-x86_64-linux: backend",
            "torch29-rocm63-x86_64-linux: backend",
            "torch-cuda: noarch_backend",
        ]
    );
    for release in ["0.18.3", "0.19.1"] {
        assert_eq!(
            table(
                &names,
                &format!("backend=rocm,rocm=6.4,torch=2.9,kernels={release}")
            ),
            [
                "torch29-rocm64-x86_64-linux",
                "torch29-rocm63-x86_64-linux",
                "torch-rocm",
                "torch29-cu128-x86_64-linux: backend",
                "torch-cuda: noarch_backend",
            ],
            "{release}"
        );
    }
}

#[test]
fn python_and_free_threading_decide_from_0_19() {
    let names = [
        "torch-2.10-cpu-cpython-3.15-abi3t-x86_64-linux",
        "torch-2.10-cpu-cpython-3.12-abi3-x86_64-linux",
        "torch210-cpu-x86_64-linux",
        "torch-universal",
    ];
    let on = |spec: &str| {
        table(
            &names,
            &format!("backend=cpu,torch=2.10,kernels=0.19.1,{spec}"),
        )
    };
    assert_eq!(
        on("python=3.11"),
        [
            "torch210-cpu-x86_64-linux",
            "torch-universal",
            "torch-2.10-cpu-cpython-3.12-abi3-x86_64-linux: python_version",
            "torch-2.10-cpu-cpython-3.15-abi3t-x86_64-linux: python_version",
        ]
    );
    // abi3 before abi3t, then the newest Python first.
    assert_eq!(
        on("python=3.15"),
        [
            "torch-2.10-cpu-cpython-3.12-abi3-x86_64-linux",
            "torch210-cpu-x86_64-linux",
            "torch-2.10-cpu-cpython-3.15-abi3t-x86_64-linux",
            "torch-universal",
        ]
    );
    assert_eq!(
        on("python=3.15,free-threaded=true"),
        [
            "torch-2.10-cpu-cpython-3.15-abi3t-x86_64-linux",
            "torch-universal",
            "torch-2.10-cpu-cpython-3.12-abi3-x86_64-linux: free_threaded",
            "torch210-cpu-x86_64-linux: free_threaded",
        ]
    );
    // 0.18 reads a dotted torch name as a noarch variant of no backend.
    assert_eq!(
        table(&names, "backend=cpu,torch=2.10,python=3.11,kernels=0.18.3"),
        [
            "torch210-cpu-x86_64-linux",
            "torch-universal",
            "torch-2.10-cpu-cpython-3.15-abi3t-x86_64-linux: noarch_backend",
            "torch-2.10-cpu-cpython-3.12-abi3-x86_64-linux: noarch_backend",
        ]
    );
}

#[test]
fn sdk_and_mlx_names_exist_from_0_19() {
    let names = [
        "sdk",
        "sdk-cuda",
        "mlx-cuda",
        "torch-cuda",
        "sdk-cuda-12.8-cpython-3.9-abi3-x86_64-linux",
    ];
    assert_eq!(
        table(
            &names,
            "backend=cuda,cuda=12.8,python=3.12,mlx=true,kernels=0.19.1"
        ),
        [
            "sdk-cuda-12.8-cpython-3.9-abi3-x86_64-linux",
            "mlx-cuda",
            "torch-cuda",
            "sdk-cuda",
            "sdk",
        ]
    );
    assert_eq!(
        table(
            &names,
            "backend=cuda,cuda=12.8,python=3.12,mlx=false,kernels=0.17.2"
        ),
        [
            "torch-cuda",
            "sdk: not_parsed",
            "sdk-cuda: not_parsed",
            "mlx-cuda: not_parsed",
            "sdk-cuda-12.8-cpython-3.9-abi3-x86_64-linux: not_parsed",
        ]
    );
}

#[test]
fn cann_noarch_is_npu_before_0_19_and_metal_needs_macos_26() {
    for (release, accepted, rejected) in [
        ("0.17.2", "torch-npu", "torch-cann"),
        ("0.18.3", "torch-npu", "torch-cann"),
        ("0.19.1", "torch-cann", "torch-npu"),
    ] {
        assert_eq!(
            table(
                &["torch-npu", "torch-cann", "torch-cpu"],
                &format!("backend=cann,cann=8.1,kernels={release}")
            ),
            [
                accepted.to_string(),
                format!("{rejected}: noarch_backend"),
                "torch-cpu: noarch_backend".to_string(),
            ],
            "{release}"
        );
    }
    let metal = |macos: &str| {
        let s = System::bare_host()
            .with_overrides(&format!(
                "backend=metal,cpu=aarch64,os=darwin,torch=2.9,macos={macos}"
            ))
            .unwrap();
        let v: VariantName = "torch29-metal-aarch64-darwin".parse().unwrap();
        resolve([&v], &s)[0]
            .rejection
            .as_ref()
            .map(|r| r.to_string())
    };
    assert_eq!(metal("26.0"), None);
    assert_eq!(
        metal("15.5").as_deref(),
        Some("Metal kernels require macOS 26.0 or later, system macOS version is 15.5")
    );
}

#[test]
fn cpu_and_os_are_checked_first() {
    assert_eq!(
        table(
            &["torch29-cu128-aarch64-linux", "torch29-cu128-x86_64-darwin"],
            "cuda=12.8,torch=2.8"
        ),
        [
            "torch29-cu128-aarch64-linux: cpu",
            "torch29-cu128-x86_64-darwin: os"
        ]
    );
}

#[test]
fn system_overrides() {
    let s = System::bare_host().with_overrides("cuda=12.8").unwrap();
    assert_eq!(s.backend.to_string(), "cu128");
    let s = s.with_overrides("backend=cpu").unwrap();
    assert_eq!(s.backend.to_string(), "cpu");
    assert!(matches!(
        System::bare_host().with_overrides("backend=cuda"),
        Err(SystemError::MissingVersion { backend: "cuda" })
    ));
    // A detected CUDA version is kept when only the backend is named.
    let detected = System::bare_host().with_overrides("cuda=13.0").unwrap();
    assert_eq!(
        detected
            .with_overrides("backend=cuda")
            .unwrap()
            .backend
            .to_string(),
        "cu130"
    );
    for bad in [
        "gpu=1",
        "cuda=12",
        "cuda=x.y",
        "torch=2",
        "cxx11=yes",
        "os=plan9",
        "cpu=ppc64le",
        "backend=opencl",
        "torch",
    ] {
        assert!(System::bare_host().with_overrides(bad).is_err(), "{bad}");
    }
    let s = System::bare_host()
        .with_overrides("torch=2.9.1+cu128,tvm-ffi=0.1.0rc1")
        .unwrap();
    assert_eq!(s.torch, Some(crate::variant::Version::new(2, 9)));
    assert_eq!(s.tvm_ffi, Some(crate::variant::Version::new(0, 1)));
}

#[test]
fn a_host_no_variant_names_is_kept_by_its_own_name() {
    use crate::variant::{Cpu, OrOther, Os};
    let mut s = system("cuda=12.8,torch=2.9");
    s.cpu = OrOther::from_name("riscv64");
    s.os = OrOther::from_name("freebsd");
    assert_eq!(s.cpu, OrOther::Other("riscv64".into()));
    let decisions = resolve(&["torch29-cu128-x86_64-linux".parse().unwrap()], &s);
    assert_eq!(
        decisions[0].rejection.as_ref().map(ToString::to_string),
        Some("CPU (x86_64) does not match system CPU (riscv64)".into())
    );
    s.cpu = OrOther::Known(Cpu::X86_64);
    let decisions = resolve(&["torch29-cu128-x86_64-linux".parse().unwrap()], &s);
    assert_eq!(
        decisions[0].rejection.as_ref().map(ToString::to_string),
        Some("OS (linux) does not match system OS (freebsd)".into())
    );
    assert_eq!(
        serde_json::to_value(&s).unwrap()["os"],
        serde_json::json!("freebsd")
    );
    assert_eq!(
        OrOther::<Os>::from_name("darwin"),
        OrOther::Known(Os::Darwin)
    );
}

#[test]
fn the_architecture_verdict_judges_cuda_device_0() {
    use crate::declared::embedded::Judge;
    use crate::fingerprint::{ComputeCapability, Fingerprint, Gpu, Sources};
    let src = Sources::from_vars([("PREFLIGHT_PYTHON".into(), "none".into())].into());
    let mut fp = Fingerprint::fast(&src, &crate::fingerprint::NoStore).unwrap();
    let gpu = |bus: &str, cc: (u32, u32), index: Option<u32>| Gpu {
        pci_bus_id: bus.into(),
        device_id: "0x2330".into(),
        model: None,
        cuda_index: index,
        compute_capability: Some(ComputeCapability::new(cc.0, cc.1)),
        uuid: None,
    };
    // First on the bus, but CUDA's device 1 (or hidden): not the one judged.
    fp.gpus.devices = vec![
        gpu("0000:01:00.0", (8, 0), Some(1)),
        gpu("0000:41:00.0", (10, 0), Some(0)),
    ];
    assert_eq!(
        Judge::from_fingerprint(&fp).gpu,
        Some(ComputeCapability::new(10, 0))
    );
    fp.gpus.devices[1].cuda_index = None;
    assert_eq!(Judge::from_fingerprint(&fp).gpu, None);
}
