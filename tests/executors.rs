//! The executor seam: a run asks its registry ([`Executors`]) what to do
//! with a job — which executor takes it, its device step, what identifies
//! the code in its key — through `probe::Executor`, never an executor by
//! name. An executor written here, registered in one line, receives every
//! job of a plan, its device steps included, and its code is in the keys.

mod common;

use kernel_preflight::cache::Cache;
use kernel_preflight::classify::{Depth, OutcomeKind};
use kernel_preflight::discover::{self, Named};
use kernel_preflight::fingerprint::{Fingerprint, NoStore, Sources};
use kernel_preflight::probe::cuda::CudaExecutor;
use kernel_preflight::probe::{
    Evidence, Executor, ExecutorKind, Job, ProbeError, PythonExecutor, Subject,
};
use kernel_preflight::protocol::Channel;
use kernel_preflight::run::{self, Executors, ExecutorsError, Plan, PlanOptions, RunEvent};
use kernel_preflight::sandbox::{Cancel, Termination};
use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::Duration;

const CODE: &str = "scripted executor 1";

/// An executor that runs nothing: it takes hub variants, gives each a
/// device step of its own, and answers every job with a clean pass,
/// noting what it was asked.
#[derive(Default)]
struct Scripted {
    asked: Arc<Mutex<Vec<String>>>,
}

impl Executor for Scripted {
    fn kind(&self) -> ExecutorKind {
        ExecutorKind::Python
    }

    fn accepts(&self, subject: &Subject) -> bool {
        matches!(
            subject,
            Subject::Variant { .. } | Subject::DeviceCode { .. }
        )
    }

    fn code_identity(&self) -> &'static str {
        CODE
    }

    fn device_step(&self, job: &Job) -> Option<Job> {
        let Subject::Variant { name, path } = &job.subject else {
            return None;
        };
        Some(Job {
            depth: Depth::Device,
            ..Job::new(Subject::DeviceCode {
                name: name.clone(),
                path: path.clone(),
            })
        })
    }

    fn run(&self, job: &Job, _cancel: &Cancel) -> Result<Evidence, ProbeError> {
        self.asked.lock().unwrap().push(job.subject.describe());
        let depth = match job.depth {
            Depth::Device => "device",
            _ => "load",
        };
        let channel = Channel::parse(&format!(
            "{}\n{}\n{}",
            r#"{"event":"hello","protocol":1,"executor":"python","pid":7,"pgid":7}"#,
            r#"{"event":"phase","phase":"start"}"#,
            format_args!(r#"{{"event":"done","depth":"{depth}"}}"#),
        ));
        Ok(Evidence {
            executor: self.kind(),
            termination: Termination::Exited { code: 0 },
            events: channel.events,
            channel: channel.problems,
            stderr: String::new(),
            leaked: None,
            wall: Duration::from_millis(1),
            pid: Some(7),
            made: Default::default(),
            exhausted: Vec::new(),
        })
    }
}

fn relu_demo() -> Named {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("examples/kernels/relu-demo");
    Named {
        given: "relu-demo".into(),
        target: discover::discover(&root).expect("the example kernel"),
    }
}

fn fingerprint() -> Fingerprint {
    Fingerprint::fast(&Sources::from_process(), &NoStore).expect("fingerprint")
}

#[test]
fn a_registered_executor_gets_every_job_its_device_steps_and_its_code_in_the_keys() {
    let scripted = Scripted::default();
    let asked = Arc::clone(&scripted.asked);
    let executors = Executors::new().with(scripted);
    let fingerprint = fingerprint();
    let cache = tempfile::tempdir().unwrap();
    let plan = Plan::new(
        vec![relu_demo()],
        &fingerprint,
        &PlanOptions::default(),
        &executors,
        Some(Arc::new(Cache::at(cache.path()))),
    );
    executors.ready_for(&plan).expect("it runs every job");
    let probed: Vec<_> = plan.jobs.iter().filter(|j| j.skip.is_none()).collect();
    assert!(probed.len() >= 3, "{:?}", plan.jobs);
    for job in &probed {
        let step = job.device_code.as_ref().expect("its device step");
        assert!(matches!(step.subject, Subject::DeviceCode { .. }));
        let key = job.key.as_ref().expect("keyed").outcome();
        assert_eq!(key.parts.job.code, CODE);
        assert_eq!(key.parts.job.device_code.as_deref(), Some(CODE));
    }
    let report = run::run(&plan, &executors, 1, &Cancel::new(), &|_: RunEvent<'_>| {});
    for result in report
        .results
        .iter()
        .filter(|r| r.outcome.kind != OutcomeKind::Skipped)
    {
        assert_eq!(result.outcome.kind, OutcomeKind::Pass, "{result:?}");
    }
    let asked = asked.lock().unwrap();
    assert_eq!(asked.len(), 2 * probed.len(), "{asked:?}");
    for job in &probed {
        let step = asked
            .iter()
            .position(|a| *a == format!("the device code of variant {}", job.name))
            .expect("its device step ran");
        let import = asked
            .iter()
            .position(|a| *a == format!("variant {}", job.name))
            .expect("its import ran");
        assert!(step < import, "the device step runs first: {asked:?}");
    }
}

#[test]
fn an_executor_that_cannot_be_made_is_said_only_to_a_plan_that_needs_it() {
    let fingerprint = fingerprint();
    let without_python = || {
        Executors::new()
            .with_made::<PythonExecutor>(Err(ExecutorsError::NoPython))
            .with(CudaExecutor::new(env!("CARGO_BIN_EXE_preflight")))
    };
    let executors = without_python();
    let hub = Plan::new(
        vec![relu_demo()],
        &fingerprint,
        &PlanOptions::default(),
        &executors,
        None,
    );
    let refused = executors
        .ready_for(&hub)
        .expect_err("hub variants need python");
    assert!(matches!(refused, ExecutorsError::NoPython), "{refused:?}");
    assert_eq!(
        refused.to_string(),
        "no Python interpreter found: give --python P"
    );
    // A plan the registered executors serve is told nothing.
    let empty = Plan::new(
        Vec::new(),
        &fingerprint,
        &PlanOptions::default(),
        &executors,
        None,
    );
    executors
        .ready_for(&empty)
        .expect("nothing to run needs nothing");
}

#[test]
fn the_cuda_executor_refuses_what_it_does_not_accept_and_steps_only_for_compiled_cuda() {
    let cuda = CudaExecutor::new(env!("CARGO_BIN_EXE_preflight"));
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("examples/kernels/relu-demo/build");
    for name in ["torch-universal", "torch-cpu", "torch-xpu"] {
        let job = Job::new(Subject::Variant {
            name: name.parse().unwrap(),
            path: root.join(name),
        });
        assert!(cuda.device_step(&job).is_none(), "{name}");
        assert!(!cuda.accepts(&job.subject), "{name}");
        match cuda.run(&job, &Cancel::new()) {
            Err(ProbeError::Unsupported { executor, .. }) => {
                assert_eq!(executor, ExecutorKind::Cuda)
            }
            other => panic!("{name}: {other:?}"),
        }
    }
}
