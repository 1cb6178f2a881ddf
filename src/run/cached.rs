//! The run's seam to the outcome cache: a job's key, one lookup, one
//! store. Nothing else in `run` touches the cache, so that a new cache
//! interface changes this file only.

use super::plan::Job;
use crate::cache::outcomes::{OutcomeCache, VariantKey};
use crate::classify::{Outcome, Timings};
use crate::discover::{FoundVariant, NativeModule};
use crate::probe::{Placement, SmokeSource};
use serde::Serialize;
use sha2::{Digest, Sha256};

/// Where a job's outcome is kept.
#[derive(Debug, Clone)]
pub struct JobKey(VariantKey);

/// The key of a hub variant probed with `smoke`; `Err` says why its
/// files could not be identified (the job is then probed and not kept).
pub(super) fn variant_key(
    cache: &OutcomeCache,
    variant: &FoundVariant,
    smoke: &SmokeSource,
) -> Result<JobKey, String> {
    cache
        .key(variant, smoke)
        .map(JobKey)
        .map_err(|e| e.to_string())
}

/// The key of a native module run on `device`.
pub(super) fn module_key(
    cache: &OutcomeCache,
    module: &NativeModule,
    device: Placement,
) -> Result<JobKey, String> {
    let (identity, launches) = module_identity(module, device.ordinal())
        .map_err(|e| format!("cannot read {}: {e}", module.spec.path.display()))?;
    Ok(JobKey(cache.key_of(identity, launches, "launches".into())))
}

/// What decides a native module's outcome besides the machine: the
/// executor (this binary is its child, so its version), the module file's
/// name and content, how it is compiled, the device; and, as its smoke
/// identity, the launches.
fn module_identity(module: &NativeModule, device: u32) -> std::io::Result<(String, String)> {
    #[derive(Serialize)]
    struct Identity<'a> {
        executor: &'static str,
        version: &'static str,
        file: String,
        sha256: String,
        kind: crate::discover::native::ModuleKind,
        nvrtc_options: &'a [String],
        target: Option<&'a str>,
        device: u32,
    }
    let spec = &module.spec;
    let identity = Identity {
        executor: "cuda",
        version: env!("CARGO_PKG_VERSION"),
        file: module.name(),
        sha256: crate::hash::hex(&Sha256::digest(std::fs::read(&spec.path)?)),
        kind: spec.kind,
        nvrtc_options: &spec.nvrtc_options,
        target: spec.target.as_deref(),
        device,
    };
    Ok((
        format!("module:{}", digest(&identity)),
        format!("launches:{}", digest(&module.launches)),
    ))
}

/// sha256 of a value's JSON form (plain structs of strings and numbers,
/// which always serialize).
fn digest<T: Serialize>(value: &T) -> String {
    crate::hash::sha256_hex(&serde_json::to_vec(value).unwrap_or_default())
}

/// The cached outcome of `key`; `Err` says why an entry was ignored.
pub(super) fn lookup(
    cache: &OutcomeCache,
    key: &JobKey,
) -> Result<Option<(Outcome, Timings)>, String> {
    cache
        .get(&key.0)
        .map(|hit| hit.map(|record| (record.outcome, record.timings)))
        .map_err(|why| format!("ignored a corrupt cache entry: {why}"))
}

/// Keep `job`'s outcome (when it is worth keeping); `Err` says why the
/// cache could not be written.
pub(super) fn store(
    cache: &OutcomeCache,
    key: &JobKey,
    job: &Job,
    outcome: &Outcome,
    timings: &Timings,
) -> Result<(), String> {
    cache
        .put(&key.0, &job.name, &job.path, outcome, timings)
        .map_err(|e| format!("outcomes are not cached: {e}"))
}
