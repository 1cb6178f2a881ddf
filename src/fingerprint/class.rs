//! A machine class in a few readable facts: what `fleet ls` shows of the
//! machines that published verdicts, and what `fleet diff` compares. The
//! full fingerprint's hash names the class; these facts only explain it.

use super::Fingerprint;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// The facts people tell machine classes apart by. Each is text, `-` when
/// the machine has none (no GPU, no toolkit, no torch).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ClassFacts {
    /// The GPU model(s) and compute capability.
    pub gpu: String,
    /// The NVIDIA driver version.
    pub driver: String,
    /// The active CUDA toolkit's version.
    pub toolkit: String,
    /// torch's version and the CUDA it was built for.
    pub torch: String,
    /// The Python version.
    pub python: String,
    /// OS and CPU architecture.
    pub arch: String,
    /// The environment variables of the fingerprint that are set (see
    /// [`super::env`]).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub env: BTreeMap<String, String>,
}

impl ClassFacts {
    /// Each fact with its name, in a fixed order; each variable of the
    /// environment as `env NAME`.
    pub fn named(&self) -> Vec<(String, String)> {
        let fixed = [
            ("gpu", &self.gpu),
            ("driver", &self.driver),
            ("toolkit", &self.toolkit),
            ("torch", &self.torch),
            ("python", &self.python),
            ("arch", &self.arch),
        ];
        fixed
            .into_iter()
            .map(|(name, value)| (name.to_string(), value.clone()))
            .chain(
                self.env
                    .iter()
                    .map(|(name, value)| (format!("env {name}"), value.clone())),
            )
            .collect()
    }
}

const NONE: &str = "-";

impl Fingerprint {
    /// The GPU models, each with its compute capability when measured
    /// (`NVIDIA H100 80GB HBM3 (sm 9.0)`), comma-separated; `None`
    /// without GPUs.
    pub fn gpu_models(&self) -> Option<String> {
        let mut names: Vec<String> = self
            .gpus
            .devices
            .iter()
            .map(|d| {
                let model = d.model.clone().unwrap_or_else(|| "NVIDIA GPU".into());
                match &d.compute_capability {
                    Some(cc) => format!("{model} (sm {cc})"),
                    None => model,
                }
            })
            .collect();
        names.dedup();
        (!names.is_empty()).then(|| names.join(", "))
    }

    /// This machine's class in readable facts.
    pub fn class_facts(&self) -> ClassFacts {
        let python = self.python.as_ref();
        let torch = python.and_then(|p| {
            let version = p.packages.get("torch")?.clone().unwrap_or_default();
            let cuda = p.torch.as_ref().and_then(|t| t.cuda.as_deref());
            Some(match cuda {
                Some(cuda) => format!("{version} (cuda {cuda})"),
                None => version,
            })
        });
        let toolkit = self
            .toolkits
            .found
            .iter()
            .find(|t| Some(&t.root) == self.toolkits.active.as_ref())
            .and_then(|t| t.version.clone());
        let or_none = |v: Option<String>| v.filter(|v| !v.is_empty()).unwrap_or(NONE.into());
        ClassFacts {
            gpu: or_none(self.gpu_models()),
            driver: or_none(self.gpus.driver.clone()),
            toolkit: or_none(toolkit),
            torch: or_none(torch),
            python: or_none(python.and_then(|p| p.version.clone())),
            arch: format!("{}-{}", self.host.os, self.host.arch),
            env: self.env.clone(),
        }
    }
}
