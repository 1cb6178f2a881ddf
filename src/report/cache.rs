//! Output of `preflight cache ls`.

use crate::cache::OutcomeEntry;
use std::path::Path;

/// A table of outcome entries: key prefix, variant, outcome, when, where.
pub fn list(entries: &[OutcomeEntry], root: &Path) -> String {
    if entries.is_empty() {
        return format!("no cached outcomes in {}", root.display());
    }
    let mut table = super::table(&["key", "variant", "outcome", "created", "path"]);
    for e in entries {
        table.add_row(vec![
            e.key.as_str()[..12].to_string(),
            e.parts.job.name.clone(),
            e.record.outcome.kind.to_string(),
            age(e.created),
            e.record.path.display().to_string(),
        ]);
    }
    format!(
        "{} in {}\n{table}",
        super::count(entries.len(), "entry|entries"),
        root.display()
    )
}

/// How long ago a unix time was, for people.
pub fn age(created: u64) -> String {
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs());
    let s = now.saturating_sub(created);
    match s {
        0..60 => format!("{s}s ago"),
        60..3600 => format!("{}m ago", s / 60),
        3600..86400 => format!("{}h ago", s / 3600),
        _ => format!("{}d ago", s / 86400),
    }
}
