//! Child side: the cuda executor's main, run as `preflight __cuda-child
//! REQUEST` inside a sandbox. It speaks [`crate::protocol`]: it reports
//! every phase to the channel file before entering it, and turns every
//! failure (a `CUresult`, an NVRTC log, a missing library, even a panic)
//! into a [`Failure`] fact, never into a crash it could have avoided.

use super::driver::{self, Driver, Module};
use super::launch::Prepared;
use super::request::{CudaRequest, Launch, ModuleKind, ModuleSpec};
use super::{bound, embedded, nvrtc};
use crate::protocol::{
    CompileInfo, Depth, Event, EventLog, ExecutorKind, Failure, Phase, Runtime, Sample, Span,
};
use std::cell::Cell;
use std::panic::AssertUnwindSafe;
use std::path::Path;
use std::process::ExitCode;

/// Exit status when the child could not even open its result file.
const NO_RESULT_FILE: u8 = 3;

/// Runs the request in `request_path` and exits 0 once `done` is written.
pub fn main(request_path: &Path) -> ExitCode {
    let request: CudaRequest = match std::fs::read(request_path)
        .map_err(|e| e.to_string())
        .and_then(|b| serde_json::from_slice(&b).map_err(|e| e.to_string()))
    {
        Ok(r) => r,
        Err(e) => {
            eprintln!(
                "preflight cuda child: cannot read request {}: {e}",
                request_path.display()
            );
            return ExitCode::from(NO_RESULT_FILE);
        }
    };
    let mut log = match EventLog::open(&request.events, ExecutorKind::Cuda) {
        Ok(log) => log,
        Err(e) => {
            eprintln!(
                "preflight cuda child: cannot create {}: {e}",
                request.events.display()
            );
            return ExitCode::from(NO_RESULT_FILE);
        }
    };
    // cudarc reports a missing NVRTC library or entry point by panicking;
    // the message is recorded as a fact below, so the default hook's output
    // would only be noise on stderr.
    std::panic::set_hook(Box::new(|_| {}));
    let phase = Cell::new(Phase::Start);
    let mut child = Child {
        log: &mut log,
        phase: &phase,
        depth: Depth::Load,
    };
    child.enter(Phase::Start, "libraries");
    let outcome = std::panic::catch_unwind(AssertUnwindSafe(|| child.run(&request)));
    let depth = child.depth;
    let failure = match outcome {
        Ok(Ok(())) => None,
        Ok(Err((phase, failure))) => Some((phase, failure)),
        Err(payload) => Some((phase.get(), from_panic(payload))),
    };
    match failure {
        Some((phase, failure)) => {
            // Compiler and JIT logs also go to stderr, where the parent
            // keeps the tail of whatever the child printed.
            match &failure {
                Failure::Nvrtc(e) => eprintln!("{}", e.log),
                Failure::Cuda(e) => {
                    if let Some(text) = &e.log {
                        eprintln!("{text}");
                    }
                }
                _ => {}
            }
            log.emit(&Event::Failed { phase, failure });
        }
        None => log.emit(&Event::Done { depth }),
    }
    ExitCode::SUCCESS
}

/// A panic payload as a fact: cudarc's loader panics name the library or
/// the symbol it could not find.
fn from_panic(payload: Box<dyn std::any::Any + Send>) -> Failure {
    let detail = payload
        .downcast_ref::<String>()
        .cloned()
        .or_else(|| payload.downcast_ref::<&str>().map(|s| s.to_string()))
        .unwrap_or_else(|| "panic without a message".to_owned());
    if detail.starts_with("Unable to dynamically load") {
        let library = detail
            .split('"')
            .nth(1)
            .map_or_else(|| "a CUDA library".to_owned(), |l| format!("lib{l}"));
        Failure::LibraryMissing { library, detail }
    } else if detail.starts_with("Missing symbol") {
        Failure::SymbolMissing { detail }
    } else {
        Failure::Internal {
            message: format!("the cuda executor panicked: {detail}"),
            traceback: None,
        }
    }
}

/// A failure and the phase it happened in.
pub(super) type Failed = (Phase, Failure);

/// The child's state while it works: where its events go and how far it got.
pub(super) struct Child<'a> {
    pub(super) log: &'a mut EventLog,
    phase: &'a Cell<Phase>,
    /// How far the work got.
    pub(super) depth: Depth,
}

