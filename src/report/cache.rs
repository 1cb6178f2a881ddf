//! Output of `preflight cache ls`.

use crate::cache::Entry;
use serde_json::Value;
use std::path::Path;

/// A table of cache entries: key prefix, variant, outcome, when.
pub fn list(entries: &[Entry<Value>], root: &Path) -> String {
    if entries.is_empty() {
        return format!("no cached outcomes in {}", root.display());
    }
    let mut table = super::table(&["key", "variant", "outcome", "created", "path"]);
    for e in entries {
        let text = |v: &Value| v.as_str().unwrap_or("?").to_string();
        table.add_row(vec![
            e.key.as_str()[..12].to_string(),
            text(&e.record["variant"]),
            text(&e.record["outcome"]["kind"]),
            age(e.created),
            text(&e.record["path"]),
        ]);
    }
    format!("{} entries in {}\n{table}", entries.len(), root.display())
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
