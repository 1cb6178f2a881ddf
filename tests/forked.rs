//! Forked probes (src/probe/fork.rs): what must hold of the fork server and
//! of the children forked from it. Every other fixture runs forked too
//! (`scripts/test-forked.sh`); these are the properties only forking has.
//! The server holds a stand-in torch (`probe_fixtures::fakes::torch`) and
//! the test interpreter's `kernels`.

mod fake_cuda;
mod probe_fixtures;

use kernel_preflight::classify::OutcomeKind;
use kernel_preflight::probe::{PRELOAD_ENV, PythonExecutor, SmokeSource};
use kernel_preflight::protocol::Made;
use probe_fixtures::{
    Repo, Site, fakes, job, probe_as_it_goes, probe_job_fresh, python, quick_limits,
};

/// An executor forking from a server that imports the fake torch of `site`.
fn forking(site: &Site) -> PythonExecutor {
    kernel_preflight::sandbox::set_default_reaper(env!("CARGO_BIN_EXE_preflight").into());
    site.executor(&python()).forked()
}

fn torch_site() -> Site {
    let site = Site::new();
    fakes::torch(&site, None, 0);
    site
}

#[test]
fn a_variant_cannot_change_what_the_next_one_sees() {
    let site = torch_site();
    let executor = forking(&site);
    let repo = Repo::new();
    let poisoner = repo.variant(
        "torch-universal",
        "import os, sys, types, torch\n\
         sys.modules['preflight_poison'] = types.ModuleType('preflight_poison')\n\
         torch.poisoned = True\n\
         torch.__version__ = 'poisoned'\n\
         os.environ['PREFLIGHT_POISON'] = '1'\n\
         sys.path.insert(0, '/poisoned')\n",
    );
    let other = Repo::new();
    let checker = other.variant(
        "torch-universal",
        "import os, sys, torch\n\
         seen = [what for what, there in [\n\
             ('a module', 'preflight_poison' in sys.modules),\n\
             ('a torch global', hasattr(torch, 'poisoned') or torch.__version__ == 'poisoned'),\n\
             ('the environment', 'PREFLIGHT_POISON' in os.environ),\n\
             ('sys.path', '/poisoned' in sys.path)] if there]\n\
         if seen:\n    raise RuntimeError('the last variant changed ' + ', '.join(seen))\n",
    );
    for variant in [&poisoner, &checker, &poisoner, &checker] {
        let job = job(variant, SmokeSource::LoadOnly, quick_limits());
        let (run, outcome) = probe_fixtures::probe_job(&executor, &job);
        assert_eq!(run.evidence.made, Made::Forked);
        assert_eq!(outcome.kind, OutcomeKind::Pass, "{outcome:?}");
    }
    assert_eq!(executor.fork_fallback(), None);
}

#[test]
fn forked_and_fresh_probes_end_alike_and_say_how_they_were_made() {
    let site = torch_site();
    let executor = forking(&site);
    let repo = Repo::new();
    let cases = [
        (
            "torch-universal",
            "import torch\nadd = lambda a, b: a + b\n",
        ),
        (
            "torch-cpu",
            "import torch\nraise ImportError('no _C here')\n",
        ),
        ("torch-cuda", "import os\nos.abort()\n"),
    ];
    for (name, init) in cases {
        let variant = repo.variant(name, init);
        let job = job(&variant, SmokeSource::LoadOnly, quick_limits());
        let (forked_run, forked) = probe_fixtures::probe_job(&executor, &job);
        let (fresh_run, fresh) = probe_job_fresh(&site.executor(&python()), &job);
        assert_eq!(forked_run.evidence.made, Made::Forked, "{name}");
        assert_eq!(fresh_run.evidence.made, Made::Fresh, "{name}");
        assert_eq!(forked.made, Made::Forked, "{name}");
        let same = |mut o: kernel_preflight::classify::Outcome| {
            o.made = Made::Fresh;
            o.stderr_tail.clear();
            o
        };
        assert_eq!(same(forked), same(fresh), "{name}");
    }
}

#[test]
fn a_server_that_started_a_thread_falls_back_to_fresh_processes() {
    let site = torch_site();
    site.file(
        "preflight_threads.py",
        "import threading, time\nthreading.Thread(target=time.sleep, args=(600,), daemon=True).start()\n",
    );
    let mut executor = forking(&site);
    executor
        .env
        .push((PRELOAD_ENV.into(), "preflight_threads".into()));
    let repo = Repo::new();
    let variant = repo.variant("torch-universal", "add = lambda a, b: a + b\n");
    let job = job(&variant, SmokeSource::LoadOnly, quick_limits());
    let (run, outcome) = probe_as_it_goes(&executor, &job);
    assert_eq!(outcome.kind, OutcomeKind::Pass, "{outcome:?}");
    assert_eq!(run.evidence.made, Made::Fresh);
    let why = executor.fork_fallback().expect("the server was given up");
    // The threads are listed by name; no pool was there to stop.
    assert!(why.contains("runs 2 threads ("), "{why}");
    assert!(why.contains("(none loaded)"), "{why}");
}

