//! preflight's own smoke workloads for known hub kernels (`probes/kernels/`),
//! compiled into the binary, each keyed by the hub repository it was
//! written for.
//!
//! A smoke calls a kernel's API by name, so it only fits the repository it
//! was written for: a kernel elsewhere that shares its name (`myorg/relu`,
//! a local checkout called `relu`) gets none unless its user asks for one
//! ([`Forks`], `--smoke-as`).

use crate::discover::{DiscoverError, RepoId};
use std::collections::BTreeMap;

/// The environment variable that names forks and the library smoke each
/// runs (`FORK=ENTRY,…`, [`Forks::parse`]): the opt-in of the Python door,
/// whose `preflight` inherits it.
pub const SMOKE_AS_ENV: &str = "PREFLIGHT_SMOKE_AS";

const FLASH_ATTN: &str = include_str!("../../probes/kernels/flash-attn.py");
const TRITON_KERNELS: &str = include_str!("../../probes/kernels/triton-kernels.py");

/// One smoke of the library: the hub repository it was written for and
/// the file's text.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Entry {
    id: &'static str,
    source: &'static str,
}

/// Every smoke of the library, by the hub repository it was written for.
pub const LIBRARY: &[Entry] = &[
    Entry::new(
        "kernels-community/activation",
        include_str!("../../probes/kernels/activation.py"),
    ),
    Entry::new(
        "kernels-community/relu",
        include_str!("../../probes/kernels/relu.py"),
    ),
    Entry::new(
        "kernels-community/deep-gemm",
        include_str!("../../probes/kernels/deep-gemm.py"),
    ),
    Entry::new(
        "kernels-community/finegrained-fp8",
        include_str!("../../probes/kernels/finegrained-fp8.py"),
    ),
    Entry::new(
        "kernels-community/sonic-moe",
        include_str!("../../probes/kernels/sonic-moe.py"),
    ),
    Entry::new("kernels-community/flash-attn", FLASH_ATTN),
    Entry::new("kernels-community/flash-attn2", FLASH_ATTN),
    Entry::new("kernels-community/flash-attn3", FLASH_ATTN),
    Entry::new("kernels-community/vllm-flash-attn3", FLASH_ATTN),
    Entry::new(
        "kernels-community/nvfp4-gemm",
        include_str!("../../probes/kernels/nvfp4-gemm.py"),
    ),
    Entry::new("kernels-community/gpt-oss-triton-kernels", TRITON_KERNELS),
    Entry::new("kernels-community/triton-kernels", TRITON_KERNELS),
];

/// A name given for a library smoke that the library does not have.
#[derive(Debug, thiserror::Error)]
pub enum LibraryError {
    /// Not `ORG/NAME`.
    #[error(transparent)]
    RepoId(#[from] DiscoverError),
    /// A repo id without a smoke in the library.
    #[error("no library smoke for {given} (the library has: {})", known())]
    Unknown {
        /// As given.
        given: String,
    },
    /// A fork mapping that is not `FORK=ENTRY`.
    #[error(
        "{given:?}: expected FORK=ENTRY, hub repo ids both (e.g. myorg/relu=kernels-community/relu)"
    )]
    Malformed {
        /// The malformed part.
        given: String,
    },
}

fn known() -> String {
    let ids: Vec<&str> = LIBRARY.iter().map(Entry::id).collect();
    ids.join(", ")
}

impl Entry {
    const fn new(id: &'static str, source: &'static str) -> Entry {
        Entry { id, source }
    }

    /// The hub repository the smoke was written for (`kernels-community/relu`).
    pub fn id(&self) -> &'static str {
        self.id
    }

    /// The smoke file's text.
    pub fn source(&self) -> &'static str {
        self.source
    }

    /// The smoke written for `repo`: the same organization, and the same
    /// name with `-` and `_` alike; never by the name alone.
    pub fn for_repo(repo: &RepoId) -> Option<Entry> {
        let name = |n: &str| n.replace('_', "-");
        LIBRARY.iter().copied().find(|entry| {
            entry
                .id
                .split_once('/')
                .is_some_and(|(org, known)| org == repo.org() && name(known) == name(repo.name()))
        })
    }

    /// The entry a user names (`--smoke-as kernels-community/relu`).
    pub fn named(given: &str) -> Result<Entry, LibraryError> {
        Entry::for_repo(&RepoId::parse(given)?).ok_or_else(|| LibraryError::Unknown {
            given: given.to_owned(),
        })
    }
}

