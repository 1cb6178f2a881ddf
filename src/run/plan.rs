//! The plan: every job a run will answer, listed before anything runs (as
//! cargo-nextest lists tests before it runs them). For every target, each
//! variant (hub) or module (native) becomes one job with its declared
//! verdict, its skip reason, what it runs and its cache key. `check`,
//! `select` and `warmup` differ only in the options they plan with and in
//! what they do with the rows.

use super::Executors;
use super::cached::{self, JobKey, RunCache};
use super::result::Declared;
use crate::cache::Cache;
use crate::declared::embedded::{self, Judge};
use crate::declared::{self, Decision, Rejection, System};
use crate::discover::native::ModuleKind;
use crate::discover::{
    Discovery, FoundVariant, KernelRepo, Named, NativeModule, NativeTarget, Target,
};
use crate::fingerprint::Fingerprint;
use crate::probe::{self, SmokeChoice, SmokeSource, Subject};
use crate::sandbox::Limits;
use std::path::PathBuf;
use std::sync::Arc;

/// A target's place in its plan. Rows refer to their target by it, so two
/// targets given alike (or one given in two spellings) never mix.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct TargetId(pub usize);

/// A job's place in its plan; also its row's place in the report.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct JobId(pub usize);

/// How to plan.
#[derive(Debug, Clone, Default)]
pub struct PlanOptions {
    /// What the user chose for the smokes of hub variants.
    pub smoke: SmokeChoice,
    /// Probe variants for another OS or CPU too.
    pub all: bool,
    /// When set, declared verdicts include whether each job's embedded CUDA
    /// images can run on this GPU (`check`; `select` and `warmup` leave it
    /// out for hub variants, since it reads every shared object).
    pub judge: Option<Judge>,
    /// Time and output limits of each child.
    pub limits: Limits,
}

/// One planned job.
#[derive(Debug, Clone)]
pub struct Job {
    /// Its place in the plan.
    pub id: JobId,
    /// Its target.
    pub target: TargetId,
    /// The variant's name or the module's file name.
    pub name: String,
    /// The variant's directory or the module's file.
    pub path: PathBuf,
    /// What it declares, judged without running it.
    pub declared: Declared,
    /// Why it is not probed (another OS or CPU), if it is not.
    pub skip: Option<String>,
    /// What its executor runs: the subject, the device, the smoke, the
    /// depth and the child's limits.
    pub probe: probe::Job,
    /// Its device step, when an executor has one for it
    /// ([`probe::Executor::device_step`]; a compiled CUDA variant: the
    /// code embedded in its shared objects loaded on the device), run
    /// before the job; its outcome joins the job's
    /// ([`crate::classify::with_device_code`]).
    pub device_code: Option<probe::Job>,
    /// Where its outcome is kept; `None`: not cached (`--no-cache`, or its
    /// files could not be identified).
    pub key: Option<JobKey>,
}

/// Every job of some targets, in report order.
#[derive(Debug)]
pub struct Plan {
    /// The machine the plan is for.
    pub fingerprint: Fingerprint,
    /// The targets, indexed by [`TargetId`].
    pub targets: Vec<Named>,
    /// The jobs, indexed by [`JobId`]: targets in the order given, a hub
    /// kernel's variants in the hub's preference order, a native target's
    /// modules in file order.
    pub jobs: Vec<Job>,
    /// Findings that change no job (entries that are not variants, jobs
    /// that cannot be cached).
    pub warnings: Vec<String>,
    pub(super) cache: Option<RunCache>,
}

impl Plan {
    /// Plan `targets` on the machine `fingerprint` describes, to be run
    /// by `executors` (which give jobs their device steps, and whose code
    /// is part of every key); with a `cache`, each job gets its key there
    /// (reading the identity of its files, which a stat record makes cheap
    /// after the first time).
    pub fn new(
        targets: Vec<Named>,
        fingerprint: &Fingerprint,
        options: &PlanOptions,
        executors: &Executors,
        cache: Option<Arc<Cache>>,
    ) -> Plan {
        let mut plan = Plan {
            fingerprint: fingerprint.clone(),
            targets: Vec::new(),
            jobs: Vec::new(),
            warnings: Vec::new(),
            cache: cache.map(|c| RunCache::new(c, fingerprint)),
        };
        let system = System::from_fingerprint(fingerprint);
        for (i, named) in targets.iter().enumerate() {
            let first = plan.jobs.len();
            match &named.target {
                Target::Hub(d) => plan.add_variants(TargetId(i), d, &system, options, executors),
                Target::Native(t) => plan.add_modules(TargetId(i), t, options),
            }
            plan.attach_keys(first, &named.target, executors);
        }
        plan.targets = targets;
        plan
    }

