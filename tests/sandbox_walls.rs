//! The walls of a probe's file system (docs/sandbox.md, `src/sandbox/walls.rs`):
//! the plan is what a child finds in its `/proc/self/mountinfo` and `/dev`;
//! what a child writes anywhere outside its scratch is gone when it ends;
//! a kernel's JIT caches are its own. Real children in real namespaces,
//! as root and (scripts/test-unprivileged.sh) as `nobody`.

mod common;

use kernel_preflight::sandbox::{Cancel, ChildCommand, Isolation, Limits, Sandbox};
use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

fn sandbox() -> Sandbox {
    Sandbox::new()
        .expect("sandbox directory")
        .with_reaper(Some(common::preflight_bin()))
}

/// Runs `script` with `sh -c` in `sandbox`; its stdout, once it exited 0.
fn sh(sandbox: &Sandbox, script: &str, env: &[(&str, &Path)]) -> String {
    let cmd = env.iter().fold(
        ChildCommand::new("sh").arg("-c").arg(script),
        |c, (k, v)| c.env(k, v),
    );
    let report = sandbox
        .run(&cmd, &Limits::default(), &Cancel::new())
        .expect("sandbox run");
    assert!(
        matches!(report.isolation, Isolation::Namespaces { .. }),
        "this test needs namespaces: {:?}",
        report.isolation
    );
    assert_eq!(
        report.termination,
        kernel_preflight::sandbox::Termination::Exited { code: 0 },
        "{}\n{}",
        report.stdout.text(),
        report.stderr.text()
    );
    report.stdout.text()
}

/// A mount point of `/proc/self/mountinfo`, unescaped, and whether it is
/// read-only.
fn mounts(mountinfo: &str) -> Vec<(PathBuf, bool)> {
    mountinfo
        .lines()
        .filter_map(|line| {
            let fields: Vec<&str> = line.split(' ').collect();
            let point = fields.get(4)?.replace("\\040", " ").replace("\\134", "\\");
            let read_only = fields.get(5)?.split(',').any(|o| o == "ro");
            Some((PathBuf::from(point), read_only))
        })
        .collect()
}

#[test]
fn the_plan_is_what_a_probe_finds_in_its_mountinfo_and_dev() {
    let marks = common::fresh_dir("walls-marks");
    let sandbox = sandbox().writable(&marks);
    let plan = sandbox.plan().expect("plan");
    let text = plan.to_string();
    assert!(text.starts_with("--ro-bind / /\n"), "{text}");
    let seen = sh(
        &sandbox,
        "cat /proc/self/mountinfo; echo ===; ls -A /dev",
        &[],
    );
    let (mountinfo, dev) = seen.split_once("===\n").expect("both parts");
    let writable: Vec<PathBuf> = plan.writable();
    let mounts = mounts(mountinfo);
    // Every mount the probe can write through is one the plan names (or
    // below one: a private layer's own submounts, /proc's).
    for (point, read_only) in &mounts {
        if !read_only {
            assert!(
                writable.iter().any(|w| point.starts_with(w)),
                "{} is writable, the plan does not say so:\n{text}\n{mountinfo}",
                point.display()
            );
        }
    }
    // And everything the plan makes writable is so, the caller's marks
    // folder among them.
    for place in &writable {
        assert!(
            mounts.iter().any(|(p, ro)| p == place && !ro),
            "{} is not a writable mount:\n{text}\n{mountinfo}",
            place.display()
        );
    }
    let marks = std::fs::canonicalize(&marks).expect("marks");
    assert!(writable.contains(&marks), "{text}");
    for hidden in plan.hidden().into_iter().filter(|p| p.exists()) {
        assert!(
            mounts.iter().any(|(p, ro)| *p == hidden && *ro),
            "{} is not covered:\n{mountinfo}",
            hidden.display()
        );
    }
    // /dev holds the plan's nodes and the links and folders a program
    // expects, nothing else: no disk, no loop device.
    let found: BTreeSet<String> = dev.lines().map(str::to_owned).collect();
    let mut wanted: BTreeSet<String> = plan
        .devices()
        .iter()
        .map(|p| p.display().to_string())
        .collect();
    wanted.extend(["fd", "stdin", "stdout", "stderr", "ptmx", "pts", "shm"].map(str::to_owned));
    assert_eq!(found, wanted, "{text}");
    assert!(
        found.contains("null") && found.contains("urandom"),
        "{found:?}"
    );
}

