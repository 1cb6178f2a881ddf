//! Statistics for benchmark mode: summaries of timing samples, the rule that
//! decides when a variant has been timed enough, and bootstrap comparisons.
//!
//! A low utility (pure math, no I/O, no other crate module): `bench` feeds it
//! samples and `report` prints what it returns.

mod compare;
mod rng;
mod stop;
mod summary;

pub use compare::{
    Comparison, MIN_PAIRED_ROUNDS, PROCESS_BAND, RESAMPLES, Rounds, SAME_BAND, Verdict, compare,
    compare_rounds, try_compare, try_compare_rounds, try_compare_rounds_beyond,
};
pub use rng::SplitMix64;
pub use stop::{MAX_SAMPLES, StopCriteria, StopRule, Stopper};
pub use summary::Summary;
