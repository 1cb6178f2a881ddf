//! `warmup` as the library's front door answers it: the targets asked for
//! (default: every kernel in the hub cache), fetched from the hub first
//! when asked, then every job answered and kept, so that a later `check`
//! or `select` of them is answered from the cache.

use super::event::{EventKind, Listener, Stream};
use super::{CheckOptions, CheckReport, Plan, Session, SessionError};
use crate::discover::project::Pinned;
use crate::discover::{Targets, hub_cache};
use crate::sandbox::Cancel;
use std::path::PathBuf;

/// What `warmup` warms, validated ([`WarmupOptions::new`]).
#[derive(Debug, Clone, Default)]
pub struct WarmupOptions {
    paths: Vec<PathBuf>,
    pinned: Vec<(String, Pinned)>,
    pins_asked: bool,
    download: bool,
}

impl WarmupOptions {
    /// The targets at `paths`, and the kernels `pinned` (each named as
    /// given, from `--repo`, `--lock` and `--project`: `pins_asked` says
    /// whether a lock file or project was given, which may name none);
    /// with `download`, the pinned kernels are fetched from the hub first.
    /// Nothing at all: every kernel in the hub cache. `Err`: `download`
    /// without a pinned kernel to fetch.
    pub fn new(
        paths: Vec<PathBuf>,
        pinned: Vec<(String, Pinned)>,
        pins_asked: bool,
        download: bool,
    ) -> Result<WarmupOptions, SessionError> {
        if download && pinned.is_empty() {
            return Err(SessionError::Refused(
                "--download fetches the kernels of --repo, --lock or --project: give one".into(),
            ));
        }
        Ok(WarmupOptions {
            paths,
            pinned,
            pins_asked,
            download,
        })
    }
}

/// What [`Session::warmup`] answered.
#[derive(Debug)]
pub enum Warmed {
    /// There was nothing to warm: why, for people.
    Nothing(String),
    /// Every job of the targets was answered and kept.
    Ran {
        /// The plan of the targets.
        plan: Box<Plan>,
        /// Every job's outcome.
        report: Box<CheckReport>,
        /// How long the whole warmup took.
        elapsed: std::time::Duration,
    },
}

impl Session {
    /// `warmup`: the targets of `options` (fetched first with
    /// `--download`, through the probed interpreter's `kernel_preflight`)
    /// answered and kept, only the variants for this OS and CPU, with no
    /// embedded-architecture judge. `listener` hears every event, timed.
    pub fn warmup(
        &self,
        options: &WarmupOptions,
        cancel: &Cancel,
        listener: &dyn Listener,
    ) -> Result<Warmed, SessionError> {
        let stream = Stream::new(listener);
        if options.download {
            let python = self.download_python()?;
            for (_, pin) in &options.pinned {
                stream.emit(EventKind::Fetching {
                    repo: &pin.repo,
                    revision: &pin.spec.to_string(),
                });
                super::download::fetch(&python, pin)?;
            }
        }
        let mut targets = Targets::new();
        for path in &options.paths {
            targets.add(path.display().to_string(), path)?;
        }
        for (given, pin) in &options.pinned {
            targets.add_pinned(given.clone(), pin)?;
        }
        if options.paths.is_empty() && options.pinned.is_empty() {
            if options.pins_asked {
                return Ok(Warmed::Nothing(
                    "the lock files and projects name no kernels".into(),
                ));
            }
            for problem in targets.add_every_cached_ref() {
                stream.warn(&problem);
            }
            if targets.is_empty() {
                return Ok(Warmed::Nothing(format!(
                    "no kernels in the hub cache at {}",
                    hub_cache::cache_root().display()
                )));
            }
        }
        let began = std::time::Instant::now();
        let (plan, report, _) = self.answer(
            targets.into_vec(),
            &CheckOptions::default(),
            cancel,
            &stream,
        )?;
        Ok(Warmed::Ran {
            plan: Box::new(plan),
            report: Box::new(report),
            elapsed: began.elapsed(),
        })
    }

    /// The interpreter `--download` fetches with: the session's, else the
    /// fingerprint's.
    fn download_python(&self) -> Result<PathBuf, SessionError> {
        if let Some(python) = &self.options().python {
            return Ok(python.clone());
        }
        self.fingerprint()?
            .python
            .as_ref()
            .and_then(|p| crate::probe::find_python(&p.interpreter))
            .ok_or(SessionError::Download(super::DownloadError::NoPython))
    }
}
