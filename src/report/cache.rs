//! Output of `preflight cache ls`.

use crate::cache::OutcomeEntry;
use crate::run::{RemoteRow, RemoteStatus};
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

/// A table of the fleet's remote store (`cache ls --remote`): key prefix,
/// variant, outcome, when, and whether this machine trusts it.
pub fn remote_list(rows: &[RemoteRow]) -> String {
    if rows.is_empty() {
        return "no entries in the remote store".into();
    }
    let mut table = super::table(&["key", "variant", "outcome", "created", "status"]);
    for row in rows {
        let unknown = || "-".to_string();
        table.add_row(vec![
            row.key.chars().take(12).collect(),
            row.variant.clone().unwrap_or_else(unknown),
            row.outcome.map_or_else(unknown, |k| k.to_string()),
            row.created.map_or_else(unknown, age),
            match &row.status {
                RemoteStatus::Trusted => "trusted".into(),
                RemoteStatus::OtherClass => "another machine class".into(),
                RemoteStatus::Refused(why) => format!("refused: {why}"),
            },
        ]);
    }
    let refused = rows
        .iter()
        .filter(|r| matches!(r.status, RemoteStatus::Refused(_)))
        .count();
    format!(
        "{} in the remote store, {refused} refused\n{table}",
        super::count(rows.len(), "entry|entries"),
    )
}
