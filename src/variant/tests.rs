use super::*;
use proptest::prelude::*;

#[test]
fn parses_every_form() {
    let cases = [
        (
            "torch29-cxx11-cu128-x86_64-linux",
            Framework::Torch {
                version: Version::new(2, 9),
                cxx11_abi: Some(true),
            },
            Backend::Cuda(Version::new(12, 8)),
        ),
        (
            "torch27-cxx98-cu118-x86_64-linux",
            Framework::Torch {
                version: Version::new(2, 7),
                cxx11_abi: Some(false),
            },
            Backend::Cuda(Version::new(11, 8)),
        ),
        (
            "torch210-cu130-aarch64-linux",
            Framework::Torch {
                version: Version::new(2, 10),
                cxx11_abi: None,
            },
            Backend::Cuda(Version::new(13, 0)),
        ),
        (
            "torch-stable-abi29-rocm64-x86_64-linux",
            Framework::TorchStableAbi {
                version: Version::new(2, 9),
            },
            Backend::Rocm(Version::new(6, 4)),
        ),
        (
            "tvm-ffi01-cu128-x86_64-linux",
            Framework::TvmFfi {
                version: Version::new(0, 1),
            },
            Backend::Cuda(Version::new(12, 8)),
        ),
        (
            "torch28-xpu20252-x86_64-windows",
            Framework::Torch {
                version: Version::new(2, 8),
                cxx11_abi: None,
            },
            Backend::Xpu(Version::new(2025, 2)),
        ),
        (
            "torch29-cann81-aarch64-linux",
            Framework::Torch {
                version: Version::new(2, 9),
                cxx11_abi: None,
            },
            Backend::Cann(Version::new(8, 1)),
        ),
        (
            "torch29-metal-aarch64-darwin",
            Framework::Torch {
                version: Version::new(2, 9),
                cxx11_abi: None,
            },
            Backend::Metal,
        ),
        (
            "torch29-cpu-x86_64-linux",
            Framework::Torch {
                version: Version::new(2, 9),
                cxx11_abi: None,
            },
            Backend::Cpu,
        ),
        (
            "torch29-neuron-x86_64-linux",
            Framework::Torch {
                version: Version::new(2, 9),
                cxx11_abi: None,
            },
            Backend::Neuron,
        ),
        (
            "torch29-tpu-x86_64-linux",
            Framework::Torch {
                version: Version::new(2, 9),
                cxx11_abi: None,
            },
            Backend::Tpu,
        ),
    ];
    for (name, framework, backend) in cases {
        let parsed = VariantName::parse(name).unwrap();
        let VariantName::Arch {
            framework: f,
            backend: b,
            ..
        } = &parsed
        else {
            panic!("{name} parsed as noarch");
        };
        assert_eq!((f, b), (&framework, &backend), "{name}");
        assert_eq!(parsed.to_string(), name);
    }
    for backend in NoarchBackend::ALL {
        let name = format!("torch-{}", backend.as_str());
        let parsed = VariantName::parse(&name).unwrap();
        assert_eq!(parsed, VariantName::torch_noarch(backend));
        assert_eq!(parsed.to_string(), name);
    }
}

#[test]
fn splits_digits_like_the_hub() {
    // `cu(\d+)(\d+)` is greedy: the last digit is the minor.
    assert_eq!(
        "cu1210".parse::<Backend>(),
        Ok(Backend::Cuda(Version::new(121, 0)))
    );
    // `torch(\d)(\d+)`: the first digit is the major.
    let v = VariantName::parse("torch210-cpu-x86_64-linux").unwrap();
    assert!(v.to_string().starts_with("torch210-"));
    // Leading zeros are normalised as Python's Version does.
    let v = VariantName::parse("torch208-cpu-x86_64-linux").unwrap();
    assert_eq!(v.to_string(), "torch28-cpu-x86_64-linux");
}

