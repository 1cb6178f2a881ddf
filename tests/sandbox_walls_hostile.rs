//! The walls against a hostile kernel, end to end through the real binary
//! (docs/sandbox.md): a variant that writes wherever its user could — the
//! home folder, `/var/tmp`, `/etc`, `/usr/local/lib`, `/opt`, the probed
//! interpreter's prefix and site-packages (a `.pth` among them), the JIT
//! caches — leaves nothing a later probe of another kernel, a later
//! program or a later fork server finds; a later probe of the same kernel
//! finds its own JIT entries, and only those. Fresh here, forked under
//! scripts/test-forked.sh, as root and (below) as `nobody`.

mod common;
mod hostile;
mod probe_fixtures;

use hostile::{check_with, fixture, found, is_root, kernel, namespaced, outcomes, report_dir};
use serde_json::Value;
use std::ffi::OsStr;
use std::path::{Path, PathBuf};

/// Removes whatever a failed wall let the planter leave on the host, so
/// that a failure does not outlive the test either.
struct Sweep(Vec<PathBuf>);

impl Drop for Sweep {
    fn drop(&mut self) {
        for path in &self.0 {
            let _ = std::fs::remove_file(path);
        }
    }
}

fn paths(report: &Value, key: &str) -> Vec<PathBuf> {
    report[key]
        .as_array()
        .unwrap_or_else(|| panic!("{key}: {report:#}"))
        .iter()
        .map(|p| PathBuf::from(p.as_str().expect("a path")))
        .collect()
}

#[test]
fn a_variant_that_writes_everywhere_leaves_nothing_but_its_own_jit_entries() {
    let report = report_dir();
    let cache = common::fresh_dir("walls-cache");
    let tag = format!("{}", std::process::id());
    let name = format!("planted-{tag}");
    let planter = kernel(&fixture("write_everywhere.py"));
    let run = |repo: &Path, role_tag: &str, look: Option<&str>| -> Value {
        let mut env: Vec<(&str, &OsStr)> = vec![
            ("HOSTILE_REPORT", report.as_os_str()),
            ("PREFLIGHT_CACHE", cache.as_os_str()),
            ("HOSTILE_TAG", OsStr::new(role_tag)),
        ];
        if let Some(look) = look {
            env.push(("HOSTILE_LOOK", OsStr::new(look)));
        }
        let (out, json) = check_with(&[repo], &["--no-cache"], &env);
        assert_eq!(out.status.code(), Some(0), "{}", common::stderr(&out));
        assert_eq!(outcomes(&json)[0]["kind"], "pass", "{json:#}");
        assert!(namespaced(&json), "{json:#}");
        // Under scripts/test-forked.sh each run's probe is forked, from a
        // server of its own: the later server of the issue.
        if std::env::var_os("PREFLIGHT_TEST_FORKED").is_some_and(|v| v == "1") {
            assert_eq!(outcomes(&json)[0]["made"], "forked", "{json:#}");
        }
        let role = if look.is_some() { "look" } else { "plant" };
        found(&report, &format!("write_everywhere-{role}-{role_tag}.json"))
    };

    let planted = run(&planter.root(), &tag, None);
    let wrote: Vec<PathBuf> = paths(&planted, "wrote")
        .into_iter()
        .map(|p| {
            if p.extension().is_some_and(|e| e == "pth") {
                p
            } else {
                p.join(&name)
            }
        })
        .chain(paths(&planted, "jit_wrote").iter().map(|p| p.join(&name)))
        .collect();
    let _sweep = Sweep(wrote.clone());
    // In its own view it wrote into its home and its JIT caches at least.
    assert_eq!(paths(&planted, "jit_wrote").len(), 3, "{planted:#}");
    for path in &wrote {
        assert!(
            !path.exists(),
            "{} outlived the probe that wrote it: {planted:#}",
            path.display()
        );
    }

    // A later probe of another kernel (under scripts/test-forked.sh, from
    // a later fork server) finds nothing, and no .pth ran in it.
    let other = kernel(&fixture("write_everywhere.py"));
    let seen = run(&other.root(), &format!("{tag}-other"), Some(&tag));
    for key in ["found", "jit_found"] {
        assert_eq!(seen[key], serde_json::json!([]), "{key}: {seen:#}");
    }
    assert_eq!(seen["pth_ran"], Value::Null, "{seen:#}");

    // A later probe of the same kernel finds its own JIT entries, and only
    // those.
    let again = run(&planter.root(), &format!("{tag}-again"), Some(&tag));
    assert_eq!(again["found"], serde_json::json!([]), "{again:#}");
    assert_eq!(again["jit_found"], planted["jit_wrote"], "{again:#}");

    // A later program of the probed interpreter: no .pth runs in it.
    let program = std::process::Command::new(probe_fixtures::python())
        .args([
            "-c",
            "import builtins; print(getattr(builtins, 'PREFLIGHT_PLANTED', None))",
        ])
        .output()
        .expect("run the interpreter");
    assert_eq!(common::stdout(&program), "None\n");
}