/// The real numpy of `scripts/requirements-numpy.txt`, whose OpenBLAS
/// starts its workers when it is imported.
fn numpy_site() -> std::path::PathBuf {
    let site = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join(".deps-numpy");
    assert!(
        site.join("numpy").is_dir(),
        "run scripts/setup-env.sh (.deps-numpy)"
    );
    site
}

#[test]
fn a_server_that_imported_numpy_forks_and_its_child_has_a_fresh_childs_blas_pool() {
    let site = torch_site();
    let path =
        std::env::join_paths([site.dir.path().to_path_buf(), numpy_site()]).expect("a PYTHONPATH");
    let mut executor = forking(&site);
    executor.env.retain(|(name, _)| name != "PYTHONPATH");
    executor.env.push(("PYTHONPATH".into(), path));
    executor.env.push((PRELOAD_ENV.into(), "numpy".into()));
    let repo = Repo::new();
    // What a kernel can see of numpy's BLAS pool: its size, the process's
    // threads once numpy is imported, and after a product big enough to
    // run on every worker. The variant says it in its import error.
    let variant = repo.variant(
        "torch-universal",
        "import ctypes, os, numpy\n\
         threads = lambda: len(os.listdir('/proc/self/task'))\n\
         after_import = threads()\n\
         lib = next(l.split()[-1] for l in open('/proc/self/maps') if 'openblas' in l)\n\
         blas = ctypes.CDLL(lib, mode=os.RTLD_NOLOAD)\n\
         a = numpy.ones((512, 512))\n\
         a @ a\n\
         raise ImportError('blas pool %d, threads after import %d, after a product %d' % (\n\
             blas.scipy_openblas_get_num_threads64_(), after_import, threads()))\n",
    );
    let job = job(&variant, SmokeSource::LoadOnly, quick_limits());
    let (forked_run, forked) = probe_as_it_goes(&executor, &job);
    assert_eq!(executor.fork_fallback(), None);
    assert_eq!(forked_run.evidence.made, Made::Forked);
    let mut fresh_executor = site.executor(&python());
    fresh_executor.env = executor.env.clone();
    let (_, fresh) = probe_job_fresh(&fresh_executor, &job);
    assert!(fresh.message.contains("blas pool"), "{fresh:?}");
    assert_eq!(forked.message, fresh.message);
    // With more than one CPU the pool has workers: the server stopped them.
    if std::thread::available_parallelism().is_ok_and(|n| n.get() > 1) {
        assert!(
            !fresh.message.contains("threads after import 1,"),
            "{}",
            fresh.message
        );
    }
}

#[test]
fn a_server_holding_a_cuda_context_falls_back_to_fresh_processes() {
    let site = torch_site();
    // torch.cuda as it is once something initialised CUDA in the server.
    site.file(
        "torch/cuda.py",
        "def is_initialized():\n    return True\n\ndef is_available():\n    return True\n",
    );
    let executor = forking(&site);
    let repo = Repo::new();
    let variant = repo.variant("torch-universal", "add = lambda a, b: a + b\n");
    let job = job(&variant, SmokeSource::LoadOnly, quick_limits());
    let (run, outcome) = probe_as_it_goes(&executor, &job);
    assert_eq!(outcome.kind, OutcomeKind::Pass, "{outcome:?}");
    assert_eq!(run.evidence.made, Made::Fresh);
    let why = executor.fork_fallback().expect("the server was given up");
    assert!(why.contains("CUDA context"), "{why}");
}

#[test]
fn a_server_whose_imports_started_the_cuda_driver_falls_back_to_fresh_processes() {
    // What torch.cuda.is_available() does without marking torch.cuda
    // initialized: load libcuda and call cuInit (here the stand-in's).
    let site = torch_site();
    std::fs::copy(
        fake_cuda::fake_libcuda(),
        site.dir.path().join("libcuda.so.1"),
    )
    .unwrap();
    site.file(
        "preflight_cuinit.py",
        "import ctypes, os\n\
         ctypes.CDLL(os.path.join(os.path.dirname(__file__), 'libcuda.so.1')).cuInit(0)\n",
    );
    let mut executor = forking(&site);
    executor
        .env
        .push((PRELOAD_ENV.into(), "preflight_cuinit".into()));
    let repo = Repo::new();
    let variant = repo.variant("torch-universal", "add = lambda a, b: a + b\n");
    let job = job(&variant, SmokeSource::LoadOnly, quick_limits());
    let (run, outcome) = probe_as_it_goes(&executor, &job);
    assert_eq!(outcome.kind, OutcomeKind::Pass, "{outcome:?}");
    assert_eq!(run.evidence.made, Made::Fresh);
    let why = executor.fork_fallback().expect("the server was given up");
    assert!(
        why.contains("CUDA driver loaded") && why.contains("libcuda.so.1"),
        "{why}"
    );
}

