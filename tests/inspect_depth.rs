//! `inspect` reads a compressed fatbin only as deep as each target needs
//! (`Depth::Headers`: the entry headers, and a PTX text up to its `.target`
//! line). On real nvcc-built files, compressed each way nvcc compresses,
//! that must list exactly what decompressing every image and reading it
//! lists (`Depth::Images`, what cuobjdump does).

mod inspect_support;

use inspect_support::{Spec, build, cuda_tool, run};
use kernel_preflight::declared::arch::{ImageKind, Suffix};
use kernel_preflight::declared::embedded::{self, Depth, FileImages};
use kernel_preflight::declared::fatbin::{self, Compression};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;

const SHARED: [&str; 3] = ["-Xcompiler", "-fPIC", "-shared"];

/// `many.cu` (32 kernels: SASS images past one 128 KiB zstd block, PTX
/// texts of ~80 KiB) built the ways real libraries are.
const SPECS: &[Spec] = &[
    Spec {
        name: "many_zstd.fatbin",
        source: "many.cu",
        args: &[
            "-fatbin",
            "--compress-mode=size",
            "-gencode",
            "arch=compute_80,code=sm_80",
            "-gencode",
            "arch=compute_90a,code=[sm_90a,compute_90a]",
            "-gencode",
            "arch=compute_100f,code=sm_100f",
            "-gencode",
            "arch=compute_120,code=compute_120",
        ],
    },
    // nvcc's default: PTX compressed, SASS stored as it is.
    Spec {
        name: "many_default.so",
        source: "many.cu",
        args: &[
            SHARED[0],
            SHARED[1],
            SHARED[2],
            "-gencode",
            "arch=compute_103f,code=[sm_103f,compute_103f]",
            "-gencode",
            "arch=compute_120a,code=sm_120a",
        ],
    },
    Spec {
        name: "many_concat.so",
        source: "many.cu",
        args: &[
            SHARED[0],
            SHARED[1],
            SHARED[2],
            "--concat",
            "--compress-mode=size",
            "-gencode",
            "arch=compute_90,code=[sm_90,compute_90]",
            "-gencode",
            "arch=compute_121f,code=[sm_121f,compute_121f]",
        ],
    },
    Spec {
        name: "many_lz4.fatbin",
        source: "many.cu",
        args: &[
            "-fatbin",
            "--compress-mode=speed",
            "-gencode",
            "arch=compute_100a,code=[sm_100a,compute_100a]",
        ],
    },
];

fn fixtures() -> &'static [PathBuf] {
    static BUILT: OnceLock<Vec<PathBuf>> = OnceLock::new();
    BUILT.get_or_init(|| {
        let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join("inspect-depth-fixtures");
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).expect("create fixture dir");
        SPECS.iter().map(|spec| build(spec, &dir)).collect()
    })
}

fn at_depth(path: &Path, depth: Depth) -> FileImages {
    let data = std::fs::read(path).expect("read fixture");
    embedded::inspect_bytes_with(path, &data, depth).unwrap_or_else(|e| panic!("{e}"))
}

fn targets(file: &FileImages) -> Vec<String> {
    file.images.iter().map(|i| i.target.to_string()).collect()
}

#[test]
fn headers_list_what_decompressing_every_image_lists() {
    let mut images = Vec::new();
    for path in fixtures() {
        let full = at_depth(path, Depth::Images);
        assert_eq!(at_depth(path, Depth::Headers), full, "{}", path.display());
        images.extend(full.images);
    }
    // The files hold the cases the header-only path must get right.
    let has = |kind: ImageKind, suffix: Suffix, method: Compression| {
        images
            .iter()
            .any(|i| i.kind == kind && i.target.suffix == suffix && i.compressed == Some(method))
    };
    assert!(has(
        ImageKind::Sass,
        Suffix::ArchSpecific,
        Compression::Zstd
    ));
    assert!(has(ImageKind::Sass, Suffix::Family, Compression::Zstd));
    assert!(has(ImageKind::Sass, Suffix::None, Compression::Zstd));
    assert!(has(ImageKind::Ptx, Suffix::ArchSpecific, Compression::Lz4));
    assert!(has(ImageKind::Ptx, Suffix::Family, Compression::Zstd));
    assert!(has(ImageKind::Ptx, Suffix::None, Compression::Zstd));
    assert!(
        images
            .iter()
            .any(|i| i.kind == ImageKind::Ptx && i.size > 64 << 10 && i.stored_size < i.size),
        "no compressed PTX long enough to stop early in"
    );
}

#[test]
fn a_zstd_ptx_image_is_decoded_only_up_to_what_is_asked() {
    let data = std::fs::read(&fixtures()[0]).expect("read fixture");
    let parsed = fatbin::parse(&data, 0).expect("parse");
    let ptx = parsed
        .entries
        .iter()
        .find(|e| e.kind == ImageKind::Ptx && e.compression == Some(Compression::Zstd))
        .expect("a zstd PTX entry");
    let whole = ptx.bytes().expect("inflate");
    assert_eq!(whole.len() as u64, ptx.size);
    assert!(whole.len() > 64 << 10);

    let head = ptx.head(|h| h.len() >= 5000).expect("head");
    assert_eq!(head.len(), 8 << 10, "4 KiB, then 8 KiB");
    assert_eq!(&head[..], &whole[..head.len()]);
    let all = ptx.head(|_| false).expect("head of everything");
    assert_eq!(&all[..], &whole[..]);
}

/// A fatbin put together by hand, whose labels drop the cubins' suffixes:
/// the header-only path lists the labels, the full read the cubins. nvcc
/// never does this (its labels come from the same `-arch`).
#[test]
fn hand_labelled_images_are_listed_by_their_labels_until_read_whole() {
    let dir = tempfile::tempdir().unwrap();
    let cubin = |name, args| {
        build(
            &Spec {
                name,
                source: "add.cu",
                args,
            },
            dir.path(),
        )
    };
    let sm90a = cubin("sm90a.cubin", &["-cubin", "-arch=sm_90a"]);
    let sm100f = cubin("sm100f.cubin", &["-cubin", "-arch=sm_100f"]);
    let fatbin = dir.path().join("relabelled.fatbin");
    run(Command::new(cuda_tool("fatbinary"))
        .args(["-64", "--compress-all"])
        .arg(format!("--create={}", fatbin.display()))
        .arg(format!("--image3=kind=elf,sm=90,file={}", sm90a.display()))
        .arg(format!(
            "--image3=kind=elf,sm=100,file={}",
            sm100f.display()
        )));
    assert_eq!(
        targets(&at_depth(&fatbin, Depth::Headers)),
        ["sm_90", "sm_100"]
    );
    assert_eq!(
        targets(&at_depth(&fatbin, Depth::Images)),
        ["sm_90a", "sm_100f"]
    );
}