/// The places the issue names, as this user can name them: each must
/// refuse a probe's write, or take it privately.
fn host_places() -> Vec<PathBuf> {
    let mut places: Vec<PathBuf> = ["/var/tmp", "/etc", "/usr/local/lib", "/opt", "/root"]
        .iter()
        .map(PathBuf::from)
        .collect();
    places.extend(std::env::var_os("HOME").map(PathBuf::from));
    // The probed interpreter's prefix and its site-packages, where this
    // user can reach the project's venv (`nobody` may not).
    let venv = Path::new(env!("CARGO_MANIFEST_DIR")).join(".venv");
    places.push(venv.clone());
    places.extend(
        std::fs::read_dir(venv.join("lib"))
            .into_iter()
            .flatten()
            .flatten()
            .map(|e| e.path().join("site-packages")),
    );
    places.retain(|p| p.is_dir());
    places
}

#[test]
fn nothing_a_probe_writes_outside_its_scratch_outlives_it() {
    let name = format!("preflight-wall-{}", std::process::id());
    let places = host_places();
    let list: Vec<String> = places.iter().map(|p| p.display().to_string()).collect();
    // Write where possible; then say what this probe itself sees.
    let script = format!(
        "for d in {}; do echo planted > \"$d/{name}\" 2>/dev/null && echo \"wrote $d\"; \
         mkdir -p \"$d/{name}.d\" 2>/dev/null; done; \
         for d in {}; do [ -e \"$d/{name}\" ] && echo \"sees $d\"; done; \
         for n in loop0 zram0 sda vda nvme0n1 mem kmsg; do [ -e /dev/$n ] && echo \"dev $n\"; done; \
         exit 0",
        list.join(" "),
        list.join(" ")
    );
    let first = sh(&sandbox(), &script, &[]);
    assert!(
        !first.contains("dev "),
        "a disk reached the probe:\n{first}"
    );
    for place in &places {
        let planted = place.join(&name);
        assert!(
            !planted.exists() && !place.join(format!("{name}.d")).exists(),
            "{} outlived the probe that wrote it:\n{first}",
            planted.display()
        );
    }
    // A later probe finds none of it either.
    let later = sh(
        &sandbox(),
        &format!(
            "for d in {}; do [ -e \"$d/{name}\" ] && echo \"sees $d\"; done; exit 0",
            list.join(" ")
        ),
        &[],
    );
    assert_eq!(later, "", "a later probe found what an earlier one wrote");
}

#[test]
fn a_kernels_jit_caches_are_its_own() {
    let store = common::fresh_dir("walls-jit");
    kernel_preflight::sandbox::keep_jit_caches_in(&store);
    let home = std::env::var_os("HOME").map(PathBuf::from).expect("HOME");
    let triton = std::env::var_os("TRITON_CACHE_DIR")
        .map_or_else(|| home.join(".triton/cache"), PathBuf::from);
    let entry = format!("planted-{}", std::process::id());
    let plant = format!(
        "mkdir -p \"$T\" ~/.nv/ComputeCache ~/.cache/torch_extensions && \
         echo A > \"$T/{entry}\" && echo A > ~/.nv/ComputeCache/{entry} && \
         echo A > ~/.cache/torch_extensions/{entry}"
    );
    let look = format!(
        "cat \"$T/{entry}\" ~/.nv/ComputeCache/{entry} ~/.cache/torch_extensions/{entry} 2>/dev/null; exit 0"
    );
    let env = [("T", triton.as_path())];
    let (a, b) = (store.join("kernels/a"), store.join("kernels/b"));
    sh(&sandbox().jit_caches_of("kernel-a", &a), &plant, &env);
    // A later probe of the same kernel finds its entries...
    assert_eq!(
        sh(&sandbox().jit_caches_of("kernel-a", &a), &look, &env),
        "A\nA\nA\n"
    );
    // ...another kernel's, and a probe of no kernel, none...
    assert_eq!(
        sh(&sandbox().jit_caches_of("kernel-b", &b), &look, &env),
        ""
    );
    assert_eq!(sh(&sandbox(), &look, &env), "");
    // ...and the user's own caches never had them.
    for place in [
        triton.join(&entry),
        home.join(".nv/ComputeCache").join(&entry),
        home.join(".cache/torch_extensions").join(&entry),
    ] {
        assert!(!place.exists(), "{} reached the user", place.display());
    }
    assert!(
        store.join("kernel-a").is_dir(),
        "the store holds kernel-a's"
    );
    // The store says whose each folder is, so that pruning it can tell a
    // kernel that is gone.
    assert_eq!(
        kernel_preflight::sandbox::jit_owner(&store.join("kernel-a")),
        Some(a)
    );
}