impl Child<'_> {
    /// Say which phase the child enters, before it does.
    pub(super) fn enter(&mut self, phase: Phase, what: &str) {
        self.phase.set(phase);
        self.log.emit(&Event::Phase {
            phase,
            what: Some(what.to_owned()),
        });
    }

    fn run(&mut self, request: &CudaRequest) -> Result<(), Failed> {
        if request.list_devices {
            return self.list_devices(request).map_err(|f| (Phase::Start, f));
        }
        let at = |phase| move |f| (phase, f);
        let cuda_source = request
            .module
            .as_ref()
            .filter(|m| m.kind == ModuleKind::Cuda);
        // Any CUDA C source the child compiles, a bench's modules too, must
        // reach the chosen NVRTC: loaded by path first, it answers to its
        // soname before a library of that name on the loader's path can.
        let compiles = cuda_source.is_some()
            || request
                .bench
                .as_ref()
                .is_some_and(|b| b.modules.iter().any(|m| m.module.kind == ModuleKind::Cuda));
        if let (Some(lib), true) = (&request.nvrtc_library, compiles) {
            driver::load_library(Some(lib), "libnvrtc").map_err(at(Phase::Start))?;
        }
        self.enter(Phase::Start, "driver");
        let opened = self.open_driver(request);
        let (driver, device) = match (opened, cuda_source) {
            (Ok(d), _) => d,
            // Without a device, still say whether the source compiles:
            // that answer needs no GPU and a broken kernel is the more
            // useful thing to report.
            (Err(failure), Some(spec)) => {
                self.compile(spec, None, request.nvrtc_library.as_deref())?;
                return Err((Phase::Start, failure));
            }
            (Err(failure), None) => return Err((Phase::Start, failure)),
        };
        if let Some(bench) = &request.bench {
            self.depth = Depth::Device;
            return super::bench_child::serve(
                self,
                &driver,
                &device,
                bench,
                request.nvrtc_library.as_deref(),
            );
        }
        if let Some(variant) = &request.variant {
            self.load_embedded(&driver, &device, variant)?;
            self.depth = Depth::Device;
            return Ok(());
        }
        self.depth = Depth::Device;
        let Some(spec) = &request.module else {
            return Ok(());
        };
        let (image, kind) = self.image(spec, &device, request.nvrtc_library.as_deref())?;
        self.enter(Phase::Load, "load");
        let started = std::time::Instant::now();
        let driver::Loaded {
            module, info_log, ..
        } = driver.load(&image, kind).map_err(at(Phase::Load))?;
        self.log.emit(&Event::Timing {
            span: Span::Load,
            ms: started.elapsed().as_secs_f64() * 1e3,
        });
        self.log.emit(&Event::Loaded { info_log });
        for launch in &request.launches {
            self.launch(&driver, &module, launch)?;
        }
        Ok(())
    }

    /// What the driver loads for `spec`: its file, or the image NVRTC
    /// compiled from its source for `device`.
    pub(super) fn image(
        &mut self,
        spec: &ModuleSpec,
        device: &crate::protocol::DeviceInfo,
        nvrtc: Option<&Path>,
    ) -> Result<(Vec<u8>, ModuleKind), Failed> {
        Ok(match spec.kind {
            ModuleKind::Cuda => {
                let compiled = self.compile(spec, Some(&device.sm()), nvrtc)?;
                (compiled.image, compiled.kind)
            }
            kind => {
                let bytes = std::fs::read(&spec.path).map_err(|e| {
                    (
                        Phase::Load,
                        Failure::InvalidInput {
                            message: format!("cannot read {}: {e}", spec.path.display()),
                        },
                    )
                })?;
                (bytes, kind)
            }
        })
    }

    /// A device-list request: the driver's version (asked before `cuInit`,
    /// so that it is known even when `cuInit` fails), then every device in
    /// ordinal order, with no context created on any of them.
    fn list_devices(&mut self, request: &CudaRequest) -> Result<(), Failure> {
        self.enter(Phase::Start, "devices");
        let libcuda = load_libcuda(request)?;
        self.log.emit(&Event::Runtime(Runtime {
            cuda_driver: Some(driver::version()?),
            libcuda,
            ..Runtime::default()
        }));
        let (_, count) = driver::init()?;
        self.log.emit(&Event::Runtime(Runtime {
            devices: Some(count),
            ..Runtime::default()
        }));
        let devices = (0..count)
            .map(driver::describe)
            .collect::<Result<Vec<_>, _>>()?;
        self.log.emit(&Event::Devices { devices });
        Ok(())
    }

    fn open_driver(
        &mut self,
        request: &CudaRequest,
    ) -> Result<(Driver, crate::protocol::DeviceInfo), Failure> {
        let libcuda = load_libcuda(request)?;
        let (version, devices) = driver::init()?;
        self.log.emit(&Event::Runtime(Runtime {
            cuda_driver: Some(version),
            devices: Some(devices),
            libcuda,
            ..Runtime::default()
        }));
        if request.device >= devices {
            return Err(Failure::NoSuchDevice {
                ordinal: request.device,
                count: devices,
            });
        }
        let (driver, info) = Driver::open(request.device)?;
        self.log.emit(&Event::Device(info.clone()));
        Ok((driver, info))
    }

    /// Loads the CUDA code embedded in the shared objects of the variant
    /// at `dir`, one event per file; the first load the driver refused
    /// ends the work, once every file has been tried.
    fn load_embedded(
        &mut self,
        driver: &Driver,
        device: &crate::protocol::DeviceInfo,
        dir: &Path,
    ) -> Result<(), Failed> {
        let at = |phase| move |f| (phase, f);
        let files = embedded::shared_objects(dir).map_err(|e| {
            (
                Phase::Load,
                Failure::InvalidInput {
                    message: format!("cannot list {}: {e}", dir.display()),
                },
            )
        })?;
        let started = std::time::Instant::now();
        let mut loads = Vec::with_capacity(files.len());
        for file in &files {
            self.enter(Phase::Load, &file.display().to_string());
            let load = embedded::load_file(driver, device.capability(), dir, file)
                .map_err(at(Phase::Load))?;
            self.log.emit(&Event::Embedded(load.clone()));
            loads.push(load);
        }
        self.log.emit(&Event::Timing {
            span: Span::Load,
            ms: started.elapsed().as_secs_f64() * 1e3,
        });
        match embedded::first_error(&loads) {
            Some(error) => Err((Phase::Load, Failure::Cuda(error))),
            None => Ok(()),
        }
    }

    /// Compiles CUDA C source for the requested target, else `device_sm`,
    /// else NVRTC's default target, with NVRTC verified to be the library
    /// preflight chose (`chosen`).
    fn compile(
        &mut self,
        spec: &ModuleSpec,
        device_sm: Option<&str>,
        chosen: Option<&Path>,
    ) -> Result<nvrtc::Compiled, Failed> {
        self.enter(Phase::Load, "compile");
        let source = std::fs::read_to_string(&spec.path).map_err(|e| {
            (
                Phase::Load,
                Failure::InvalidInput {
                    message: format!("cannot read {}: {e}", spec.path.display()),
                },
            )
        })?;
        let name = spec
            .path
            .file_name()
            .map_or_else(|| "module.cu".into(), |n| n.to_string_lossy().into_owned());
        let target = spec.target.as_deref().or(device_sm);
        // Loading NVRTC (its version is the first call) binds the library
        // whose answers the compile would report: it must be the chosen one.
        nvrtc::version().map_err(|f| (Phase::Load, f))?;
        let nvrtc = bound::verify("libnvrtc", chosen, nvrtc::bound_library())
            .map_err(|f| (Phase::Load, f))?;
        self.log.emit(&Event::Runtime(Runtime {
            nvrtc,
            ..Runtime::default()
        }));
        let compiled = nvrtc::compile(&source, &name, target, &spec.nvrtc_options)
            .map_err(|f| (Phase::Load, f))?;
        self.log.emit(&Event::Compiled(CompileInfo {
            target: compiled.target.clone(),
            image: compiled.kind.as_str().to_owned(),
            bytes: compiled.image.len() as u64,
            nvrtc_version: compiled.version.clone(),
            log: compiled.log.clone(),
        }));
        Ok(compiled)
    }

    fn launch(&mut self, driver: &Driver, module: &Module, launch: &Launch) -> Result<(), Failed> {
        let name = &launch.function;
        self.enter(Phase::Launch, name);
        let at = |phase| move |f| (phase, f);
        let mut prepared = Prepared::new(driver, module, launch).map_err(at(Phase::Launch))?;
        prepared.run(driver).map_err(at(Phase::Launch))?;
        driver.synchronize().map_err(at(Phase::Launch))?;
        self.log.emit(&Event::Launched {
            function: name.clone(),
        });
        self.depth = self.depth.max(Depth::Smoke);

        self.enter(Phase::Verify, name);
        let compared = prepared.verify(driver).map_err(at(Phase::Verify))?;
        if compared > 0 {
            self.log.emit(&Event::Verified {
                label: name.clone(),
                compared,
            });
            self.depth = Depth::Verified;
        }

        self.enter(Phase::Launch, &format!("time {name}"));
        for _ in 0..launch.warmup {
            prepared.run(driver).map_err(at(Phase::Launch))?;
        }
        driver.synchronize().map_err(at(Phase::Launch))?;
        let (start, end) = (
            driver.event().map_err(at(Phase::Launch))?,
            driver.event().map_err(at(Phase::Launch))?,
        );
        for round in 0..launch.iterations {
            start.record().map_err(at(Phase::Launch))?;
            prepared.run(driver).map_err(at(Phase::Launch))?;
            end.record().map_err(at(Phase::Launch))?;
            let ms = end.since(&start).map_err(at(Phase::Launch))?;
            self.log
                .emit(&Event::Sample(Sample::new(name.clone(), round, ms)));
        }
        Ok(())
    }
}

/// Loads the driver library the request names and says which file its
/// calls are bound to; one bound elsewhere than chosen is refused.
fn load_libcuda(request: &CudaRequest) -> Result<Option<String>, Failure> {
    driver::load_driver(request.libcuda.as_deref())?;
    bound::verify(
        "libcuda",
        request.libcuda.as_deref(),
        driver::bound_library(),
    )
}
