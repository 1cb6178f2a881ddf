//! The fingerprint's hash: stable for an unchanged machine, changed by
//! every field that changes.

mod common;
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

#[test]
fn the_hash_covers_the_interpreter_not_the_way_it_was_found() {
    use std::os::unix::fs::symlink;
    let m = Machine::new();
    // Two base installations alike in every file but their place.
    for base in ["base", "base2"] {
        m.script(
            &format!("{base}/bin/python3.12"),
            &python_placeholder("3.12.4"),
        );
        symlink("python3.12", m.path(&format!("{base}/bin/python3"))).expect("ln");
        m.write(
            &format!("{base}/include/python3.12/patchlevel.h"),
            "#define PY_VERSION \"3.12.4\"\n",
        );
        let site = m.path(&format!("{base}/lib/python3.12/site-packages"));
        m.dist(&site, "torch-2.9.0.dist-info");
    }
    // A venv of the first, its `python` a link to the base interpreter as
    // `python -m venv` makes it, and a link to the venv's folder.
    let venv = m.venv_of("venv", &m.path("base/bin"), "3.12.4");
    std::fs::remove_file(venv.join("bin/python")).expect("rm");
    symlink(m.path("base/bin/python3.12"), venv.join("bin/python")).expect("ln");
    symlink("python", venv.join("bin/python3")).expect("ln");
    m.dist(&venv_site(&venv), "torch-2.9.0.dist-info");
    symlink(&venv, m.path("venv-link")).expect("ln");
    symlink(m.path("base/bin/python3.12"), m.path("bin/py")).expect("ln");

    let p = |rel: &str| m.path(rel).to_string_lossy().into_owned();
    let hash_of = |vars: &[(&str, String)], args: &[&str]| {
        let (fp, hash) = m.fingerprint_with(vars, args);
        (fp.python.expect("python"), hash)
    };
    let python = p("venv/bin/python");
    let python3 = p("venv/bin/python3");
    let (by_venv, venv_hash) = hash_of(&[("VIRTUAL_ENV", p("venv"))], &[]);
    for (vars, args) in [
        (vec![], vec!["--python", python.as_str()]),
        (vec![], vec!["--python", python3.as_str()]),
        (vec![("PATH", p("venv/bin"))], vec![]),
        (vec![("PREFLIGHT_PYTHON", python.clone())], vec![]),
        (vec![("VIRTUAL_ENV", p("venv-link"))], vec![]),
    ] {
        let (env, hash) = hash_of(&vars, &args);
        assert_eq!(hash, venv_hash, "{vars:?} {args:?}: {env:?}");
        assert_eq!(env.real_path, by_venv.real_path);
    }
    // How it was found stays visible.
    let (by_flag, _) = hash_of(&[], &["--python", python3.as_str()]);
    assert_eq!(by_flag.interpreter, venv.join("bin/python3"));
    assert_eq!(
        by_flag.found_via,
        kernel_preflight::fingerprint::PythonVia::Flag
    );
    assert_eq!(
        by_venv.real_path,
        std::fs::canonicalize(p("base/bin/python3.12")).unwrap()
    );

    // The base interpreter is another environment (its own site-packages),
    // one however it is reached: by name, by a link beside it, by a link
    // elsewhere (Python finds its installation from the real path then).
    let base = p("base/bin/python3.12");
    let (by_base, base_hash) = hash_of(&[], &["--python", base.as_str()]);
    assert_ne!(base_hash, venv_hash);
    assert_eq!(by_base.version.as_deref(), Some("3.12.4"));
    for args in [
        vec!["--python", base.as_str()],
        vec!["--python", &p("base/bin/python3")],
        vec!["--python", &p("bin/py")],
    ] {
        let (env, hash) = hash_of(&[], &args);
        assert_eq!(hash, base_hash, "{args:?}: {env:?}");
        assert_eq!(env.site_packages, by_base.site_packages);
    }
    let (_, path_hash) = hash_of(&[("PATH", p("base/bin"))], &[]);
    assert_eq!(path_hash, base_hash);

    // Another interpreter with the same version and packages is another machine.
    let (_, other_hash) = hash_of(&[], &["--python", &p("base2/bin/python3.12")]);
    assert_ne!(other_hash, base_hash);
}

#[test]
fn an_nvcc_only_in_a_pip_wheel_is_present_but_not_visible_and_making_it_visible_changes_the_hash() {
    let mut m = Machine::new();
    let venv = m.venv("venv", "3.12.4");
    let wheel = venv_site(&venv).join("nvidia/cu13");
    let rel = wheel.strip_prefix(m.path("")).unwrap().to_string_lossy();
    m.toolkit(&rel, NVCC_13_0);
    m.set("VIRTUAL_ENV", venv.to_string_lossy());
    let (fp, hidden) = m.fingerprint(&[]);
    assert_eq!(fp.toolkits.visible, None, "{:?}", fp.toolkits);
    let present = fp.toolkits.wheel_nvcc().expect("the wheel's nvcc is found");
    assert_eq!(present.root, wheel);
    assert_eq!(fp.toolkits.active.as_deref(), Some(wheel.as_path()));

    // The same toolkit, put on PATH: now a kernel that looks for `nvcc`
    // finds it. Its root is the same, how it was found is not hashed, and
    // still the machine is another one for a kernel that compiles.
    let path = format!(
        "{}:{}",
        wheel.join("bin").display(),
        m.path("bin").display()
    );
    let (fp, on_path) = m.fingerprint_with(&[("PATH", path)], &[]);
    assert_eq!(fp.toolkits.visible.as_deref(), Some(wheel.as_path()));
    assert!(fp.toolkits.visible_nvcc().is_some());
    assert!(fp.toolkits.wheel_nvcc().is_none(), "{:?}", fp.toolkits);
    assert_ne!(on_path, hidden);

    // CUDA_HOME is taken as set, with or without an nvcc in it.
    let empty = m.path("empty-home");
    std::fs::create_dir_all(&empty).unwrap();
    let (fp, _) = m.fingerprint_with(&[("CUDA_HOME", empty.to_string_lossy().into())], &[]);
    assert_eq!(fp.toolkits.visible.as_deref(), Some(empty.as_path()));
    assert!(fp.toolkits.visible_nvcc().is_none());
    assert!(fp.toolkits.wheel_nvcc().is_some());
}
