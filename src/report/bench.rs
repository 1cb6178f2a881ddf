//! Output of `preflight bench`: a table for people and markdown for a PR.

use crate::bench::result::BenchReport;

/// A table for people, fastest first, with a bar per variant (median and
/// IQR whisker) scaled to the slowest, `width` columns wide at most.
pub fn table(report: &BenchReport, width: usize) -> String {
    let _ = (report, width);
    todo!()
}

/// A GitHub markdown table with the device and fingerprint, for a PR or a
/// model card.
pub fn markdown(report: &BenchReport) -> String {
    let _ = report;
    todo!()
}
