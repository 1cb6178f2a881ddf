//! The fingerprint's hash: stable for an unchanged machine, changed by
//! every field that changes.

#[path = "fixtures/fingerprint/machine.rs"]
mod machine;

use kernel_preflight::fingerprint::Fingerprint;
use machine::*;

#[test]
fn the_hash_is_stable_for_an_unchanged_machine() {
    let mut m = Machine::new();
    m.write("sys/module/nvidia/version", "550.54.15\n");
    m.gpu("0000:41:00.0", "0x2330", "NVIDIA H100 80GB HBM3");
    m.gpu("0000:01:00.0", "0x2330", "NVIDIA H100 80GB HBM3");
    let venv = m.venv("venv", "3.12.4");
    m.dist(&venv_site(&venv), "torch-2.9.0.dist-info");
    m.set("VIRTUAL_ENV", venv.to_string_lossy());
    let cuda = m.toolkit("cuda", NVCC_12_8);
    m.set("CUDA_HOME", cuda.to_string_lossy());
    let first = m.hash();
    assert_eq!(first.len(), 64);
    for _ in 0..3 {
        assert_eq!(m.hash(), first);
    }
    // The same machine described in this process gives the same hash.
    let mut src = kernel_preflight::fingerprint::Sources::from_vars(m.env.clone());
    src.python = None;
    assert_eq!(
        Fingerprint::fast(&src, &kernel_preflight::fingerprint::NoStore)
            .expect("fingerprint")
            .hash(),
        first
    );
    // Variables that change nothing that runs leave it alone.
    m.set("TRITON_CACHE_DIR", "/tmp/elsewhere");
    m.set("UNRELATED", "1");
    assert_eq!(m.hash(), first);
}

