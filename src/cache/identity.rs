//! A variant's identity: what its files are, independent of where they lie.
//!
//! Every file is hashed (sha256) once; a stat record (size, mtime, inode,
//! ctime, device) per file, kept in the identities bucket, lets later calls
//! skip hashing while nothing changed: a file rewritten in place with its
//! size, inode and mtime put back still has a new ctime. File names are
//! kept whole, bytes that are not UTF-8 included (`name_key`). When the variant's `metadata.json` carries a digest and
//! the files match it, the identity is that digest (stable across machines
//! and copies); otherwise it is the hash of the files themselves, so a
//! variant modified after it was built is never mistaken for the original.
//! The hash of `metadata.json` itself comes with it, from the same records.

use super::bucket::{Entry, Parts, Shelf};
use super::job::VariantFiles;
use super::key::Key;
use super::warm::{Seen, Witness};
use super::{Cache, CacheError};
use crate::discover::Metadata;
use crate::discover::metadata::DigestAlgorithm;
use base64::Engine;
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};
use std::collections::BTreeMap;
use std::fs;
use std::io::Read;
use std::path::{Path, PathBuf};
use std::sync::Mutex;

/// What was recorded about one file.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
struct FileStat {
    seen: Seen,
    /// base64 sha256, the hub digest's encoding.
    sha256: String,
}

/// A folder's stat: its mtime changes whenever an entry is added, removed
/// or renamed in it.
type FolderStat = Seen;

/// What was recorded about one variant.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
struct VariantRecord {
    /// Relative folder path ([`name_key`]; `""` for the variant itself) →
    /// its stat.
    folders: BTreeMap<String, FolderStat>,
    /// Relative file path ([`name_key`]) → its stat and hash.
    files: BTreeMap<String, FileStat>,
    /// Wall clock (ns) just before the folders were listed.
    listed_ns: i128,
}

impl VariantRecord {
    /// Whether the listing was taken well after every folder last changed,
    /// so that an unchanged mtime proves an unchanged listing.
    fn trusted(&self) -> bool {
        self.folders
            .values()
            .all(|f| self.listed_ns - f.mtime_ns >= RACY_NS)
    }
}

/// The stat records of the variants in one directory (`build/`), kept in one
/// entry so that a warm call reads one record for a whole kernel.
#[derive(Debug, Default, Serialize, Deserialize)]
pub(crate) struct DirRecord {
    /// Variant directory name → what was recorded.
    variants: BTreeMap<String, VariantRecord>,
}

/// What an identities entry is keyed by: the directory of variants.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct DirParts {
    /// The directory (absolute).
    pub dir: PathBuf,
}

impl Parts for DirParts {
    const SHELF: Shelf = Shelf::IDENTITIES;

    fn key(&self) -> Key {
        Key::of_bytes(self.dir.as_os_str().as_encoded_bytes())
    }
}

/// Stat records read so far in this process, by directory of variants (a
/// `BTreeMap`: a `HashMap` asks the kernel for random keys, one more system
/// call in every command that opens the cache).
#[derive(Debug, Default)]
pub(crate) struct Memo(Mutex<BTreeMap<PathBuf, DirRecord>>);

/// A folder listed this soon after it changed may change again within the
/// same tick of the file-system clock without its mtime moving: such a
/// listing is not trusted later (git's "racy" rule).
const RACY_NS: i128 = 2_000_000_000;

use super::warm::now_ns;

/// A relative path as a record's key, losing nothing: UTF-8 as it is but
/// `%`, written `%25`, and every byte that is not UTF-8 as `%XX`. Two
/// names that differ only in such bytes are two keys, where a lossy
/// conversion would make them one.
fn name_key(path: &Path) -> String {
    use std::os::unix::ffi::OsStrExt;
    let mut key = String::new();
    for chunk in path.as_os_str().as_bytes().utf8_chunks() {
        for c in chunk.valid().chars() {
            match c {
                '%' => key.push_str("%25"),
                c => key.push(c),
            }
        }
        for byte in chunk.invalid() {
            key.push_str(&format!("%{byte:02X}"));
        }
    }
    key
}

/// The files of a variant from its record, when none of its folders changed
/// since (and none was changed too recently to tell): a `stat` per folder
/// and per file instead of listing every folder.
fn listed_from_record(
    variant: &Path,
    record: &VariantRecord,
) -> Option<Vec<(String, PathBuf, fs::Metadata)>> {
    if !record.trusted() {
        return None;
    }
    for (rel, old) in &record.folders {
        let meta = crate::seen::metadata(&variant.join(path_of(rel)?)).ok()?;
        if Seen::of(&meta) != *old {
            return None;
        }
    }
    record
        .files
        .keys()
        .map(|rel| {
            let path = variant.join(path_of(rel)?);
            let meta = crate::seen::metadata(&path).ok()?;
            Some((rel.clone(), path, meta))
        })
        .collect()
}

