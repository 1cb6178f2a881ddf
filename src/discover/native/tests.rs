use super::*;

fn parse_in(files: &[&str], text: &str) -> Result<NativeTarget, NativeError> {
    let dir = tempfile::tempdir().unwrap();
    for f in files {
        std::fs::write(dir.path().join(f), b"x").unwrap();
    }
    let path = dir.path().join(MANIFEST);
    parse(dir.path(), &path, text)
}

fn message(text: &str) -> String {
    parse_in(&["k.cubin", "k.cu", "k.bin"], text)
        .unwrap_err()
        .to_string()
}

const GOOD: &str = r#"
[[module]]
file = "k.cubin"

[[module.launch]]
function = "axpy"
grid = 4
block = [256]
args = [
  { scalar = "f32", value = 2.0 },
  { buffer = "f32", init = [1, 2, 3] },
  { buffer = "f32", len = 3, init = 1.0, expect = [3, 5, 7], atol = 1e-6 },
  { scalar = "u32", value = 3 },
]
"#;

#[test]
fn a_valid_manifest_becomes_launches() {
    let t = parse_in(&["k.cubin"], GOOD).unwrap();
    assert_eq!(t.modules.len(), 1);
    let m = &t.modules[0];
    assert_eq!(m.spec.kind, ModuleKind::Cubin);
    let l = &m.launches[0];
    assert_eq!((l.grid, l.block), ([4, 1, 1], [256, 1, 1]));
    assert_eq!(
        (l.warmup, l.iterations),
        (DEFAULT_WARMUP, DEFAULT_ITERATIONS)
    );
    assert_eq!(
        l.args[2],
        Arg::Buffer {
            ty: ElemType::F32,
            init: vec![1.0; 3],
            expect: Some(vec![3.0, 5.0, 7.0]),
            tolerance: Tolerance {
                atol: 1e-6,
                rtol: 1e-5
            },
        }
    );
}

const LAUNCH: &str = "[[module]]\nfile = 'k.cubin'\n[[module.launch]]\nfunction = 'f'\n";

#[test]
fn errors_name_the_line_the_key_and_what_was_expected() {
    for (text, want) in [
        (
            "[[module]]\nfile = 'k.bin'\n".to_owned(),
            ":2: module[0].file: cannot tell the kind",
        ),
        (
            "[[module]]\nfile = 'gone.cubin'\n".into(),
            ":2: module[0].file: ",
        ),
        ("".into(), "preflight.toml: module: no [[module]] tables"),
        (
            format!("{LAUNCH}grid = 1\nblock = [32, 32, 2]\n"),
            ":6: module[0].launch[0].block: 2048 threads",
        ),
        (
            format!("{LAUNCH}grid = [1, 0]\nblock = 1\n"),
            ":5: module[0].launch[0].grid: [1, 0]",
        ),
        (
            format!("{LAUNCH}grid = 1\nblock = 1\nargs = [{{ buffer = 'u8', init = [1, 256] }}]\n"),
            ":7: module[0].launch[0].args[0].init[1]: 256 is out of range for u8",
        ),
        (
            format!("{LAUNCH}grid = 1\nblock = 1\nargs = [\n  {{ scalar = 'u32', value = 1 }},\n  {{ buffer = 'f32' }},\n]\n"),
            ":9: module[0].launch[0].args[1]: a buffer needs `len`",
        ),
        (
            format!("{LAUNCH}grid = 1\nblock = 1\nargs = [{{ buffer = 'f32', len = 2, expect = [1, 2, 3] }}]\n"),
            "args[0].expect: has 3 values but the buffer has 2",
        ),
        (
            format!("{LAUNCH}grid = 1\nblock = 1\nargs = [{{ value = 1 }}]\n"),
            "args[0]: needs `scalar = TYPE` or `buffer = TYPE`",
        ),
        (
            format!("{LAUNCH}grid = 1\nblock = 1\niterations = 0\n"),
            ":7: module[0].launch[0].iterations: must be at least 1",
        ),
        (
            "[[module]]\nfile = 'k.cubin'\ntarget = 'sm_90'\n".into(),
            "module[0]: target and nvrtc_options apply to CUDA C source",
        ),
        (
            "[[module]]\nfile = 'k.cu'\n\ntarget = '90'\n".into(),
            ":4: module[0].target: \"90\"",
        ),
        (
            "[[module]]\nfile = 'k.cubin'\n[[module]]\nfile = 'k.cu'\n[[module.launch]]\nfunction = ''\ngrid = 1\nblock = 1\n".into(),
            ":6: module[1].launch[0].function: must not be empty",
        ),
    ] {
        let got = message(&text);
        assert!(got.contains(want), "{text:?}\n got: {got}\nwant: {want}");
    }
}

#[test]
fn syntax_errors_carry_line_and_column_on_one_line() {
    let got = message("[[module]]\nfile = 'k.cubin'\nfunction = 'f'\n");
    assert!(got.contains("preflight.toml:3:1: "), "{got}");
    assert!(got.contains("unknown field `function`"), "{got}");
    assert!(!got.contains('\n'), "one line: {got}");
    let got = message("[[module]\n");
    assert!(got.contains("preflight.toml:1:"), "{got}");
    let got = message(&format!(
        "{LAUNCH}grid = 1\nblock = 1\nargs = [{{ scalar = 'f16', value = 1 }}]\n"
    ));
    assert!(got.contains("preflight.toml:7:"), "{got}");
    assert!(got.contains("f16"), "{got}");
}
