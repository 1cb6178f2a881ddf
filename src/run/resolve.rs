//! `resolve` as the library's front door answers it: the hub's name-level
//! decisions for some variants on this machine, or on the machine the
//! `--system` overrides describe.

use super::{Session, SessionError};
use crate::declared::{self, Decision, System};
use crate::discover::Discovery;
use crate::variant::VariantName;

/// What `resolve` judges.
#[derive(Debug)]
pub enum Resolving {
    /// The variants of a kernel's directory.
    Discovered(Discovery),
    /// Variant names alone.
    Names(Vec<VariantName>),
}

/// What [`Session::resolve`] answered.
#[derive(Debug)]
pub struct Resolved {
    /// Each variant's decision, in preference order.
    pub decisions: Vec<Decision>,
    /// The variants' directory, when they came from one.
    pub discovery: Option<Discovery>,
    /// The machine judged for.
    pub system: System,
}

impl Resolved {
    /// Whether the hub would accept some variant here.
    pub fn any_accepted(&self) -> bool {
        self.decisions.iter().any(Decision::accepted)
    }
}

impl Session {
    /// `resolve`: the hub's decision on each variant of `what` for this
    /// machine, with the facts `overrides` (`k=v,…`) names replaced. The
    /// overrides are parsed before anything is detected; a machine they
    /// describe entirely is not fingerprinted.
    pub fn resolve(&self, what: Resolving, overrides: &str) -> Result<Resolved, SessionError> {
        System::bare_host().with_overrides(overrides)?;
        let detected = if System::covers_detected(overrides) {
            System::bare_host()
        } else {
            System::from_fingerprint(&self.fingerprint()?)
        };
        let system = detected.with_overrides(overrides)?;
        let (names, discovery) = match what {
            Resolving::Discovered(d) => {
                (d.variants.iter().map(|v| v.name.clone()).collect(), Some(d))
            }
            Resolving::Names(names) => (names, None),
        };
        Ok(Resolved {
            decisions: declared::resolve(&names, &system),
            discovery,
            system,
        })
    }
}