/// The relative path a [`name_key`] stands for; `None` for a key no name
/// makes.
fn path_of(key: &str) -> Option<PathBuf> {
    use std::os::unix::ffi::OsStringExt;
    let mut bytes = Vec::with_capacity(key.len());
    let mut rest = key.as_bytes();
    while let Some((&b, tail)) = rest.split_first() {
        if b == b'%' {
            let hex = std::str::from_utf8(tail.get(..2)?).ok()?;
            bytes.push(u8::from_str_radix(hex, 16).ok()?);
            rest = &tail[2..];
        } else {
            bytes.push(b);
            rest = tail;
        }
    }
    Some(PathBuf::from(std::ffi::OsString::from_vec(bytes)))
}

/// How an identity was obtained, for benchmarks and tests.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct IdentityStats {
    /// Files whose content had to be read and hashed.
    pub hashed: usize,
    /// Files whose stat record was reused.
    pub reused: usize,
    /// Whether the variant's folders were listed (else the record's
    /// listing was trusted: no folder changed since).
    pub listed: bool,
}

/// What vouches for an identity: the `stat` of each folder and file it was
/// computed from, and when they were taken.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct IdentityWitness {
    /// Wall clock (ns) before any of them was taken.
    pub taken_ns: i128,
    /// The variant's folders (their listings) and files, by their paths
    /// relative to the variant.
    pub files: Vec<Witness>,
}

impl IdentityWitness {
    /// Whether every `stat` was taken well after its file last changed
    /// ([`Witness::settled`]).
    pub fn settled(&self) -> bool {
        self.files.iter().all(|w| w.settled(self.taken_ns))
    }
}

/// Files that never count: byte code written when the variant is imported.
fn ignored(name: &str) -> bool {
    name == "__pycache__" || name.ends_with(".pyc")
}

/// Every file under `dir` with its metadata, following symlinks (the hub
/// cache stores files as links into `blobs/`) but stat-ing only those: the
/// directory listing already tells plain files and folders apart.
fn walk(
    root: &Path,
    dir: &Path,
    out: &mut Vec<(String, PathBuf, fs::Metadata)>,
    folders: &mut BTreeMap<String, FolderStat>,
) -> std::io::Result<()> {
    // Its `stat` vouches for its listing, each file's for its content.
    let meta = crate::seen::metadata(dir)?;
    folders.insert(
        name_key(dir.strip_prefix(root).unwrap_or(dir)),
        Seen::of(&meta),
    );
    for entry in fs::read_dir(dir)? {
        let entry = entry?;
        let name = entry.file_name().to_string_lossy().into_owned();
        if ignored(&name) {
            continue;
        }
        let path = entry.path();
        let meta = if entry.file_type()?.is_symlink() {
            fs::metadata(&path)?
        } else {
            entry.metadata()?
        };
        crate::seen::stat(&path, Some(&meta));
        if meta.is_dir() {
            walk(root, &path, out, folders)?;
        } else if meta.is_file() {
            out.push((
                name_key(path.strip_prefix(root).unwrap_or(&path)),
                path,
                meta,
            ));
        }
    }
    Ok(())
}

fn sha256_file(path: &Path) -> std::io::Result<String> {
    let mut file = crate::fs::open_regular(path)?;
    let mut hasher = Sha256::new();
    let mut buf = vec![0u8; 1 << 20];
    loop {
        let n = file.read(&mut buf)?;
        if n == 0 {
            break;
        }
        hasher.update(&buf[..n]);
    }
    Ok(base64::engine::general_purpose::STANDARD.encode(hasher.finalize()))
}

/// Identities of variant directories, with their stat records in the
/// identities bucket.
#[derive(Debug, Clone, Copy)]
pub struct Identities<'c> {
    cache: &'c Cache,
}

impl Cache {
    /// The identities bucket.
    pub(crate) fn identities(&self) -> Identities<'_> {
        Identities { cache: self }
    }
}

