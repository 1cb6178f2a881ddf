//! The fingerprints bucket: the cache is the [`FactStore`] the fingerprint
//! layer is handed, so that the fingerprint keeps its slow-to-learn facts
//! without knowing where (it sits below the cache and never imports it).

use super::Cache;
use super::bucket::{Entry, Parts, Shelf};
use super::key::Key;
use crate::fingerprint::{FactStore, MeasuredFacts, ToolAnswer};
use serde::{Deserialize, Serialize};
use std::path::{Path, PathBuf};

/// What measured facts are keyed by: the fast fingerprint's hash.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct MeasuredParts {
    /// The fast fingerprint's hash.
    pub fast_hash: String,
}

impl Parts for MeasuredParts {
    const SHELF: Shelf = Shelf::MEASURED;

    fn key(&self) -> Key {
        Key::of_bytes(self.fast_hash.as_bytes())
    }
}

/// What a tool answer is keyed by: the tool's canonical path.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct ToolParts {
    /// The tool.
    pub tool: PathBuf,
}

impl Parts for ToolParts {
    const SHELF: Shelf = Shelf::TOOLS;

    fn key(&self) -> Key {
        Key::of_bytes(self.tool.as_os_str().as_encoded_bytes())
    }
}

/// Writes are best effort: a fact that cannot be kept is measured again.
impl FactStore for Cache {
    fn measured(&self, fast_hash: &str) -> Option<MeasuredFacts> {
        let parts = MeasuredParts {
            fast_hash: fast_hash.to_string(),
        };
        self.record::<MeasuredParts, MeasuredFacts>(&parts.key())
            .hit()
    }

    fn every_measured(&self) -> Vec<MeasuredFacts> {
        self.keys(Shelf::MEASURED)
            .iter()
            .filter_map(|key| self.record::<MeasuredParts, MeasuredFacts>(key).hit())
            .collect()
    }

    fn keep_measured(&self, fast_hash: &str, facts: &MeasuredFacts) {
        let parts = MeasuredParts {
            fast_hash: fast_hash.to_string(),
        };
        let _ = self.write(&Entry::new(parts, facts));
    }

    fn tool_answer(&self, tool: &Path) -> Option<ToolAnswer> {
        let parts = ToolParts {
            tool: tool.to_path_buf(),
        };
        self.record::<ToolParts, ToolAnswer>(&parts.key()).hit()
    }

    fn keep_tool_answer(&self, tool: &Path, answer: &ToolAnswer) {
        let parts = ToolParts {
            tool: tool.to_path_buf(),
        };
        let _ = self.write(&Entry::new(parts, answer));
    }
}
