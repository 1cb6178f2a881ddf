//! `preflight cache dir|ls|show|clear|prune|export|import`

use super::{Answer, BadInput, emit, emit_json};
use kernel_preflight::cache::{Entry, Key, Lookup, Store, ops};
use kernel_preflight::report;
use serde_json::Value;
use std::path::PathBuf;

/// Arguments of `preflight cache`.
#[derive(clap::Args)]
pub struct Args {
    #[command(subcommand)]
    action: Action,
    /// Print JSON instead of text.
    #[arg(long, global = true)]
    json: bool,
}

#[derive(clap::Subcommand)]
enum Action {
    /// Print the cache directory.
    Dir,
    /// List the cached outcomes.
    Ls,
    /// Show one entry in full.
    Show {
        /// Its key, as `ls` prints it (a unique prefix is enough).
        key: String,
    },
    /// Remove every cached outcome.
    Clear,
    /// Remove entries whose variants are gone, old schemas and leftovers.
    Prune,
    /// Write every valid entry to FILE as JSON lines (`-` for stdout).
    Export {
        /// Destination.
        file: PathBuf,
    },
    /// Read entries from FILE (JSON lines, `-` for stdin); a local entry that
    /// is as new or newer is kept.
    Import {
        /// Source.
        file: PathBuf,
    },
}

type Record = Value;

pub fn run(args: Args) -> Result<Answer, BadInput> {
    let store = Store::at(Store::default_root());
    match args.action {
        Action::Dir => emit(&store.root().display().to_string()),
        Action::Ls => {
            let entries = ops::entries::<Record>(&store);
            if args.json {
                emit_json(&entries);
            } else {
                emit(&report::cache::list(&entries, store.root()));
            }
        }
        Action::Show { key } => {
            let key = find_key(&store, &key)?;
            match store.get::<Record>(&key) {
                Lookup::Hit(e) => emit_json(&e),
                Lookup::Miss => return Err(BadInput(format!("no cache entry {key}"))),
                Lookup::Corrupt(why) => {
                    return Err(BadInput(format!(
                        "cache entry is corrupt and was removed: {why}"
                    )));
                }
            }
        }
        Action::Clear => {
            let dir = store.entries_dir();
            let n = store.keys().len();
            if dir.exists() {
                std::fs::remove_dir_all(&dir)
                    .map_err(|e| BadInput(format!("cannot clear {}: {e}", dir.display())))?;
            }
            emit(&format!(
                "removed {n} entries from {}",
                store.root().display()
            ));
        }
        Action::Prune => {
            let report = ops::prune::<Record>(&store, variant_still_there)?;
            if args.json {
                emit_json(&report);
            } else {
                emit(&format!(
                    "removed {} entries, {} old-schema folders, {} leftover temp files",
                    report.entries,
                    report.schema_dirs.len(),
                    report.temp_files
                ));
            }
        }
        Action::Export { file } => {
            let n = if file.as_os_str() == "-" {
                ops::export::<Record>(&store, std::io::stdout().lock())?
            } else {
                write_export(&store, &file)?
            };
            if file.as_os_str() != "-" {
                eprintln!("exported {n} entries to {}", file.display());
            }
        }
        Action::Import { file } => {
            let report = if file.as_os_str() == "-" {
                ops::import::<Record>(&store, std::io::stdin().lock())?
            } else {
                let f = std::fs::File::open(&file)
                    .map_err(|e| BadInput(format!("{}: {e}", file.display())))?;
                ops::import::<Record>(&store, std::io::BufReader::new(f))?
            };
            for (line, why) in &report.rejected {
                eprintln!(
                    "preflight: warning: {}:{line}: rejected: {why}",
                    file.display()
                );
            }
            if args.json {
                emit_json(&report);
            } else {
                emit(&format!(
                    "imported {}, kept {} newer local entries, rejected {}",
                    report.imported,
                    report.kept_local,
                    report.rejected.len()
                ));
            }
            if !report.rejected.is_empty() {
                return Ok(Answer::No);
            }
        }
    }
    Ok(Answer::Yes)
}

/// Write the export next to its destination and rename it into place, so a
/// failed export leaves no partial file.
fn write_export(store: &Store, file: &std::path::Path) -> Result<usize, BadInput> {
    let dir = file
        .parent()
        .filter(|p| !p.as_os_str().is_empty())
        .unwrap_or(std::path::Path::new("."));
    let mut tmp = tempfile::NamedTempFile::new_in(dir)
        .map_err(|e| BadInput(format!("cannot write {}: {e}", file.display())))?;
    let n = ops::export::<Record>(store, tmp.as_file_mut())?;
    tmp.persist(file)
        .map_err(|e| BadInput(format!("cannot write {}: {}", file.display(), e.error)))?;
    Ok(n)
}

fn variant_still_there(entry: &Entry<Record>) -> bool {
    entry.record["path"]
        .as_str()
        .is_none_or(|p| std::path::Path::new(p).is_dir())
}

/// A full key, or the one key that starts with a prefix.
fn find_key(store: &Store, text: &str) -> Result<Key, BadInput> {
    if let Ok(key) = Key::parse(text) {
        return Ok(key);
    }
    let prefix = text.to_ascii_lowercase();
    if prefix.is_empty() || !prefix.bytes().all(|b| b.is_ascii_hexdigit()) {
        return Err(BadInput(format!(
            "invalid cache key {text:?}: expected hex digits (see `preflight cache ls`)"
        )));
    }
    let matches: Vec<Key> = store
        .keys()
        .into_iter()
        .map(|(k, _)| k)
        .filter(|k| k.as_str().starts_with(&prefix))
        .collect();
    match matches.as_slice() {
        [one] => Ok(one.clone()),
        [] => Err(BadInput(format!("no cache entry starts with {text:?}"))),
        many => Err(BadInput(format!(
            "cache key prefix {text:?} is ambiguous ({} entries)",
            many.len()
        ))),
    }
}
