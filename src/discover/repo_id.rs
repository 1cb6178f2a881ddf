//! A hub repository id, `ORG/NAME`: what a kernel is known by on the hub.

use super::DiscoverError;
use super::hub_cache::is_repo_id;
use serde::{Serialize, Serializer};

/// `ORG/NAME` as the hub spells it ([`is_repo_id`]); one that exists is valid.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct RepoId {
    id: String,
    slash: usize,
}

impl RepoId {
    /// Parse `ORG/NAME`, else [`DiscoverError::BadRepoId`].
    pub fn parse(id: &str) -> Result<RepoId, DiscoverError> {
        match id.find('/').filter(|_| is_repo_id(id)) {
            Some(slash) => Ok(RepoId {
                id: id.to_owned(),
                slash,
            }),
            None => Err(DiscoverError::BadRepoId(id.to_owned())),
        }
    }

    /// The organization or user (`kernels-community`).
    pub fn org(&self) -> &str {
        &self.id[..self.slash]
    }

    /// The repository's name (`activation`).
    pub fn name(&self) -> &str {
        &self.id[self.slash + 1..]
    }

    /// `ORG/NAME`.
    pub fn as_str(&self) -> &str {
        &self.id
    }
}

impl std::fmt::Display for RepoId {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.id)
    }
}

impl std::str::FromStr for RepoId {
    type Err = DiscoverError;

    fn from_str(id: &str) -> Result<RepoId, DiscoverError> {
        RepoId::parse(id)
    }
}

impl Serialize for RepoId {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_str(&self.id)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    proptest! {
        #[test]
        fn round_trips(org in "[A-Za-z0-9_]{1,10}(\\.[A-Za-z0-9_]{1,3})?", name in "[a-z0-9_]{1,10}(-[a-z0-9_]{1,4})?") {
            let text = format!("{org}/{name}");
            let id = RepoId::parse(&text).unwrap();
            prop_assert_eq!((id.org(), id.name(), id.to_string()), (org.as_str(), name.as_str(), text.clone()));
        }

        #[test]
        fn never_panics(text in "[a-z/._-]{0,12}") {
            let _ = RepoId::parse(&text);
        }
    }

    #[test]
    fn parts_round_trip() {
        let id = RepoId::parse("kernels-community/flash-attn3").unwrap();
        assert_eq!((id.org(), id.name()), ("kernels-community", "flash-attn3"));
        assert_eq!(id.to_string(), "kernels-community/flash-attn3");
        for bad in ["relu", "a/b/c", "a--b/c", ""] {
            assert!(
                matches!(RepoId::parse(bad), Err(DiscoverError::BadRepoId(_))),
                "{bad}"
            );
        }
    }
}