impl Identities<'_> {
    /// The identity of the variant at `variant`, and how much was hashed.
    ///
    /// A stat record that cannot be written (read-only cache) only costs
    /// hashing again next time. (The run asks `identify_witnessed`.)
    #[cfg(test)]
    pub fn identify(
        &self,
        variant: &Path,
        metadata: Option<&Metadata>,
    ) -> Result<(VariantFiles, IdentityStats), CacheError> {
        self.identify_witnessed(variant, metadata)
            .map(|(files, stats, _)| (files, stats))
    }

    /// [`Identities::identify`], with the `stat`s the identity was computed
    /// from (what a warm record keeps).
    pub fn identify_witnessed(
        &self,
        variant: &Path,
        metadata: Option<&Metadata>,
    ) -> Result<(VariantFiles, IdentityStats, IdentityWitness), CacheError> {
        let taken_ns = now_ns();
        let variant = std::path::absolute(variant).unwrap_or_else(|_| variant.to_path_buf());
        let io = |source| CacheError::Unreadable {
            path: variant.clone(),
            source,
        };
        let parent = variant.parent().unwrap_or(&variant).to_path_buf();
        let name = variant
            .file_name()
            .map(|n| name_key(Path::new(n)))
            .unwrap_or_default();
        let parts = DirParts {
            dir: parent.clone(),
        };
        let key = parts.key();
        let mut loaded = self
            .cache
            .identities
            .0
            .lock()
            .unwrap_or_else(|e| e.into_inner());
        let dir_record = loaded.entry(parent).or_insert_with(|| {
            self.cache
                .record::<DirParts, DirRecord>(&key)
                .hit()
                .unwrap_or_default()
        });
        let old = dir_record.variants.get(&name);
        let from_record = old.and_then(|o| {
            listed_from_record(&variant, o).map(|files| (files, o.folders.clone(), o.listed_ns))
        });
        let listed = from_record.is_none();
        let (files, folders, listed_ns) = match from_record {
            Some(known) => known,
            None => {
                let listed_ns = now_ns();
                let (mut files, mut folders) = (Vec::new(), BTreeMap::new());
                walk(&variant, &variant, &mut files, &mut folders).map_err(io)?;
                files.sort_by(|a, b| a.0.cmp(&b.0));
                (files, folders, listed_ns)
            }
        };
        let mut stats = IdentityStats {
            hashed: 0,
            reused: 0,
            listed,
        };
        let mut record = VariantRecord {
            folders,
            files: BTreeMap::new(),
            listed_ns,
        };
        for (rel, path, meta) in &files {
            let seen = Seen::of(meta);
            let stat = match old.and_then(|o| o.files.get(rel)) {
                Some(s) if s.seen == seen => {
                    stats.reused += 1;
                    s.clone()
                }
                _ => {
                    stats.hashed += 1;
                    FileStat {
                        seen,
                        sha256: sha256_file(path).map_err(io)?,
                    }
                }
            };
            record.files.insert(rel.clone(), stat);
        }
        // A listing that became trustworthy is kept too, once.
        let changed = old.is_none_or(|o| {
            (&o.folders, &o.files) != (&record.folders, &record.files)
                || (!o.trusted() && record.trusted())
        });
        let hashes: BTreeMap<&str, &str> = record
            .files
            .iter()
            .map(|(k, v)| (k.as_str(), v.sha256.as_str()))
            .collect();
        let content = match metadata.and_then(|m| m.digest.as_ref()) {
            Some(digest)
                if digest.algorithm == DigestAlgorithm::Sha256
                    && digest.files.iter().all(|(f, h)| {
                        hashes.get(name_key(Path::new(f)).as_str()) == Some(&h.as_str())
                    }) =>
            {
                format!(
                    "digest:{}",
                    Key::of_bytes(&serde_json::to_vec(&digest.files)?)
                )
            }
            _ => format!("content:{}", Key::of_bytes(&serde_json::to_vec(&hashes)?)),
        };
        let files = VariantFiles {
            content,
            metadata: record.files.get("metadata.json").map(|f| f.sha256.clone()),
        };
        let folders = record.folders.iter().map(|(rel, f)| Witness {
            path: path_of(rel).unwrap_or_default(),
            seen: Some(*f),
        });
        let plain = record.files.iter().map(|(rel, f)| Witness {
            path: path_of(rel).unwrap_or_default(),
            seen: Some(f.seen),
        });
        let witness = IdentityWitness {
            taken_ns,
            files: folders.chain(plain).collect(),
        };
        if changed {
            dir_record.variants.insert(name, record);
            let _ = self.cache.write(&Entry::new(parts, &*dir_record));
        }
        Ok((files, stats, witness))
    }
}
