//! preflight's own smoke workloads for the hub kernels transformers loads
//! (`probes/kernels/`): each is found by its kernel's hub repo id, parses
//! as Python, and, on this machine without a GPU or torch, fails cleanly —
//! `no_device` for a cuda variant (the device step comes before any
//! workload), `missing_dependency` on torch where the workload itself runs.
//! A kernel that only shares a name with one of them runs none, unless its
//! user asks for it. Their real runs are in `scripts/gpu-check.sh`.

mod common;
mod probe_fixtures;

use common::{age, fresh_dir, kernel_repo, preflight_cmd, stderr, stdout};
use kernel_preflight::classify::{OutcomeKind, Phase};
use kernel_preflight::discover::RepoId;
use kernel_preflight::probe::{
    Job, LibraryEntry, Placement, SMOKE_AS_ENV, SmokeChoice, SmokeSource, Subject,
};
use kernel_preflight::protocol::Depth;
use kernel_preflight::variant::VariantName;
use probe_fixtures::{Repo, metadata, probe_job, python, quick_limits};
use serde_json::Value;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

/// The hub kernels transformers' integrations load, by their hub repo ids
/// (transformers' `nvfp4` is `kernels-community/nvfp4-gemm`).
const KERNELS: &[&str] = &[
    "kernels-community/deep-gemm",
    "kernels-community/finegrained-fp8",
    "kernels-community/sonic-moe",
    "kernels-community/flash-attn2",
    "kernels-community/flash-attn3",
    "kernels-community/vllm-flash-attn3",
    "kernels-community/nvfp4-gemm",
    "kernels-community/gpt-oss-triton-kernels",
    "kernels-community/triton-kernels",
];