    /// Give the jobs listed from `first` on (all of `target`) their cache
    /// keys, made from each job's identity ([`cached::job_key`]); a job
    /// that cannot be keyed is probed and not kept, with a warning.
    fn attach_keys(&mut self, first: usize, target: &Target, executors: &Executors) {
        let Some(cache) = &self.cache else {
            return;
        };
        for job in &mut self.jobs[first..] {
            if job.skip.is_some() {
                continue;
            }
            let metadata = match target {
                Target::Hub(d) => d
                    .variants
                    .iter()
                    .find(|v| v.path == job.path)
                    .and_then(|v| v.metadata.metadata()),
                Target::Native(_) => None,
            };
            let Some(executor) = executors.for_subject(&job.probe.subject) else {
                // Not run either: the run's executors say why
                // (`Executors::ready_for`), or the job is a probe error.
                continue;
            };
            let device_step = job
                .device_code
                .as_ref()
                .and_then(|step| executors.for_subject(&step.subject));
            match cached::job_key(cache, &job.probe, metadata, executor, device_step) {
                Ok(key) => job.key = Some(key),
                Err(e) => self
                    .warnings
                    .push(format!("{}: not cached: {e}", job.path.display())),
            }
        }
    }

    /// The jobs of `target`, in plan order.
    pub fn jobs_of(&self, target: TargetId) -> impl Iterator<Item = &Job> {
        self.jobs.iter().filter(move |j| j.target == target)
    }

    /// The key of a native target as a whole (what `bench` times and keeps
    /// its result under): its one module's own key, or one identity made of
    /// all of theirs; `None` when a module is not cached.
    pub fn target_key(&self, target: TargetId) -> Option<JobKey> {
        let keys: Vec<Option<&JobKey>> = self.jobs_of(target).map(|j| j.key.as_ref()).collect();
        cached::target_key(&keys)
    }

    /// The cache the plan keys its jobs in; `None` with `--no-cache`.
    pub fn cache(&self) -> Option<&Cache> {
        self.cache.as_ref().map(|c| c.cache())
    }

    /// The kept bench result of each job for `workload`, by [`JobId`]:
    /// `None` where none is kept for this machine.
    pub fn bench_results(&self, workload: &str) -> Vec<Option<cached::BenchRecord>> {
        self.jobs
            .iter()
            .map(|job| match (&self.cache, &job.key) {
                (Some(cache), Some(key)) => cached::bench_lookup(cache, key, workload),
                _ => None,
            })
            .collect()
    }

    /// Keep `record` as the bench result of `key` for `workload` (a
    /// bench without `--workload`: [`cached::DEFAULT_WORKLOAD`]); nothing
    /// without an outcome cache. `Err` says why it could not be kept.
    pub(crate) fn keep_bench(
        &self,
        key: &JobKey,
        workload: &str,
        record: cached::BenchRecord,
    ) -> Result<(), String> {
        match &self.cache {
            Some(cache) => cached::keep_bench(cache, key, workload, record),
            None => Ok(()),
        }
    }

    /// Where `job`'s variant stands among its kernel's variants (the kernel,
    /// its hub revision, accepted by name or not, its place in the hub's
    /// preference order): what a published outcome carries for a view of
    /// the fleet. `None` for a native module.
    pub(super) fn placement(&self, job: &Job) -> Option<cached::Placement> {
        let Target::Hub(d) = &self.targets[job.target.0].target else {
            return None;
        };
        let first = self.jobs.iter().position(|j| j.target == job.target)?;
        let version = self.revision(job.target);
        Some(cached::Placement {
            kernel: d
                .kernel
                .clone()
                .unwrap_or_else(|| self.targets[job.target.0].given.clone()),
            version,
            accepted: job.declared.accepted,
            preference: u32::try_from(job.id.0 - first).unwrap_or(u32::MAX),
        })
    }

    /// The hub revision of `target` (its first 12 hex digits), when it is
    /// a snapshot in the hub cache; `None` for a folder elsewhere or a
    /// native target.
    pub fn revision(&self, target: TargetId) -> Option<String> {
        let Target::Hub(d) = &self.targets.get(target.0)?.target else {
            return None;
        };
        // A hub snapshot's folder is named by its revision.
        d.root
            .parent()
            .filter(|snapshot| crate::discover::hub_cache::snapshot_repo_id(snapshot).is_some())
            .and_then(|snapshot| snapshot.file_name())
            .map(|rev| rev.to_string_lossy().chars().take(12).collect())
    }

