//! What the outcome cache alone says about each target of a plan, with no
//! probe: the variant a cold `select` would choose from the outcomes kept
//! so far, or that none works, or that the cache cannot tell yet. What
//! `labels` publishes: it must answer within a scheduler helper's few
//! seconds, so anything not kept is "no verdict", never a probe.

use super::select::{Names, may_choose};
use super::{Plan, TargetId, cached};
use crate::classify::OutcomeKind;
use serde::Serialize;
use std::time::{Duration, SystemTime};

/// The cache's answer for one target.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case", tag = "verdict")]
pub enum Recalled {
    /// A variant works here: the one `select` would choose.
    Pass {
        /// Its name.
        variant: String,
        /// When the oldest outcome this rests on was kept.
        #[serde(serialize_with = "seconds")]
        since: SystemTime,
    },
    /// Every variant that could be chosen was probed and none works, or
    /// the hub loader takes none here by name.
    Fail {
        /// Each probed variant's outcome kind, in preference order.
        outcomes: Vec<(String, OutcomeKind)>,
        /// When the oldest outcome this rests on was kept.
        #[serde(serialize_with = "seconds")]
        since: SystemTime,
    },
    /// The cache cannot tell: a variant that could be chosen has no
    /// outcome kept on this machine.
    Unknown {
        /// Why, for people.
        why: String,
    },
}

impl Recalled {
    /// When the evidence was kept; `None` for [`Recalled::Unknown`].
    pub fn since(&self) -> Option<SystemTime> {
        match self {
            Recalled::Pass { since, .. } | Recalled::Fail { since, .. } => Some(*since),
            Recalled::Unknown { .. } => None,
        }
    }
}

fn seconds<S: serde::Serializer>(t: &SystemTime, s: S) -> Result<S::Ok, S::Error> {
    s.serialize_u64(
        t.duration_since(SystemTime::UNIX_EPOCH)
            .map_or(0, |d| d.as_secs()),
    )
}

/// The cache's answer for `target` of `plan`, reading kept outcomes only:
/// variants in the hub's preference order, as a cold `select` (names
/// decide) walks them. A plan made without a cache knows nothing.
pub fn recall(plan: &Plan, target: TargetId) -> Recalled {
    let Some(cache) = &plan.cache else {
        return Recalled::Unknown {
            why: "no outcome cache".into(),
        };
    };
    let mut oldest: Option<SystemTime> = None;
    let mut outcomes = Vec::new();
    for job in plan.jobs_of(target) {
        if job.skip.is_some() || !job.declared.accepted {
            continue;
        }
        let kept = job.key.as_ref().and_then(|key| cached::recall(cache, key));
        let Some((outcome, kept_ns)) = kept else {
            return Recalled::Unknown {
                why: format!("{} has no outcome kept on this machine", job.name),
            };
        };
        let at = SystemTime::UNIX_EPOCH
            + Duration::from_nanos(u64::try_from(kept_ns).unwrap_or_default());
        let since = oldest.map_or(at, |o| o.min(at));
        oldest = Some(since);
        if may_choose(&outcome, job.declared.accepted, Names::Decide) {
            return Recalled::Pass {
                variant: job.name.clone(),
                since,
            };
        }
        outcomes.push((job.name.clone(), outcome.kind));
    }
    // No variant the hub loader would take here by name: that needs no
    // probe to know.
    Recalled::Fail {
        outcomes,
        since: oldest.unwrap_or_else(SystemTime::now),
    }
}
