//! `inspect` on real nvcc-built files: agreement with cuobjdump, the exact
//! targets with their `a` / `f` suffixes, compression, and the command line.

mod inspect_support;

use inspect_support::{cuda_fixture_names, cuobjdump, fixture, in_cuobjdump_terms};
use kernel_preflight::declared::arch::{ImageKind, PtxIsa};
use kernel_preflight::declared::embedded::{self, Depth, FileImages, Format};
use kernel_preflight::declared::fatbin::Compression;
use std::path::Path;
use std::process::{Command, Output};

fn inspect(name: &str) -> FileImages {
    let path = fixture(name);
    embedded::inspect_file(&path).unwrap_or_else(|e| panic!("{e}"))
}

fn targets(file: &FileImages) -> Vec<String> {
    file.images.iter().map(|i| i.target.to_string()).collect()
}

#[test]
fn agrees_with_cuobjdump_on_every_fixture() {
    let names = cuda_fixture_names();
    assert!(names.len() >= 18, "{names:?}");
    for name in names {
        let path = fixture(&name);
        let ours = embedded::inspect_file(&path).unwrap_or_else(|e| panic!("{e}"));
        assert!(ours.has_cuda(), "{name}: no images found");
        assert_eq!(
            in_cuobjdump_terms(&ours),
            cuobjdump(&path),
            "{name}: preflight vs cuobjdump (ELF, PTX)"
        );
    }
}

#[test]
fn every_fixture_lists_the_same_from_headers_as_from_whole_images() {
    for name in cuda_fixture_names() {
        let path = fixture(&name);
        let data = std::fs::read(&path).unwrap();
        let read = |depth| embedded::inspect_bytes_with(&path, &data, depth).unwrap();
        assert_eq!(read(Depth::Headers), read(Depth::Images), "{name}");
    }
}

#[test]
fn standalone_cubins_keep_their_suffix() {
    for (name, target) in [
        ("sm80.cubin", "sm_80"),
        ("sm90a.cubin", "sm_90a"),
        ("sm100f.cubin", "sm_100f"),
        ("sm121a.cubin", "sm_121a"),
    ] {
        let file = inspect(name);
        assert_eq!(file.format, Format::Cubin);
        assert_eq!(targets(&file), [target], "{name}");
        assert_eq!(file.images[0].compressed, None);
    }
}

#[test]
fn cuda12_cubins_use_the_older_e_flags_layouts() {
    for (name, target, abi) in [
        ("cuda12_sm80.cubin", "sm_80", 7),
        ("cuda12_sm90a.cubin", "sm_90a", 7),
        ("cuda12_sm100a.cubin", "sm_100a", 8),
        ("cuda12_sm100f.cubin", "sm_100f", 8),
    ] {
        let bytes = std::fs::read(fixture(name)).unwrap();
        assert_eq!(bytes[8], abi, "{name}: EI_ABIVERSION");
        assert_eq!(targets(&inspect(name)), [target], "{name}");
    }
    let file = inspect("cuda12.fatbin");
    assert_eq!(targets(&file), ["sm_80", "sm_90a", "sm_100a", "sm_100f"]);
    assert!(file.images.iter().all(|i| i.compressed.is_some()));
}

#[test]
fn mixed_fatbin_lists_every_target_in_order() {
    let file = inspect("mixed.fatbin");
    assert_eq!(file.format, Format::Fatbin);
    assert_eq!(file.fatbins, 1);
    assert_eq!(
        targets(&file),
        ["sm_80", "sm_90a", "compute_90a", "sm_100f", "compute_120"]
    );
    for image in &file.images {
        assert_eq!(image.compressed, None);
        assert_eq!(image.stored_size, image.size);
        let isa = (image.kind == ImageKind::Ptx).then_some(PtxIsa::new(9, 5));
        assert_eq!(image.ptx_isa, isa, "{}", image.target);
    }
}

#[test]
fn family_targets_keep_f_and_arch_targets_keep_a() {
    let file = inspect("family.fatbin");
    assert_eq!(
        targets(&file),
        ["sm_103f", "sm_110f", "sm_121f", "compute_121f", "sm_120a"]
    );
}

