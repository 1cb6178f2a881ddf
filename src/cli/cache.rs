//! `preflight cache dir|ls|show|clear|prune|export|import`

use super::{Answer, BadInput, Failure, emit, emit_json};
use kernel_preflight::cache::{Cache, Key, Lookup, ops};
use kernel_preflight::report;
use kernel_preflight::run::{Session, SessionOptions};
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
    /// Print the cache directory (the root of every bucket).
    Dir,
    /// List the cached outcomes.
    Ls {
        /// List the fleet's remote store instead: each entry trusted,
        /// another machine class's, or refused and why (the store is
        /// PREFLIGHT_REMOTE, or URL).
        #[arg(long, value_name = "URL", num_args = 0..=1, require_equals = false)]
        remote: Option<Option<String>>,
    },
    /// Show one entry in full.
    Show {
        /// Its key, as `ls` prints it (a unique prefix is enough).
        key: String,
    },
    /// Remove everything cached: outcomes, identities, fingerprint facts,
    /// bench results.
    Clear,
    /// Remove, in every bucket, entries whose variant (or tool) is gone,
    /// corrupt files, folders of old versions and stale temp files.
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

pub fn run(args: Args) -> Result<Answer, Failure> {
    let cache = Cache::from_env();
    if !matches!(args.action, Action::Dir | Action::Import { .. }) {
        cache.check_root()?;
    }
    let outcomes = cache.outcomes();
    match args.action {
        Action::Dir => emit(&cache.root().display().to_string()),
        Action::Ls { remote: Some(url) } => {
            let options = SessionOptions {
                remote: Some(super::probing::remote(url.as_deref())?.ok_or_else(|| {
                    BadInput(
                        "cache ls --remote: no remote store (set PREFLIGHT_REMOTE or give \
                             --remote URL)"
                            .into(),
                    )
                })?),
                ..SessionOptions::default()
            };
            let rows = Session::new(options, cache).remote_entries()?;
            if args.json {
                emit_json(&rows);
            } else {
                emit(&report::cache::remote_list(&rows));
            }
        }
        Action::Ls { remote: None } => {
            let entries = outcomes.entries();
            if args.json {
                emit_json(&entries);
            } else {
                emit(&report::cache::list(&entries, cache.root()));
            }
        }
        Action::Show { key } => {
            let key = find_key(&cache, &key)?;
            match outcomes.entry(&key) {
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
            let report = cache.clear()?;
            if args.json {
                emit_json(&report);
            } else {
                emit(&format!(
                    "removed {} from {}",
                    report::count(report.files, "file"),
                    cache.root().display()
                ));
            }
        }
        Action::Prune => {
            let report = cache.prune()?;
            if args.json {
                emit_json(&report);
            } else {
                emit(&format!(
                    "removed {}, {}, {}, {}",
                    report::count(report.entries, "entry|entries"),
                    report::count(report.schema_dirs.len(), "old-schema folder"),
                    report::count(report.temp_files, "leftover temp file"),
                    report::count(report.jit_stores, "kernel's JIT store|kernels' JIT stores")
                ));
            }
        }
        Action::Export { file } => {
            if file.as_os_str() == "-" {
                ops::export(&cache, std::io::stdout().lock())?;
            } else {
                let n = ops::export_file(&cache, &file)?;
                eprintln!(
                    "exported {} to {}",
                    report::count(n, "entry|entries"),
                    file.display()
                );
            }
        }
        Action::Import { file } => {
            let report = if file.as_os_str() == "-" {
                ops::import(&cache, &file, std::io::stdin().lock())?
            } else {
                let f = std::fs::File::open(&file)
                    .map_err(|e| BadInput(format!("{}: {e}", file.display())))?;
                ops::import(&cache, &file, std::io::BufReader::new(f))?
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

/// A full key, or the one key that starts with a prefix.
fn find_key(cache: &Cache, text: &str) -> Result<Key, Failure> {
    if let Ok(key) = Key::parse(text) {
        return Ok(key);
    }
    let prefix = text.to_ascii_lowercase();
    if prefix.is_empty() || !prefix.bytes().all(|b| b.is_ascii_hexdigit()) {
        return Err(BadInput(format!(
            "invalid cache key {text:?}: expected hex digits (see `preflight cache ls`)"
        )));
    }
    let matches: Vec<Key> = cache
        .outcomes()
        .keys()
        .into_iter()
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
