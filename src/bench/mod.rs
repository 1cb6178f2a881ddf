//! Benchmark mode: the working variants of one kernel timed side by side.

pub mod result;
