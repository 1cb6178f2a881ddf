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
        assert_eq!(parsed, VariantName::Noarch { backend });
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
        "torch-gpu",
        "torch-cuda-x86_64",
        "torch2-cu128-x86_64-linux",
        "torchX9-cu128-x86_64-linux",
        "torch29-cxx11-cu128-x86_64",
        "torch29-cxx11-cu128-x86_64-linux-extra",
        "torch29-cu-x86_64-linux",
        "torch29-cu1-x86_64-linux",
        "torch29-cuda128-x86_64-linux",
        "torch29-cu128-ppc64le-linux",
        "torch29-cu128-x86_64-freebsd",
        "torch29-cxx14-cu128-x86_64-linux",
        "torch-stable-abi-cu128-x86_64-linux",
        "torch-stable-abi2-cu128-x86_64-linux",
        "tvm-ffi-cu128-x86_64-linux",
        "tvm-cu128-x86_64-linux",
        "torch29-cu12a-x86_64-linux",
        "torch29-cu99999999999999999999999-x86_64-linux",
    ] {
        let err = VariantName::parse(name).expect_err(name);
        let message = err.to_string();
        assert!(message.contains(&format!("{name:?}")), "{message}");
        assert!(message.contains("torch-stable-abiXY"), "{message}");
    }
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
            .prop_filter("two digits", |v| v.major > 0)
            .prop_map(Backend::Rocm),
        version()
            .prop_filter("two digits", |v| v.major > 0)
            .prop_map(Backend::Xpu),
        version()
            .prop_filter("two digits", |v| v.major > 0)
            .prop_map(Backend::Cann),
    ];
    let cpu = prop_oneof![Just(Cpu::X86_64), Just(Cpu::Aarch64)];
    let os = prop_oneof![Just(Os::Linux), Just(Os::Darwin), Just(Os::Windows)];
    (framework, backend, cpu, os).prop_map(|(framework, backend, cpu, os)| VariantName::Arch {
        framework,
        backend,
        cpu,
        os,
    })
}

proptest! {
    #[test]
    fn round_trips(name in arch_name()) {
        let text = name.to_string();
        prop_assert_eq!(VariantName::parse(&text), Ok(name));
    }

    #[test]
    fn never_panics(text in "[a-z0-9_-]{0,40}") {
        if let Ok(name) = VariantName::parse(&text) {
            // Whatever parses prints as something that parses to the same value.
            prop_assert_eq!(VariantName::parse(&name.to_string()), Ok(name));
        }
    }
}