#[test]
fn the_hash_changes_with_every_field() {
    type Change = Box<dyn Fn(&mut Machine)>;
    let base = |m: &mut Machine| {
        m.write("sys/module/nvidia/version", "550.54.15\n");
        m.gpu("0000:01:00.0", "0x2330", "NVIDIA H100 80GB HBM3");
        let venv = m.venv("venv", "3.12.4");
        let site = venv_site(&venv);
        for d in [
            "torch-2.9.0+cu128.dist-info",
            "triton-3.5.0.dist-info",
            "einops-0.8.1.dist-info",
        ] {
            m.dist(&site, d);
        }
        m.write(
            "venv/lib/python3.12/site-packages/torch/version.py",
            "cuda: Optional[str] = '12.8'\nhip: Optional[str] = None\n",
        );
        m.write(
            "venv/lib/python3.12/site-packages/torch/share/cmake/Torch/TorchConfig.cmake",
            "set(TORCH_CXX_FLAGS \"-D_GLIBCXX_USE_CXX11_ABI=1\")\n",
        );
        m.set("VIRTUAL_ENV", venv.to_string_lossy());
        let cuda = m.toolkit("cuda", NVCC_12_8);
        m.write("cuda/lib64/libnvrtc.so.12", "");
        m.set("CUDA_HOME", cuda.to_string_lossy());
    };
    let site = "venv/lib/python3.12/site-packages";
    let changes: Vec<(&str, Change)> = vec![
        (
            "driver version",
            Box::new(|m| drop(m.write("sys/module/nvidia/version", "570.86.10\n"))),
        ),
        (
            "another GPU",
            Box::new(|m| m.gpu("0000:02:00.0", "0x2330", "NVIDIA H100 80GB HBM3")),
        ),
        (
            "GPU model",
            Box::new(|m| m.gpu("0000:01:00.0", "0x2335", "NVIDIA H200")),
        ),
        (
            "GPU hidden",
            Box::new(|m| {
                m.set("CUDA_VISIBLE_DEVICES", "");
            }),
        ),
        (
            "compute capability",
            Box::new(|m| {
                m.set("PREFLIGHT_COMPUTE_CAPABILITY", "9.0");
            }),
        ),
        (
            "CUDA driver API",
            Box::new(|m| {
                m.set("PREFLIGHT_CUDA_DRIVER_API", "12.8");
            }),
        ),
        (
            "nvcc version",
            Box::new(|m| {
                let _ = std::fs::remove_file(m.path("cuda/bin/nvcc"));
                m.toolkit("cuda", NVCC_13_0);
            }),
        ),
        (
            "no ptxas",
            Box::new(|m| drop(std::fs::remove_file(m.path("cuda/bin/ptxas")))),
        ),
        (
            "second toolkit",
            Box::new(|m| {
                let p = m.toolkit("cuda-11", NVCC_11_8);
                m.set("CUDA_PATH", p.to_string_lossy());
            }),
        ),
        (
            "NVRTC",
            Box::new(|m| drop(m.write("cuda/lib64/libnvrtc.so.13", ""))),
        ),
        (
            "CUDA runtime",
            Box::new(|m| drop(m.write("cuda/lib64/libcudart.so.12", ""))),
        ),
        (
            "python version",
            Box::new(|m| {
                m.write(
                    "venv/pyvenv.cfg",
                    "home = /usr/bin\ninclude-system-site-packages = false\nversion = 3.12.5\n",
                );
            }),
        ),
        (
            "torch version",
            Box::new(move |m| {
                std::fs::rename(
                    m.path(&format!("{site}/torch-2.9.0+cu128.dist-info")),
                    m.path(&format!("{site}/torch-2.9.1+cu128.dist-info")),
                )
                .expect("mv");
            }),
        ),
        (
            "torch CUDA",
            Box::new(move |m| {
                drop(m.write(
                    &format!("{site}/torch/version.py"),
                    "cuda: Optional[str] = '13.0'\n",
                ))
            }),
        ),
        (
            "torch ABI",
            Box::new(move |m| {
                m.write(
                    &format!("{site}/torch/share/cmake/Torch/TorchConfig.cmake"),
                    "set(TORCH_CXX_FLAGS \"-D_GLIBCXX_USE_CXX11_ABI=0\")\n",
                );
            }),
        ),
        (
            "package added",
            Box::new(move |m| m.dist(&m.path(site), "kernels-0.17.2.dist-info")),
        ),
        (
            "package removed",
            Box::new(move |m| {
                drop(std::fs::remove_dir_all(
                    m.path(&format!("{site}/einops-0.8.1.dist-info")),
                ))
            }),
        ),
        (
            "CPU model",
            Box::new(|m| drop(m.write("proc/cpuinfo", &CPUINFO.replace("8480+", "8490H")))),
        ),
        (
            "CPU flag",
            Box::new(|m| drop(m.write("proc/cpuinfo", &CPUINFO.replace(" amx_tile", "")))),
        ),
        (
            "glibc",
            Box::new(|m| {
                m.set("PREFLIGHT_GLIBC", "2.17");
            }),
        ),
        (
            "arch",
            Box::new(|m| {
                m.set("PREFLIGHT_ARCH", "aarch64");
            }),
        ),
        (
            "TORCH_CUDA_ARCH_LIST",
            Box::new(|m| {
                m.set("TORCH_CUDA_ARCH_LIST", "9.0a");
            }),
        ),
        (
            "TRITON_PTXAS_PATH",
            Box::new(|m| {
                m.set("TRITON_PTXAS_PATH", "/opt/ptxas");
            }),
        ),
        (
            "CUTE_DSL_ARCH",
            Box::new(|m| {
                m.set("CUTE_DSL_ARCH", "sm_100a");
            }),
        ),
        (
            "CUDA_DISABLE_PTX_JIT",
            Box::new(|m| {
                m.set("CUDA_DISABLE_PTX_JIT", "1");
            }),
        ),
    ];
    for (name, change) in &changes {
        let mut m = Machine::new();
        base(&mut m);
        let before = m.hash();
        change(&mut m);
        assert_ne!(m.hash(), before, "{name} did not change the hash");
    }
}