#[test]
fn rejects_names_that_fit_no_form() {
    for name in [
        "",
        "foo",
        "torch",
        "torch-",
        "torch2-cu128-x86_64-linux",
        "torchX9-cu128-x86_64-linux",
        "torch29-cxx11-cu128-x86_64",
        "torch29-cxx11-cu128-x86_64-linux-extra",
        "torch29-cu-x86_64-linux",
        "torch29-cu1-x86_64-linux",
        "torch29-cuda128-x86_64-linux",
        "torch29-cxx14-cu128-x86_64-linux",
        "torch-stable-abi-cu128-x86_64-linux",
        "torch-stable-abi2-cu128-x86_64-linux",
        "tvm-ffi-cu128-x86_64-linux",
        "tvm-cu128-x86_64-linux",
        "torch29-cu12a-x86_64-linux",
        "torch29-cu99999999999999999999999-x86_64-linux",
        // Dotted names: every part dotted, the Python tag present and valid.
        "torch-2.10-cuda-12.8-x86_64-linux",
        "torch-2.10-cu128-cpython-3.9-abi3-x86_64-linux",
        "torch-210-cuda-12.8-cpython-3.9-abi3-x86_64-linux",
        "torch-2.10-cuda-128-cpython-3.9-abi3-x86_64-linux",
        "torch-2.10-cuda-12.8-cpython-3.12-abi3t-x86_64-linux",
        "torch-2.10-cuda-12.8-cpython-3.12-abi4-x86_64-linux",
        "torch-2.10-cuda-12.8-pypy-3.12-abi3-x86_64-linux",
        "torch-2.10-cpython-3.9-abi3-x86_64-linux",
        "torch-2.10-cpu-1.0-cpython-3.9-abi3-x86_64-linux",
        "torch29-cuda-12.8-cpython-3.9-abi3-x86_64-linux",
        "torch-stable-abi-2.9-cu128-cpython-3.9-abi3-x86_64-linux",
        "tvm-ffi-0.1-cuda-12.8-x86_64-linux",
        "tvm-ffi-01-cuda-12.8-cpython-3.9-abi3-x86_64-linux",
        "mlx-0.1-metal",
        "mlx-",
        "sdk-cuda-12.8",
        "sdk-cuda-cpython-3.9-abi3-x86_64-linux",
        "sdk-cpython-3.9-abi3",
        "sdk-a-b",
    ] {
        let err = VariantName::parse(name).expect_err(name);
        let message = err.to_string();
        assert!(message.contains(&format!("{name:?}")), "{message}");
        assert!(message.contains("torch-stable-abiXY"), "{message}");
    }
}

#[test]
fn parses_dotted_mlx_and_sdk_names() {
    let dotted =
        VariantName::parse("torch-2.10-cxx11-cuda-12.8-cpython-3.12-abi3-x86_64-linux").unwrap();
    assert_eq!(
        dotted,
        VariantName::Arch {
            framework: Framework::Torch {
                version: Version::new(2, 10),
                cxx11_abi: Some(true)
            },
            backend: Backend::Cuda(Version::new(12, 8)),
            python: Some(PythonTag {
                min: Version::new(3, 12),
                abi: Abi::Abi3
            }),
            cpu: OrOther::Known(Cpu::X86_64),
            os: OrOther::Known(Os::Linux),
        }
    );
    let free =
        VariantName::parse("torch-stable-abi-2.9-cpu-cpython-3.15-abi3t-aarch64-linux").unwrap();
    assert_eq!(
        free.python(),
        Some(PythonTag {
            min: Version::new(3, 15),
            abi: Abi::Abi3t
        })
    );
    // A legacy name's compiled parts are for CPython 3.9, abi3.
    let legacy = VariantName::parse("tvm-ffi01-rocm64-x86_64-linux").unwrap();
    assert_eq!(legacy.python(), Some(PythonTag::LEGACY));
    assert_eq!(
        VariantName::parse("mlx-metal").unwrap(),
        VariantName::Noarch {
            framework: NoarchFramework::Mlx,
            backend: OrOther::Known(NoarchBackend::Metal)
        }
    );
    assert_eq!(
        VariantName::parse("sdk").unwrap(),
        VariantName::Sdk(Sdk::Any)
    );
    assert_eq!(
        VariantName::parse("sdk-cuda").unwrap(),
        VariantName::Sdk(Sdk::For(OrOther::Known(NoarchBackend::Cuda)))
    );
    let sdk = VariantName::parse("sdk-cuda-12.8-cpython-3.9-abi3-x86_64-linux").unwrap();
    assert_eq!(sdk.backend(), Some(&Backend::Cuda(Version::new(12, 8))));
    assert!(sdk.is_cuda());
    let any = VariantName::parse("sdk-cpython-3.9-abi3-x86_64-linux").unwrap();
    assert_eq!(any.backend(), None);
    // Names the loader parses with parts no backend or machine uses.
    for name in [
        "torch-gpu",
        "torch-cann",
        "torch29-cu128-riscv64-linux",
        "torch29-cu128-x86_64-freebsd",
        "tvm-ffi-0.1-xpu-2025.2-cpython-3.9-abi3-x86_64-windows",
        "torch-2.9-rocm-7.14-cpython-3.9-abi3-x86_64-linux",
    ] {
        assert_eq!(VariantName::parse(name).unwrap().to_string(), name);
    }
    // kernels 0.19 reads `rocm714` as 7.14, the one two-digit ROCm minor.
    assert_eq!(
        VariantName::parse("torch29-rocm714-x86_64-linux")
            .unwrap()
            .backend(),
        Some(&Backend::Rocm(Version::new(7, 14)))
    );
}