#[test]
fn zstd_and_lz4_entries_are_decompressed() {
    let zstd = inspect("zstd.fatbin");
    assert_eq!(targets(&zstd), ["sm_100f", "compute_90", "compute_90a"]);
    assert!(
        zstd.images
            .iter()
            .all(|i| i.compressed == Some(Compression::Zstd))
    );
    assert!(zstd.images.iter().all(|i| i.stored_size < i.size));

    let lz4 = inspect("lz4.fatbin");
    assert_eq!(targets(&lz4), ["sm_86", "compute_90"]);
    let ptx = &lz4.images[1];
    assert_eq!(ptx.compressed, Some(Compression::Lz4));
    assert_eq!(ptx.ptx_isa, Some(PtxIsa::new(9, 5)));
}

#[test]
fn concatenated_groups_are_split_into_images() {
    let file = inspect("concat.fatbin");
    assert_eq!(
        targets(&file),
        [
            "compute_90",
            "compute_100a",
            "compute_120",
            "sm_90",
            "sm_80",
            "sm_100a",
            "sm_120"
        ]
    );
}

#[test]
fn lto_ir_is_counted_not_listed() {
    let file = inspect("lto.fatbin");
    assert_eq!(targets(&file), ["sm_80"]);
    assert_eq!(file.other_entries, 1);
}

#[test]
fn shared_object_with_two_gencodes_has_two_fatbins() {
    let file = inspect("two_gencodes.so");
    assert_eq!(file.format, Format::Elf);
    assert_eq!(file.fatbins, 2);
    assert_eq!(targets(&file), ["sm_80", "sm_90a", "sm_80", "sm_90a"]);
}

#[test]
fn ptx_file_and_plain_elf() {
    let ptx = inspect("compute90a.ptx");
    assert_eq!(ptx.format, Format::Ptx);
    assert_eq!(targets(&ptx), ["compute_90a"]);
    assert_eq!(ptx.images[0].ptx_isa, Some(PtxIsa::new(9, 5)));

    let plain = inspect("plain_c.so");
    assert_eq!(plain.format, Format::Elf);
    assert!(!plain.has_cuda());
    assert_eq!(plain.fatbins, 0);
}

#[test]
fn a_directory_is_walked_for_cuda_files() {
    let dir = tempfile::tempdir().unwrap();
    let variant = dir
        .path()
        .join("build/torch29-cxx11-cu130-x86_64-linux/add");
    std::fs::create_dir_all(&variant).unwrap();
    std::fs::copy(fixture("two_gencodes.so"), variant.join("_add_ops.so")).unwrap();
    std::fs::copy(fixture("ptx_only.so"), variant.join("_ptx.abi3.so")).unwrap();
    std::fs::write(variant.join("__init__.py"), "").unwrap();
    let files = embedded::inspect_path(dir.path()).unwrap();
    let names: Vec<String> = files
        .iter()
        .map(|f| f.path.file_name().unwrap().to_string_lossy().into_owned())
        .collect();
    assert_eq!(names, ["_add_ops.so", "_ptx.abi3.so"]);
    assert_eq!(targets(&files[1]), ["compute_90"]);
}

// ---- the command line ----