/// As root: the other tests here again as `nobody`, whose probes get a
/// user namespace.
#[test]
fn the_walls_hold_for_an_unprivileged_user_too() {
    if !is_root() {
        eprintln!("already unprivileged: the test above ran as this user");
        return;
    }
    hostile::as_nobody(&["the_walls_hold_for_an_unprivileged_user_too"], 2);
}

/// Where Linux refuses overlayfs (forced by the test-only switch, which
/// each probe's reaper takes as the mount's `EPERM`, as `unshare` forces a
/// refusal of the namespaces): the probe still reads the host's home
/// folder (and the venv it runs in, under `/tmp` where the checkout is),
/// writes new names there privately, but cannot change the host's file;
/// the run says so once, and `doctor`'s plan shows it. With the overlays,
/// the same kernel writes its private copy of that file.
#[test]
fn without_overlays_the_run_says_so_once_and_doctor_shows_it() {
    use kernel_preflight::sandbox::REFUSE_OVERLAY_FOR_TESTS as REFUSE;
    let home = common::fresh_dir("flat-home");
    std::fs::write(home.join("marker"), "the host's").expect("write the marker");
    // A folder of the host's on the way to a JIT cache of the kernel's
    // (`~/.cache/torch_extensions`): private, yet its entries are there.
    std::fs::create_dir_all(home.join(".cache/other")).expect("make ~/.cache/other");
    std::fs::write(home.join(".cache/other/file"), "cached").expect("write the cached file");
    let looks = kernel(
        "import os\n\
         home = os.path.expanduser('~')\n\
         assert open(os.path.join(home, 'marker')).read() == \"the host's\", 'no host home'\n\
         assert open(os.path.join(home, '.cache/other/file')).read() == 'cached', 'no ~/.cache'\n\
         os.makedirs(os.path.join(home, '.cache/torch_extensions/x'))\n\
         open(os.path.join(home, 'new'), 'w').write('mine')\n\
         try:\n    open(os.path.join(home, 'marker'), 'w').write('changed')\n\
         except OSError:\n    pass\n\
         else:\n    raise AssertionError('the host marker took a write')\n",
    );
    let run = |switch: &str| {
        let env = [("HOME", home.as_os_str()), (REFUSE, OsStr::new(switch))];
        let (out, json) = check_with(&[&looks.root()], &["--no-cache"], &env);
        assert!(namespaced(&json), "{json:#}");
        let stderr = common::stderr(&out);
        let warned = stderr.matches("overlayfs refused").count();
        let kind = outcomes(&json)[0]["kind"].clone();
        (warned, kind, format!("{stderr}\n{json:#}"))
    };
    let (warned, kind, stderr) = run("1");
    assert_eq!((warned, kind), (1, Value::from("pass")), "{stderr}");
    assert!(
        stderr.contains("sees the host's entries of /tmp, TMPDIR and its home folder read-only"),
        "{stderr}"
    );
    let (warned, kind, stderr) = run("");
    assert_eq!(warned, 0, "{stderr}");
    assert_ne!(
        kind,
        Value::from("pass"),
        "the overlay refused a private copy: {stderr}"
    );
    let left: Vec<_> = std::fs::read_dir(&home)
        .expect("read the home")
        .flatten()
        .map(|e| e.file_name())
        .collect();
    let mut left = left;
    left.sort();
    assert_eq!(left, [".cache", "marker"], "a probe's write outlived it");
    assert_eq!(
        std::fs::read_to_string(home.join("marker")).expect("the marker"),
        "the host's"
    );

    let out = common::preflight_cmd()
        .args(["doctor", "--json", "--python"])
        .arg(probe_fixtures::python())
        .env("HOME", &home)
        .env(REFUSE, "1")
        .output()
        .expect("run doctor");
    let json: Value = serde_json::from_slice(&out.stdout).expect("doctor --json");
    let walls: Vec<&str> = json["walls"]
        .as_array()
        .unwrap_or_else(|| panic!("{json:#}"))
        .iter()
        .filter_map(Value::as_str)
        .collect();
    let home = std::fs::canonicalize(&home).expect("home");
    let shown = format!("--bind SCRATCH {}  (the host's entries", home.display());
    assert!(
        walls
            .iter()
            .any(|w| w.starts_with(&shown) && w.contains("overlayfs refused")),
        "{walls:#?}"
    );
    assert!(
        !walls.iter().any(|w| w.starts_with("--overlay")),
        "{walls:#?}"
    );
}