#[test]
fn the_server_queries_no_device() {
    let site = torch_site();
    let marker = site.dir.path().join("queried");
    // Every device question torch answers leaves the asking pid here.
    site.file(
        "torch/cuda.py",
        &format!(
            "import os\n\
             def _asked(name):\n    with open({marker:?}, 'a') as f:\n        f.write('%d %s\\n' % (os.getpid(), name))\n\
             def is_initialized():\n    return False\n\
             def is_available():\n    _asked('is_available')\n    return False\n\
             def device_count():\n    _asked('device_count')\n    return 0\n\
             def get_device_capability(*a):\n    _asked('get_device_capability')\n    return (9, 0)\n\
             def init():\n    _asked('init')\n",
            marker = marker.display().to_string()
        ),
    );
    let executor = forking(&site);
    let repo = Repo::new();
    let variant = repo.variant("torch-cpu", "import torch\nadd = lambda a, b: a + b\n");
    let job = job(&variant, SmokeSource::LoadOnly, quick_limits());
    let (run, outcome) = probe_fixtures::probe_job(&executor, &job);
    assert_eq!(outcome.kind, OutcomeKind::Pass, "{outcome:?}");
    assert_eq!(run.evidence.made, Made::Forked);
    let asked = std::fs::read_to_string(&marker).unwrap_or_default();
    assert!(asked.is_empty(), "device queries: {asked}");
}

#[test]
fn a_forked_child_reports_its_memory() {
    let site = torch_site();
    let executor = forking(&site);
    let repo = Repo::new();
    let variant = repo.variant("torch-universal", "add = lambda a, b: a + b\n");
    let job = job(&variant, SmokeSource::LoadOnly, quick_limits());
    let (run, _) = probe_fixtures::probe_job(&executor, &job);
    let memory = run.evidence.timings().memory.expect("memory reported");
    assert!(memory.rss_kb > 1000, "{memory:?}");
    assert!(memory.pss_kb <= memory.rss_kb, "{memory:?}");
}

/// `preflight check --json` of `repo` with `PREFLIGHT_FORK=fork`, on the
/// cache in `cache`: each result's `made` and `cached`.
fn check(repo: &Repo, cache: &std::path::Path, fork: &str) -> Vec<(Option<String>, bool)> {
    check_with(repo, cache, fork, &[])
}

/// [`check`] with `env` added to preflight's environment.
fn check_with(
    repo: &Repo,
    cache: &std::path::Path,
    fork: &str,
    env: &[(&str, &std::ffi::OsStr)],
) -> Vec<(Option<String>, bool)> {
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_preflight"))
        .envs(env.iter().copied())
        .arg("check")
        .arg(repo.root())
        .arg("--python")
        .arg(python())
        .arg("--json")
        .env("PREFLIGHT_CACHE", cache)
        .env("PREFLIGHT_FORK", fork)
        .output()
        .expect("preflight runs");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let json: serde_json::Value = serde_json::from_slice(&out.stdout).expect("JSON");
    json["results"]
        .as_array()
        .expect("results")
        .iter()
        .map(|r| {
            (
                r["outcome"]["made"].as_str().map(str::to_owned),
                r["cached"].as_bool().expect("cached"),
            )
        })
        .collect()
}

#[test]
fn a_forked_outcome_is_cached_apart_from_a_fresh_one() {
    let repo = Repo::new();
    repo.variant("torch-universal", "add = lambda a, b: a + b\n");
    let cache = tempfile::tempdir().expect("temp dir");
    let forked = Some("forked".to_owned());
    assert_eq!(check(&repo, cache.path(), "1"), [(forked.clone(), false)]);
    assert_eq!(check(&repo, cache.path(), "1"), [(forked, true)]);
    // A fresh probe is other evidence: not answered by the forked one.
    assert_eq!(check(&repo, cache.path(), "0"), [(None, false)]);
    assert_eq!(check(&repo, cache.path(), "0"), [(None, true)]);
}

#[test]
fn a_probe_run_fresh_after_its_server_was_given_up_is_cached() {
    // Where the fork server cannot be used (here: it started a thread), a
    // forked job runs fresh; that outcome is kept, or every later run would
    // probe again.
    let site = torch_site();
    site.file(
        "preflight_threads.py",
        "import threading, time\nthreading.Thread(target=time.sleep, args=(600,), daemon=True).start()\n",
    );
    let repo = Repo::new();
    repo.variant("torch-universal", "add = lambda a, b: a + b\n");
    let cache = tempfile::tempdir().expect("temp dir");
    let run = || {
        check_with(
            &repo,
            cache.path(),
            "1",
            &[
                ("PYTHONPATH", site.dir.path().as_os_str()),
                (PRELOAD_ENV, std::ffi::OsStr::new("preflight_threads")),
            ],
        )
    };
    assert_eq!(run(), [(None, false)]);
    assert_eq!(run(), [(None, true)]);
}
