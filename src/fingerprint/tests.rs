use super::full::normalize_bus_id;
use super::gpu::parse_proc_version;
use super::python::{normalize, parse_dist_dir, version_py_field};
use super::toolkit::parse_nvcc_version;
use proptest::prelude::*;

#[test]
fn proc_version_both_module_formats_never_the_gcc_line() {
    let proprietary = "NVRM version: NVIDIA UNIX x86_64 Kernel Module  535.146.02  Thu Dec 19 18:56:32 UTC 2023\nGCC version:  gcc version 12.3.0 (Ubuntu 12.3.0-1ubuntu1~22.04)\n";
    let open = "NVRM version: NVIDIA UNIX Open Kernel Module for x86_64  550.54.15  Release Build  (dvs-builder@U16-A24-23-2)  Tue Mar  5 22:15:33 UTC 2024\nGCC version:  gcc version 12.2.0 (Debian 12.2.0-14)\n";
    let two_parts =
        "NVRM version: NVIDIA UNIX aarch64 Kernel Module  560.35  Fri Aug 16 21:39:15 UTC 2024\n";
    assert_eq!(
        parse_proc_version(proprietary).as_deref(),
        Some("535.146.02")
    );
    assert_eq!(parse_proc_version(open).as_deref(), Some("550.54.15"));
    assert_eq!(parse_proc_version(two_parts).as_deref(), Some("560.35"));
    let gcc_only = "GCC version:  gcc version 12.3.0 (Ubuntu 12.3.0-1ubuntu1~22.04)\n";
    assert_eq!(parse_proc_version(gcc_only), None);
}

#[test]
fn nvcc_release_lines() {
    for (text, want) in [
        ("Cuda compilation tools, release 11.8, V11.8.89", "11.8.89"),
        ("Cuda compilation tools, release 12.4, V12.4.99", "12.4.99"),
        ("Cuda compilation tools, release 12.8, V12.8.93", "12.8.93"),
        ("Cuda compilation tools, release 13.0, V13.0.88", "13.0.88"),
        ("Cuda compilation tools, release 13.5, V13.5.37", "13.5.37"),
        ("Cuda compilation tools, release 10.0", "10.0"),
    ] {
        let full = format!(
            "nvcc: NVIDIA (R) Cuda compiler driver\nBuilt on Mon_Oct_12_07:25:48_PM_PDT_2026\n{text}\n"
        );
        assert_eq!(parse_nvcc_version(&full).as_deref(), Some(want), "{text}");
    }
    assert_eq!(parse_nvcc_version("nvcc fatal : Unknown option"), None);
    assert_eq!(parse_nvcc_version("release notes, Vfoo"), None);
}

#[test]
fn dist_info_and_egg_info_names() {
    assert_eq!(
        parse_dist_dir("torch-2.9.0+cu128.dist-info"),
        Some(("torch".into(), "2.9.0+cu128".into()))
    );
    assert_eq!(
        parse_dist_dir("nvidia_cutlass_dsl-4.2.1.dist-info"),
        Some(("nvidia-cutlass-dsl".into(), "4.2.1".into()))
    );
    assert_eq!(
        parse_dist_dir("Foo.Bar-1.2-py3.11.egg-info"),
        Some(("foo-bar".into(), "1.2".into()))
    );
    assert_eq!(parse_dist_dir("torch"), None);
    assert_eq!(parse_dist_dir("-1.0.dist-info"), None);
    assert_eq!(normalize("Apache_TVM..FFI"), "apache-tvm-ffi");
}

#[test]
fn torch_version_py_fields() {
    let text = "__version__ = '2.9.0+rocm6.4'\ndebug = False\ncuda: Optional[str] = None\ncuda_extra = '1'\nhip: Optional[str] = '6.4.43482'\nxpu = \"20250101\"\n";
    assert_eq!(version_py_field(text, "cuda"), None);
    assert_eq!(version_py_field(text, "hip").as_deref(), Some("6.4.43482"));
    assert_eq!(version_py_field(text, "xpu").as_deref(), Some("20250101"));
    assert_eq!(
        version_py_field(text, "__version__").as_deref(),
        Some("2.9.0+rocm6.4")
    );
}

#[test]
fn bus_ids_as_sysfs_spells_them() {
    assert_eq!(normalize_bus_id("00000000:3B:00.0"), "0000:3b:00.0");
    assert_eq!(normalize_bus_id("0000:c1:00.0"), "0000:c1:00.0");
    assert_eq!(normalize_bus_id("garbage"), "garbage");
}

proptest! {
    #[test]
    fn nvcc_version_round_trip(major in 9u32..20, minor in 0u32..10, patch in 0u32..300) {
        let text = format!("Cuda compilation tools, release {major}.{minor}, V{major}.{minor}.{patch}\n");
        prop_assert_eq!(parse_nvcc_version(&text), Some(format!("{major}.{minor}.{patch}")));
    }

    #[test]
    fn proc_version_round_trip(a in 300u32..999, b in 0u32..200, c in proptest::option::of(0u32..100), open in any::<bool>()) {
        let v = match c { Some(c) => format!("{a}.{b}.{c:02}"), None => format!("{a}.{b}") };
        let module = if open { "Open Kernel Module for x86_64" } else { "Kernel Module" };
        let text = format!("NVRM version: NVIDIA UNIX x86_64 {module}  {v}  Release Build  Tue Mar  5 22:15:33 UTC 2024\n");
        prop_assert_eq!(parse_proc_version(&text), Some(v));
    }

    #[test]
    fn dist_dir_round_trip(name in "[A-Za-z][A-Za-z0-9_.]{0,15}[A-Za-z0-9]", version in "[0-9]{1,3}(\\.[0-9]{1,3}){0,2}(\\+[a-z0-9]{1,6})?") {
        let dir = format!("{}-{version}.dist-info", name.replace('-', "_"));
        prop_assert_eq!(parse_dist_dir(&dir), Some((normalize(&name), version)));
    }

    #[test]
    fn bus_id_round_trip(domain in 0u32..0x10000, bus in 0u32..0x100, dev in 0u32..0x20, func in 0u32..8) {
        let sysfs = format!("{domain:04x}:{bus:02x}:{dev:02x}.{func:x}");
        let cuda = format!("{domain:08X}:{bus:02X}:{dev:02X}.{func:X}");
        prop_assert_eq!(normalize_bus_id(&cuda), sysfs);
    }
}