fn preflight(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_preflight"))
        .arg("inspect")
        .args(args)
        .output()
        .expect("run preflight")
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

fn path_arg(name: &str) -> String {
    fixture(name).display().to_string()
}

#[test]
fn cli_says_why_sm_100_cannot_run_an_sm_80_sm_90a_library() {
    let out = preflight(&[&path_arg("two_gencodes.so"), "--gpu", "10.0"]);
    assert_eq!(out.status.code(), Some(1), "{}", text(&out.stderr));
    let stdout = text(&out.stdout);
    assert!(
        stdout.contains(
            "SASS for sm_80 and sm_90a, no PTX; this GPU is sm_100: no image can run here"
        ),
        "{stdout}"
    );
    assert!(stdout.contains("2 fatbins, 4 images"), "{stdout}");

    let out = preflight(&[&path_arg("two_gencodes.so"), "--gpu", "9.0"]);
    assert_eq!(out.status.code(), Some(0));
    assert!(text(&out.stdout).contains("runs the sm_90a SASS"));
}

#[test]
fn cli_json_carries_images_and_verdict() {
    let out = preflight(&[
        &path_arg("ptx_only.so"),
        "--json",
        "--gpu",
        "12.0",
        "--driver-ptx",
        "9.0",
    ]);
    assert_eq!(out.status.code(), Some(1), "{}", text(&out.stderr));
    let json: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let file = &json["files"][0];
    assert_eq!(file["format"], "elf");
    assert_eq!(file["images"][0]["kind"], "ptx");
    assert_eq!(file["images"][0]["target"], "compute_90");
    assert_eq!(file["images"][0]["ptx_isa"], "9.5");
    assert_eq!(file["verdict"]["outcome"], "ptx_too_new");
    assert_eq!(file["verdict"]["runnable"], false);
    assert_eq!(json["gpu"], "12.0");

    let out = preflight(&[
        &path_arg("ptx_only.so"),
        "--gpu",
        "12.0",
        "--driver",
        "580.65.06",
    ]);
    assert_eq!(out.status.code(), Some(1));
    assert!(text(&out.stdout).contains("newer than this driver's JIT (9.0)"));
    let out = preflight(&[
        &path_arg("ptx_only.so"),
        "--gpu",
        "12.0",
        "--driver",
        "470.82",
    ]);
    assert_eq!(out.status.code(), Some(2));
    assert!(text(&out.stderr).contains("--driver-ptx"));

    let out = preflight(&[
        &path_arg("ptx_only.so"),
        "--json",
        "--gpu",
        "12.0",
        "--driver-ptx",
        "9.5",
    ]);
    assert_eq!(out.status.code(), Some(0));
    let json: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(json["files"][0]["verdict"]["outcome"], "ptx_jit");
    assert_eq!(json["files"][0]["verdict"]["target"], "compute_90");
}

#[test]
fn cli_driver_without_patch_number_is_its_whole_release() {
    // nvcc's PTX for compute_90 at ISA 9.0, the newest that driver 580.65.06
    // (CUDA 13.0) JIT-compiles; the kernel uses nothing newer.
    let ptx = std::fs::read_to_string(fixture("compute90a.ptx"))
        .unwrap()
        .replace(".version 9.5", ".version 9.0")
        .replace(".target sm_90a", ".target sm_90");
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("compute90.ptx");
    std::fs::write(&path, ptx).unwrap();
    let path = path.display().to_string();
    for (driver, code) in [("580.65", 0), ("580.65.06", 0), ("575.51", 1)] {
        let out = preflight(&[&path, "--gpu", "12.0", "--driver", driver]);
        assert_eq!(
            out.status.code(),
            Some(code),
            "--driver {driver}: {}",
            text(&out.stdout)
        );
    }
}

#[test]
fn cli_table_shows_kind_target_isa_compression_size() {
    let out = preflight(&[&path_arg("zstd.fatbin")]);
    assert_eq!(out.status.code(), Some(0));
    let stdout = text(&out.stdout);
    for needle in [
        "kind",
        "PTX ISA",
        "sm_100f",
        "compute_90a",
        "9.5",
        "zstd (",
        "KiB",
    ] {
        assert!(stdout.contains(needle), "{needle:?} missing from\n{stdout}");
    }
}

#[test]
fn cli_plain_elf_has_no_cuda_code() {
    let out = preflight(&[&path_arg("plain_c.so"), "--gpu", "9.0"]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    assert!(text(&out.stdout).contains("without CUDA code"));

    let empty = tempfile::tempdir().unwrap();
    let out = preflight(&[&empty.path().display().to_string()]);
    assert_eq!(out.status.code(), Some(0));
    assert!(text(&out.stdout).contains("no CUDA code"));
}

#[test]
fn cli_bad_input_is_one_precise_message_and_exit_2() {
    let dir = tempfile::tempdir().unwrap();
    let missing = dir.path().join("missing.so");
    let out = preflight(&[&missing.display().to_string()]);
    assert_eq!(out.status.code(), Some(2));
    let stderr = text(&out.stderr);
    assert!(stderr.contains("missing.so: cannot read"), "{stderr}");
    assert_eq!(stderr.lines().count(), 1, "{stderr}");

    let empty = dir.path().join("empty.so");
    std::fs::write(&empty, "").unwrap();
    let out = preflight(&[&empty.display().to_string()]);
    assert_eq!(out.status.code(), Some(2));
    assert!(text(&out.stderr).contains("empty.so: empty file"));

    let readme = dir.path().join("README.md");
    std::fs::write(&readme, "# not a binary\n").unwrap();
    let out = preflight(&[&readme.display().to_string()]);
    assert_eq!(out.status.code(), Some(2));
    assert!(text(&out.stderr).contains("not an ELF file, fatbin, cubin or PTX file"));

    let bytes = std::fs::read(fixture("mixed.fatbin")).unwrap();
    let truncated = dir.path().join("truncated.fatbin");
    std::fs::write(&truncated, &bytes[..bytes.len() - 100]).unwrap();
    let out = preflight(&[&truncated.display().to_string()]);
    assert_eq!(out.status.code(), Some(2));
    let stderr = text(&out.stderr);
    assert!(
        stderr.contains("truncated.fatbin: fatbin container body at offset 0x10"),
        "{stderr}"
    );
}

/// Corrupt the second container's magic inside a real shared object: the
/// message names the section and the absolute file offset.
#[test]
fn cli_corrupt_fatbin_in_a_shared_object_is_located() {
    let mut bytes = std::fs::read(fixture("two_gencodes.so")).unwrap();
    let file = inspect("two_gencodes.so");
    let second = file.images[2].offset as usize;
    // The entry header follows its 16-byte container header.
    let container = second - 16;
    assert_eq!(
        bytes[container..container + 4],
        0xBA55_ED50u32.to_le_bytes()
    );
    bytes[container] ^= 0xff;
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("corrupt.so");
    std::fs::write(&path, &bytes).unwrap();
    let out = preflight(&[&path.display().to_string()]);
    assert_eq!(out.status.code(), Some(2));
    let stderr = text(&out.stderr);
    let expected =
        format!(".nv_fatbin section: fatbin container at offset {container:#x}: expected magic");
    assert!(stderr.contains(&expected), "{stderr}\nexpected {expected}");
}

// ---- corrupt input: errors, never panics ----

mod corrupt {
    use super::*;
    use proptest::prelude::*;

    const FILES: [&str; 7] = [
        "mixed.fatbin",
        "zstd.fatbin",
        "lz4.fatbin",
        "concat.fatbin",
        "sm90a.cubin",
        "two_gencodes.so",
        "ptx_only.so",
    ];

    fn bytes(index: usize) -> Vec<u8> {
        std::fs::read(fixture(FILES[index % FILES.len()])).unwrap()
    }

    fn check(data: &[u8]) -> Result<FileImages, String> {
        embedded::inspect_bytes(Path::new("x"), data).map_err(|e| e.to_string())
    }

    #[test]
    fn every_fixture_parses_whole() {
        for (index, name) in FILES.iter().enumerate() {
            assert!(check(&bytes(index)).is_ok(), "{name}");
        }
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(300))]

        /// A fatbin or cubin cut short anywhere is an error, never a panic
        /// or a silently shorter list.
        #[test]
        fn truncation_is_an_error(index in 0usize..5, cut in 0.0f64..1.0) {
            let data = bytes(index);
            let len = 1 + ((data.len() - 1) as f64 * cut) as usize;
            prop_assume!(len < data.len());
            prop_assert!(check(&data[..len]).is_err(), "{} cut at {len}", FILES[index]);
        }

        /// Flipped bytes anywhere in a real file never panic.
        #[test]
        fn flipped_bytes_never_panic(
            index in 0usize..FILES.len(),
            flips in prop::collection::vec((0.0f64..1.0, 1u8..=255), 1..8),
        ) {
            let mut data = bytes(index);
            for (at, xor) in flips {
                let i = ((data.len() - 1) as f64 * at) as usize;
                data[i] ^= xor;
            }
            let _ = check(&data);
        }

        /// Random bytes behind a fatbin magic never panic.
        #[test]
        fn random_fatbins_never_panic(body in prop::collection::vec(any::<u8>(), 0..512)) {
            let mut data = 0xBA55_ED50u32.to_le_bytes().to_vec();
            data.extend(body);
            let _ = check(&data);
        }
    }
}