    /// Jobs that will be probed or answered from the cache (not skipped).
    pub fn probe_count(&self) -> usize {
        self.jobs.iter().filter(|j| j.skip.is_none()).count()
    }

    /// Add a job, not yet keyed.
    fn push(
        &mut self,
        target: TargetId,
        declared: Declared,
        skip: Option<String>,
        (probe, device_code): (probe::Job, Option<probe::Job>),
    ) {
        let (name, path) = match &probe.subject {
            Subject::Variant { name, path } | Subject::DeviceCode { name, path } => {
                (name.to_string(), path.clone())
            }
            Subject::Module { spec, .. } => (spec.name(), spec.path.clone()),
            Subject::Device => ("device".to_owned(), PathBuf::new()),
            Subject::Devices => ("devices".to_owned(), PathBuf::new()),
        };
        self.jobs.push(Job {
            id: JobId(self.jobs.len()),
            target,
            name,
            path,
            declared,
            skip,
            probe,
            device_code,
            key: None,
        });
    }

    fn add_variants(
        &mut self,
        target: TargetId,
        d: &Discovery,
        system: &System,
        options: &PlanOptions,
        executors: &Executors,
    ) {
        self.warnings.extend(d.warnings.iter().cloned());
        // Every variant of a kernel runs the same smoke: the repo is looked
        // at once.
        let smoke = SmokeSource::choose(
            &options.smoke,
            KernelRepo::above_variants(&d.root)
                .as_ref()
                .map(KernelRepo::dir),
            d.repo_id.as_ref(),
        );
        for decision in declared::resolve(d.variants.iter().map(|v| &v.name), system) {
            let Some(variant) = d.variants.iter().find(|v| v.name == decision.variant) else {
                continue;
            };
            let skip = match &decision.rejection {
                Some(
                    r
                    @ (Rejection::Cpu { .. } | Rejection::Os { .. } | Rejection::NotParsed { .. }),
                ) if !options.all => Some(r.to_string()),
                _ => None,
            };
            // What cannot load here is not worth reading for its images.
            let judge = options.judge.filter(|_| skip.is_none());
            let declared = variant_declared(&decision, variant, judge);
            let subject = Subject::Variant {
                name: variant.name.clone(),
                path: variant.path.clone(),
            };
            let job = probe::Job {
                smoke: smoke.clone(),
                limits: options.limits.clone(),
                ..probe::Job::new(subject)
            };
            let device_code = skip
                .is_none()
                .then(|| executors.device_step(&job))
                .flatten();
            self.push(target, declared, skip, (job, device_code));
        }
    }

    fn add_modules(&mut self, target: TargetId, t: &NativeTarget, options: &PlanOptions) {
        for module in &t.modules {
            let declared = options
                .judge
                .map_or(Declared::ACCEPTED, |j| module_declared(module, j));
            let job = probe::Job {
                limits: options.limits.clone(),
                ..probe::Job::new(Subject::Module {
                    spec: module.spec.clone(),
                    launches: module.launches.clone(),
                })
            };
            self.push(target, declared, None, (job, None));
        }
    }
}

/// The hub's name-level decision, then (when a GPU is judged and the name
/// is accepted) whether the variant's embedded CUDA images can run on it.
fn variant_declared(decision: &Decision, variant: &FoundVariant, judge: Option<Judge>) -> Declared {
    let by_name = Declared {
        accepted: decision.accepted(),
        reason: decision.rejection.as_ref().map(ToString::to_string),
        short: decision.rejection.as_ref().map(Rejection::short),
    };
    if !by_name.accepted {
        return by_name;
    }
    match judge.and_then(|j| embedded::variant_verdict(&variant.path, j)) {
        Some((false, summary)) => Declared {
            accepted: false,
            reason: Some(summary),
            short: Some("no image fits"),
        },
        _ => by_name,
    }
}

/// What a module's embedded images declare about the judged GPU: accepted
/// when some image can run, and when nothing can be judged (CUDA C source,
/// no GPU known, a file inspect cannot read: the probe will tell).
fn module_declared(module: &NativeModule, judge: Judge) -> Declared {
    let Some(gpu) = judge.gpu else {
        return Declared::ACCEPTED;
    };
    if module.spec.kind == ModuleKind::Cuda {
        return Declared::ACCEPTED;
    }
    match embedded::inspect_file(&module.spec.path) {
        Ok(file) if file.has_cuda() => {
            let verdict = file.verdict(gpu, judge.driver_ptx);
            Declared {
                accepted: verdict.runnable,
                reason: (!verdict.runnable).then_some(verdict.summary),
                short: (!verdict.runnable).then_some("no image fits"),
            }
        }
        _ => Declared::ACCEPTED,
    }
}