/// Kernels that run a library smoke written for another repository, by
/// their own repo id: forks whose user vouches that the API is the same
/// (`PREFLIGHT_SMOKE_AS`, `FORK=ENTRY,…`).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Forks(BTreeMap<RepoId, Entry>);

impl Forks {
    /// Parse `FORK=ENTRY` pairs separated by `,` (blank parts ignored).
    pub fn parse(text: &str) -> Result<Forks, LibraryError> {
        let mut forks = BTreeMap::new();
        for pair in text.split(',').map(str::trim).filter(|p| !p.is_empty()) {
            let Some((fork, entry)) = pair.split_once('=') else {
                return Err(LibraryError::Malformed {
                    given: pair.to_owned(),
                });
            };
            forks.insert(RepoId::parse(fork.trim())?, Entry::named(entry.trim())?);
        }
        Ok(Forks(forks))
    }

    /// The entry `repo` runs, if its user named one.
    pub fn entry(&self, repo: &RepoId) -> Option<Entry> {
        self.0.get(repo).copied()
    }
}

/// `FORK=ENTRY,…`, as [`Forks::parse`] reads it.
impl std::fmt::Display for Forks {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let pairs: Vec<String> = self
            .0
            .iter()
            .map(|(fork, entry)| format!("{fork}={}", entry.id()))
            .collect();
        f.write_str(&pairs.join(","))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn repo(id: &str) -> RepoId {
        RepoId::parse(id).unwrap()
    }

    #[test]
    fn found_by_the_repo_id_it_was_written_for() {
        for id in [
            "kernels-community/activation",
            "kernels-community/relu",
            "kernels-community/deep-gemm",
            "kernels-community/vllm_flash_attn3",
        ] {
            assert!(Entry::for_repo(&repo(id)).is_some(), "{id}");
        }
        assert_eq!(
            Entry::for_repo(&repo("kernels-community/vllm_flash_attn3")).map(|e| e.id()),
            Some("kernels-community/vllm-flash-attn3")
        );
        assert!(Entry::for_repo(&repo("kernels-community/flash-attn4")).is_none());
    }

    #[test]
    fn never_by_the_name_alone() {
        for id in [
            "myorg/relu",
            "myorg/activation",
            "Kernels-Community/relu",
            "kernels-community-fork/deep-gemm",
        ] {
            assert!(Entry::for_repo(&repo(id)).is_none(), "{id}");
        }
        assert!(matches!(
            Entry::named("relu"),
            Err(LibraryError::RepoId(DiscoverError::BadRepoId(_)))
        ));
        assert!(matches!(
            Entry::named("myorg/relu"),
            Err(LibraryError::Unknown { .. })
        ));
    }

    #[test]
    fn forks_map_repo_ids_to_entries() {
        let forks = Forks::parse(
            "myorg/relu=kernels-community/relu, me/act = kernels-community/activation,",
        )
        .unwrap();
        assert_eq!(
            forks.entry(&repo("myorg/relu")).map(|e| e.id()),
            Some("kernels-community/relu")
        );
        assert_eq!(
            forks.entry(&repo("me/act")).map(|e| e.id()),
            Some("kernels-community/activation")
        );
        assert_eq!(forks.entry(&repo("kernels-community/relu")), None);
        assert_eq!(Forks::parse(&forks.to_string()).unwrap(), forks);
        assert_eq!(Forks::parse("").unwrap(), Forks::default());
        for (bad, why) in [
            ("myorg/relu", "expected FORK=ENTRY"),
            ("relu=kernels-community/relu", "invalid repo id \"relu\""),
            ("myorg/relu=relu", "invalid repo id \"relu\""),
            (
                "myorg/relu=myorg/relu2",
                "no library smoke for myorg/relu2 (the library has: kernels-community/activation,",
            ),
        ] {
            let err = Forks::parse(bad).unwrap_err().to_string();
            assert!(err.contains(why), "{bad}: {err}");
        }
    }

    #[test]
    fn every_entry_is_a_repo_id_and_defines_smoke() {
        for entry in LIBRARY {
            assert!(RepoId::parse(entry.id()).is_ok(), "{}", entry.id());
            assert!(
                entry.source().contains("def smoke(kernel, device)"),
                "{}",
                entry.id()
            );
        }
    }
}