#[test]
fn every_kernel_transformers_loads_has_a_smoke_that_parses() {
    for kernel in KERNELS {
        let source = LibraryEntry::named(kernel)
            .unwrap_or_else(|e| panic!("no smoke for {kernel}: {e}"))
            .source();
        assert!(source.contains("def smoke(kernel, device)"), "{kernel}");
        let out = Command::new(python())
            .args(["-c", "import ast, sys; ast.parse(sys.stdin.read())"])
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .and_then(|mut child| {
                use std::io::Write;
                child.stdin.take().unwrap().write_all(source.as_bytes())?;
                child.wait_with_output()
            })
            .expect("python runs");
        assert!(
            out.status.success(),
            "{kernel}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
}

fn probe(kernel: &str, variant: &str) -> kernel_preflight::classify::Outcome {
    let repo = Repo::new();
    let mut m = metadata(variant);
    m["name"] = kernel.rsplit('/').next().unwrap().into();
    let path = repo.variant_with(variant, "ENTRY = 1\n", m);
    let id = RepoId::parse(kernel).unwrap();
    let smoke = SmokeSource::choose(&SmokeChoice::default(), None, Some(&id));
    assert!(
        matches!(&smoke, SmokeSource::Library(entry) if entry.id() == kernel),
        "{kernel}: {smoke:?}"
    );
    let job = Job {
        subject: Subject::Variant {
            name: VariantName::parse(variant).unwrap(),
            path,
        },
        device: Placement::Default,
        smoke,
        depth: Depth::Verified,
        limits: quick_limits(),
    };
    probe_job(
        &kernel_preflight::probe::PythonExecutor::new(python()),
        &job,
    )
    .1
}

#[test]
fn without_a_gpu_each_smoke_fails_cleanly() {
    for kernel in KERNELS {
        let outcome = probe(kernel, "torch-cuda");
        assert_eq!(outcome.kind, OutcomeKind::NoDevice, "{kernel}: {outcome:?}");
        assert_eq!(outcome.phase, Phase::Load, "{kernel}: {outcome:?}");
    }
    // Where the workload itself runs (a universal variant on the cpu), it
    // stops at the `import torch` this machine cannot satisfy.
    for kernel in [
        "kernels-community/deep-gemm",
        "kernels-community/flash-attn3",
        "kernels-community/triton-kernels",
    ] {
        let outcome = probe(kernel, "torch-universal");
        assert_eq!(
            outcome.kind,
            OutcomeKind::MissingDependency,
            "{kernel}: {outcome:?}"
        );
        assert_eq!(outcome.phase, Phase::Smoke, "{kernel}: {outcome:?}");
        assert!(outcome.message.contains("`torch`"), "{kernel}: {outcome:?}");
    }
}

/// A working kernel named `relu` whose API is not the hub's `relu` kernel's:
/// `apply(x)`, pure Python, one universal variant.
const APPLY: &str = "def apply(x):\n    return [max(v, 0) for v in x]\n";

/// The `relu` kernel above as a local checkout `<dir>/relu`.
fn local_relu() -> PathBuf {
    kernel_repo(
        &fresh_dir("relu"),
        "relu",
        &["torch-universal".into()],
        APPLY,
    )
}

/// The same kernel as a snapshot of `repo` in the hub cache `cache`.
fn cached_relu(cache: &Path, repo: &str) -> PathBuf {
    let (org, name) = repo.split_once('/').unwrap();
    let snapshots = cache.join(format!("kernels--{org}--{name}/snapshots"));
    let snapshot = kernel_repo(&snapshots, "0123abc", &["torch-universal".into()], APPLY);
    // The variant's metadata names the kernel as the hub's do.
    let variant = snapshot.join("build/torch-universal");
    let metadata = std::fs::read_to_string(variant.join("metadata.json")).unwrap();
    std::fs::write(
        variant.join("metadata.json"),
        metadata.replace("\"0123abc\"", "\"relu\""),
    )
    .unwrap();
    snapshot
}

/// `preflight check --json` with `args`, reading the hub cache `cache`.
fn check(cache: &Path, env: &[(&str, &str)], args: &[&str]) -> Output {
    let mut cmd = preflight_cmd();
    cmd.env("KERNELS_CACHE", cache).env_remove(SMOKE_AS_ENV);
    cmd.envs(env.iter().copied());
    cmd.arg("check")
        .arg("--python")
        .arg(python())
        .arg("--json")
        .args(args)
        .output()
        .expect("run preflight check")
}

/// The one result's `(kind, phase, depth)` of a check that answered.
fn outcome(out: &Output) -> (String, String, Value) {
    let doc: Value = serde_json::from_slice(&out.stdout)
        .unwrap_or_else(|e| panic!("not JSON ({e}):\n{}\n{}", stdout(out), stderr(out)));
    let results = doc["results"].as_array().expect("results");
    assert_eq!(results.len(), 1, "{doc}");
    let o = &results[0]["outcome"];
    (
        o["kind"].as_str().unwrap().to_owned(),
        o["phase"].as_str().unwrap().to_owned(),
        o["depth"].clone(),
    )
}

/// Imported, and no workload run: the kernel works as far as anyone knows.
fn imported_only() -> (String, String, Value) {
    ("pass".into(), "done".into(), "load".into())
}

/// The library's `relu` smoke ran, and stopped at the `import torch` this
/// machine cannot satisfy.
fn relu_smoke_ran(out: &Output) {
    let (kind, phase, _) = outcome(out);
    assert_eq!(
        (kind.as_str(), phase.as_str()),
        ("missing_dependency", "smoke"),
        "{}",
        stdout(out)
    );
    assert!(stdout(out).contains("`torch`"), "{}", stdout(out));
}

#[test]
fn a_kernel_that_only_shares_a_name_runs_no_library_smoke() {
    let cache = fresh_dir("hub");
    let local = local_relu();
    let out = check(&cache, &[], &[local.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert_eq!(outcome(&out), imported_only());
    cached_relu(&cache, "myorg/relu");
    let out = check(&cache, &[], &["--repo", "myorg/relu"]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert_eq!(outcome(&out), imported_only());
}

#[test]
fn a_snapshot_of_the_repo_it_was_written_for_runs_it() {
    let cache = fresh_dir("hub");
    let snapshot = cached_relu(&cache, "kernels-community/relu");
    relu_smoke_ran(&check(&cache, &[], &["--repo", "kernels-community/relu"]));
    // The snapshot's place in the cache is the evidence, however it is named.
    let variant = snapshot.join("build/torch-universal");
    relu_smoke_ran(&check(&cache, &[], &[variant.to_str().unwrap()]));
}

#[test]
fn a_fork_opts_in_by_name() {
    let cache = fresh_dir("hub");
    cached_relu(&cache, "myorg/relu");
    let forks = [(SMOKE_AS_ENV, "myorg/relu=kernels-community/relu")];
    relu_smoke_ran(&check(&cache, &forks, &["--repo", "myorg/relu"]));
    let local = local_relu();
    relu_smoke_ran(&check(
        &cache,
        &[],
        &[
            local.to_str().unwrap(),
            "--smoke-as",
            "kernels-community/relu",
        ],
    ));
    // The mapping names repo ids: a local checkout has none.
    let out = check(&cache, &forks, &[local.to_str().unwrap()]);
    assert_eq!(outcome(&out), imported_only());
}

#[test]
fn an_outcome_probed_with_one_smoke_does_not_answer_for_another() {
    let cache = fresh_dir("hub");
    cached_relu(&cache, "myorg/relu");
    // Settled files, which a warm record trusts.
    age(&cache);
    let outcomes = fresh_dir("outcomes");
    let shared = |env: &[(&str, &str)], args: &[&str]| {
        let mut env = env.to_vec();
        env.push(("PREFLIGHT_CACHE", outcomes.to_str().unwrap()));
        check(&cache, &env, args)
    };
    let repo = ["--repo", "myorg/relu"];
    assert_eq!(outcome(&shared(&[], &repo)), imported_only());
    let forks = [(SMOKE_AS_ENV, "myorg/relu=kernels-community/relu")];
    relu_smoke_ran(&shared(&forks, &repo));
    assert_eq!(outcome(&shared(&[], &repo)), imported_only());
    age(&outcomes);
    // `select`'s warm record (made by the first run, used by the second)
    // answers only for the smoke it was made with.
    let select = |env: &[(&str, &str)]| {
        let mut cmd = preflight_cmd();
        cmd.env("KERNELS_CACHE", &cache)
            .env("PREFLIGHT_CACHE", &outcomes)
            .env_remove(SMOKE_AS_ENV)
            .envs(env.iter().copied());
        cmd.args(["select", "--repo", "myorg/relu", "--python"])
            .arg(python())
            .output()
            .expect("run preflight select")
    };
    for env in [&[][..], &[][..], &forks[..], &[][..]] {
        let out = select(env);
        let works = env.is_empty();
        assert_eq!(
            out.status.code(),
            Some(if works { 0 } else { 1 }),
            "{env:?}: {}{}",
            stdout(&out),
            stderr(&out)
        );
    }
}

#[test]
fn a_library_smoke_named_wrongly_is_bad_input() {
    let cache = fresh_dir("hub");
    let local = local_relu();
    let local = local.to_str().unwrap();
    for (env, args, message) in [
        (
            None,
            vec![local, "--smoke-as", "relu"],
            "--smoke-as relu: invalid repo id \"relu\"",
        ),
        (
            None,
            vec![local, "--smoke-as", "myorg/relu"],
            "--smoke-as myorg/relu: no library smoke for myorg/relu (the library has: kernels-community/activation, ",
        ),
        (
            Some("myorg/relu"),
            vec![local],
            "PREFLIGHT_SMOKE_AS: \"myorg/relu\": expected FORK=ENTRY",
        ),
        (
            Some("myorg/relu=kernels-community/relu4"),
            vec![local],
            "PREFLIGHT_SMOKE_AS: no library smoke for kernels-community/relu4",
        ),
    ] {
        let env: Vec<(&str, &str)> = env.map(|v| (SMOKE_AS_ENV, v)).into_iter().collect();
        let out = check(&cache, &env, &args);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {}", stderr(&out));
        assert!(stderr(&out).contains(message), "{args:?}: {}", stderr(&out));
        assert_eq!(stderr(&out).lines().count(), 1, "{}", stderr(&out));
    }
}