fn version() -> impl Strategy<Value = Version> {
    (0u64..100, 0u64..10).prop_map(|(a, b)| Version::new(a, b))
}

fn arch_name() -> impl Strategy<Value = VariantName> {
    let small = (1u64..10, 0u64..40).prop_map(|(a, b)| Version::new(a, b));
    let framework = prop_oneof![
        (small.clone(), prop::option::of(any::<bool>()))
            .prop_map(|(version, cxx11_abi)| Framework::Torch { version, cxx11_abi }),
        small
            .clone()
            .prop_map(|version| Framework::TorchStableAbi { version }),
        small.prop_map(|version| Framework::TvmFfi { version }),
    ];
    let backend = prop_oneof![
        Just(Backend::Cpu),
        Just(Backend::Metal),
        Just(Backend::Neuron),
        Just(Backend::Tpu),
        version()
            .prop_filter("two digits", |v| v.major > 0)
            .prop_map(Backend::Cuda),
        version()
            // `rocm714` is ROCm 7.14 to the loader, never 71.4.
            .prop_filter("two digits", |v| v.major > 0 && *v != Version::new(71, 4))
            .prop_map(Backend::Rocm),
        version()
            .prop_filter("two digits", |v| v.major > 0)
            .prop_map(Backend::Xpu),
        version()
            .prop_filter("two digits", |v| v.major > 0)
            .prop_map(Backend::Cann),
    ];
    let cpu = prop_oneof![
        Just(OrOther::Known(Cpu::X86_64)),
        Just(OrOther::Known(Cpu::Aarch64)),
        "[a-z][a-z0-9_]{0,8}".prop_map(|c| OrOther::from_name(&c)),
    ];
    let os = prop_oneof![
        Just(OrOther::Known(Os::Linux)),
        Just(OrOther::Known(Os::Darwin)),
        Just(OrOther::Known(Os::Windows)),
    ];
    let python = prop::option::of(prop_oneof![
        (0u64..20).prop_map(|minor| PythonTag {
            min: Version::new(3, minor),
            abi: Abi::Abi3
        }),
        (15u64..20).prop_map(|minor| PythonTag {
            min: Version::new(3, minor),
            abi: Abi::Abi3t
        }),
    ]);
    (framework, backend, python, cpu, os).prop_map(|(framework, backend, python, cpu, os)| {
        VariantName::Arch {
            framework,
            backend,
            python,
            cpu,
            os,
        }
    })
}

proptest! {
    #[test]
    fn round_trips(name in arch_name()) {
        let text = name.to_string();
        prop_assert_eq!(VariantName::parse(&text), Ok(name));
    }

    #[test]
    fn never_panics(text in "[a-z0-9_.-]{0,50}") {
        if let Ok(name) = VariantName::parse(&text) {
            // Whatever parses prints as something that parses to the same value.
            prop_assert_eq!(VariantName::parse(&name.to_string()), Ok(name));
        }
    }
}
