//! A variant's identity: what its files are, independent of where they lie.
//!
//! Every file is hashed (sha256) once; a stat record (size, mtime, inode) per
//! file, kept on disk, lets later calls skip hashing while nothing changed.
//! When the variant's `metadata.json` carries a digest and the files match
//! it, the identity is that digest (stable across machines and copies);
//! otherwise it is the hash of the files themselves, so a variant modified
//! after it was built is never mistaken for the original.

use super::key::{Key, hex};
use super::store::{CacheError, create_private_dir, write_atomic};
use crate::discover::Metadata;
use base64::Engine;
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};
use std::collections::BTreeMap;
use std::fs;
use std::io::Read;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

/// What was recorded about one file.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
struct FileStat {
    size: u64,
    mtime_ns: i128,
    ino: u64,
    /// base64 sha256, the hub digest's encoding.
    sha256: String,
}

/// The stat records of one variant directory.
#[derive(Debug, Default, Serialize, Deserialize)]
struct StatRecord {
    path: PathBuf,
    files: BTreeMap<String, FileStat>,
}

/// How an identity was obtained, for benchmarks and tests.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct IdentityStats {
    /// Files whose content had to be read and hashed.
    pub hashed: usize,
    /// Files whose stat record was reused.
    pub reused: usize,
}

/// Files that never count: byte code written when the variant is imported.
fn ignored(name: &str) -> bool {
    name == "__pycache__" || name.ends_with(".pyc")
}

fn walk(root: &Path, dir: &Path, out: &mut Vec<(String, PathBuf)>) -> std::io::Result<()> {
    for entry in fs::read_dir(dir)? {
        let entry = entry?;
        let name = entry.file_name().to_string_lossy().into_owned();
        if ignored(&name) {
            continue;
        }
        let path = entry.path();
        // Follow symlinks: the hub cache stores files as links into blobs/.
        let meta = fs::metadata(&path)?;
        if meta.is_dir() {
            walk(root, &path, out)?;
        } else if meta.is_file() {
            let rel = path
                .strip_prefix(root)
                .unwrap_or(&path)
                .to_string_lossy()
                .into_owned();
            out.push((rel, path));
        }
    }
    Ok(())
}

fn sha256_file(path: &Path) -> std::io::Result<String> {
    let mut file = fs::File::open(path)?;
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

/// Identities of variant directories, with stat records under `dir`.
#[derive(Debug, Clone)]
pub struct Identities {
    dir: PathBuf,
}

impl Identities {
    /// Keep stat records under `dir` (created on first write).
    pub fn new(dir: impl Into<PathBuf>) -> Self {
        Identities { dir: dir.into() }
    }

    fn record_path(&self, variant: &Path) -> PathBuf {
        let key = Key::of_bytes(variant.as_os_str().as_encoded_bytes());
        self.dir.join(format!("{key}.json"))
    }

    /// The identity of the variant at `variant`, and how much was hashed.
    ///
    /// A stat record that cannot be written (read-only cache) only costs
    /// hashing again next time.
    pub fn identify(
        &self,
        variant: &Path,
        metadata: Option<&Metadata>,
    ) -> Result<(String, IdentityStats), CacheError> {
        let variant = std::path::absolute(variant).unwrap_or_else(|_| variant.to_path_buf());
        let io = |source| CacheError::Io {
            path: variant.clone(),
            source,
        };
        let mut files = Vec::new();
        walk(&variant, &variant, &mut files).map_err(io)?;
        files.sort();
        let record_path = self.record_path(&variant);
        let old: StatRecord = fs::read(&record_path)
            .ok()
            .and_then(|b| serde_json::from_slice(&b).ok())
            .filter(|r: &StatRecord| r.path == variant)
            .unwrap_or_default();
        let mut stats = IdentityStats {
            hashed: 0,
            reused: 0,
        };
        let mut record = StatRecord {
            path: variant.clone(),
            files: BTreeMap::new(),
        };
        for (rel, path) in &files {
            let meta = fs::metadata(path).map_err(io)?;
            let mtime_ns = i128::from(meta.mtime()) * 1_000_000_000 + i128::from(meta.mtime_nsec());
            let stat = match old.files.get(rel) {
                Some(s)
                    if s.size == meta.len() && s.mtime_ns == mtime_ns && s.ino == meta.ino() =>
                {
                    stats.reused += 1;
                    s.clone()
                }
                _ => {
                    stats.hashed += 1;
                    FileStat {
                        size: meta.len(),
                        mtime_ns,
                        ino: meta.ino(),
                        sha256: sha256_file(path).map_err(io)?,
                    }
                }
            };
            record.files.insert(rel.clone(), stat);
        }
        if stats.hashed > 0 || old.files.len() != record.files.len() {
            let _ = create_private_dir(&self.dir)
                .and_then(|()| write_atomic(&record_path, &serde_json::to_vec(&record)?));
        }
        let hashes: BTreeMap<&str, &str> = record
            .files
            .iter()
            .map(|(k, v)| (k.as_str(), v.sha256.as_str()))
            .collect();
        let identity = match metadata.and_then(|m| m.digest.as_ref()) {
            Some(digest)
                if digest
                    .files
                    .iter()
                    .all(|(f, h)| hashes.get(f.as_str()) == Some(&h.as_str())) =>
            {
                format!(
                    "digest:{}",
                    Key::of_bytes(&serde_json::to_vec(&digest.files)?)
                )
            }
            _ => format!("content:{}", Key::of_bytes(&serde_json::to_vec(&hashes)?)),
        };
        Ok((identity, stats))
    }
}

/// sha256 hex of a file's bytes, for smoke source identities.
pub fn file_identity(path: &Path) -> std::io::Result<String> {
    let bytes = fs::read(path)?;
    Ok(format!("file:{}", hex(&Sha256::digest(&bytes))))
}
