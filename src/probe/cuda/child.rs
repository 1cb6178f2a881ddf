//! Child side: the cuda executor's main, run as `preflight __cuda-child
//! REQUEST` inside a sandbox. It reports every step to the result file
//! before taking it, and turns every failure (a `CUresult`, an NVRTC log, a
//! missing library, even a panic) into a [`Failure`] fact, never into a
//! crash it could have avoided.

use super::driver::{self, Driver, Module};
use super::event::{CompileInfo, Event, EventLog, Failure, LaunchTiming, Step};
use super::nvrtc;
use super::request::{Arg, CudaRequest, Launch, ModuleKind, ModuleSpec};
use std::cell::Cell;
use std::ffi::c_void;
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
    let mut log = match EventLog::create(&request.events) {
        Ok(log) => log,
        Err(e) => {
            eprintln!(
                "preflight cuda child: cannot create {}: {e}",
                request.events.display()
            );
            return ExitCode::from(NO_RESULT_FILE);
        }
    };
    // cudarc reports a missing library or entry point by panicking; the
    // message is recorded as a fact below, so the default hook's output
    // would only be noise on stderr.
    std::panic::set_hook(Box::new(|_| {}));
    let step = Cell::new(Step::Start);
    let mut child = Child {
        log: &mut log,
        step: &step,
    };
    child.enter(Step::Start);
    let outcome = std::panic::catch_unwind(AssertUnwindSafe(|| child.run(&request)));
    let failure = match outcome {
        Ok(Ok(())) => None,
        Ok(Err((step, failure))) => Some((step, failure)),
        Err(payload) => Some((step.get(), from_panic(payload))),
    };
    if let Some((step, failure)) = failure {
        // Compiler and JIT logs also go to stderr, where the parent keeps
        // the tail of whatever the child printed.
        match &failure {
            Failure::Nvrtc { log: text, .. }
            | Failure::Driver {
                log: Some(text), ..
            } => eprintln!("{text}"),
            _ => {}
        }
        log.emit(&Event::Failed { step, failure });
    }
    log.emit(&Event::Done);
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
        Failure::Panic { detail }
    }
}

type Failed = (Step, Failure);

struct Child<'a> {
    log: &'a mut EventLog,
    step: &'a Cell<Step>,
}

impl Child<'_> {
    fn enter(&mut self, step: Step) {
        self.step.set(step);
        self.log.emit(&Event::Step { step });
    }

    fn run(&mut self, request: &CudaRequest) -> Result<(), Failed> {
        if request.list_devices {
            return self.list_devices(request).map_err(|f| (Step::Driver, f));
        }
        let at = |step| move |f| (step, f);
        let cuda_source = request
            .module
            .as_ref()
            .filter(|m| m.kind == ModuleKind::Cuda);
        if let (Some(lib), Some(_)) = (&request.nvrtc_library, cuda_source) {
            driver::load_library(Some(lib), "libnvrtc").map_err(at(Step::Start))?;
        }
        self.enter(Step::Driver);
        let opened = self.open_driver(request);
        let (driver, device) = match (opened, cuda_source) {
            (Ok(d), _) => d,
            // Without a device, still say whether the source compiles:
            // that answer needs no GPU and a broken kernel is the more
            // useful thing to report.
            (Err(failure), Some(spec)) => {
                self.compile(spec, None)?;
                return Err((Step::Driver, failure));
            }
            (Err(failure), None) => return Err((Step::Driver, failure)),
        };
        let Some(spec) = &request.module else {
            return Ok(());
        };
        let (image, kind) = match spec.kind {
            ModuleKind::Cuda => {
                let compiled = self.compile(spec, Some(&device.sm()))?;
                (compiled.image, compiled.kind)
            }
            kind => {
                let bytes = std::fs::read(&spec.path).map_err(|e| {
                    (
                        Step::Load,
                        Failure::Input {
                            detail: format!("cannot read {}: {e}", spec.path.display()),
                        },
                    )
                })?;
                (bytes, kind)
            }
        };
        self.enter(Step::Load);
        let started = std::time::Instant::now();
        let (module, info_log) = driver.load(&image, kind).map_err(at(Step::Load))?;
        self.log.emit(&Event::Loaded {
            load_ms: started.elapsed().as_secs_f64() * 1e3,
            info_log,
        });
        for launch in &request.launches {
            self.launch(&driver, &module, launch)?;
        }
        Ok(())
    }

    /// A device-list request: the driver's version (asked before `cuInit`,
    /// so that it is known even when `cuInit` fails), then every device in
    /// ordinal order, with no context created on any of them.
    fn list_devices(&mut self, request: &CudaRequest) -> Result<(), Failure> {
        self.enter(Step::Driver);
        driver::load_library(request.libcuda.as_deref(), "libcuda.so.1")?;
        let version = driver::version()?;
        self.log.emit(&Event::DriverVersion { version });
        let (_, count) = driver::init()?;
        let devices = (0..count)
            .map(|ordinal| driver::describe(ordinal).map(|(_, info)| info))
            .collect::<Result<Vec<_>, _>>()?;
        self.log.emit(&Event::Devices { devices });
        Ok(())
    }

    fn open_driver(
        &mut self,
        request: &CudaRequest,
    ) -> Result<(Driver, super::DeviceInfo), Failure> {
        driver::load_library(request.libcuda.as_deref(), "libcuda.so.1")?;
        let (version, devices) = driver::init()?;
        self.log.emit(&Event::Driver { version, devices });
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

    /// Compiles CUDA C source for the requested target, else `device_sm`,
    /// else NVRTC's default target.
    fn compile(
        &mut self,
        spec: &ModuleSpec,
        device_sm: Option<&str>,
    ) -> Result<nvrtc::Compiled, Failed> {
        self.enter(Step::Compile);
        let source = std::fs::read_to_string(&spec.path).map_err(|e| {
            (
                Step::Compile,
                Failure::Input {
                    detail: format!("cannot read {}: {e}", spec.path.display()),
                },
            )
        })?;
        let name = spec
            .path
            .file_name()
            .map_or_else(|| "module.cu".into(), |n| n.to_string_lossy().into_owned());
        let target = spec.target.as_deref().or(device_sm);
        let compiled = nvrtc::compile(&source, &name, target, &spec.nvrtc_options)
            .map_err(|f| (Step::Compile, f))?;
        self.log.emit(&Event::Compiled(CompileInfo {
            target: compiled.target.clone(),
            image: compiled.kind.as_str().to_owned(),
            bytes: compiled.image.len(),
            nvrtc_version: compiled.version.clone(),
            log: compiled.log.clone(),
        }));
        Ok(compiled)
    }

    fn launch(&mut self, driver: &Driver, module: &Module, launch: &Launch) -> Result<(), Failed> {
        self.enter(Step::Launch);
        let at = |step| move |f| (step, f);
        let function = module
            .function(&launch.function)
            .map_err(at(Step::Launch))?;
        // Each parameter lives in its own 8-byte-aligned slot that stays put
        // until the launches are done: the driver reads them through `params`.
        let mut slots: Vec<Box<[u64; 1]>> = Vec::with_capacity(launch.args.len());
        let mut buffers = Vec::new();
        for (index, arg) in launch.args.iter().enumerate() {
            let mut slot = Box::new([0u64; 1]);
            match arg {
                Arg::Scalar { ty, value } => {
                    let mut bytes = Vec::with_capacity(8);
                    ty.encode(*value, &mut bytes);
                    let mut word = [0u8; 8];
                    word[..bytes.len()].copy_from_slice(&bytes);
                    slot[0] = u64::from_ne_bytes(word);
                }
                Arg::Buffer { ty, init, .. } => {
                    let mut bytes = Vec::with_capacity(init.len() * ty.size());
                    for v in init {
                        ty.encode(*v, &mut bytes);
                    }
                    let buffer = driver.upload(&bytes).map_err(at(Step::Launch))?;
                    slot[0] = buffer.ptr();
                    buffers.push((index, buffer));
                }
            }
            slots.push(slot);
        }
        let mut params: Vec<*mut c_void> = slots
            .iter_mut()
            .map(|s| s.as_mut_ptr().cast::<c_void>())
            .collect();
        let run = |params: &mut [*mut c_void]| {
            driver.launch(
                function,
                launch.grid,
                launch.block,
                launch.shared_mem_bytes,
                params,
            )
        };
        run(&mut params).map_err(at(Step::Launch))?;
        driver.synchronize().map_err(at(Step::Launch))?;
        self.log.emit(&Event::Launched {
            function: launch.function.clone(),
        });

        self.enter(Step::Verify);
        let mut compared = 0;
        for (index, buffer) in &buffers {
            let Some(Arg::Buffer {
                ty,
                expect: Some(expect),
                tolerance,
                ..
            }) = launch.args.get(*index)
            else {
                continue;
            };
            let bytes = driver.download(buffer).map_err(at(Step::Verify))?;
            let got: Vec<f64> = bytes
                .chunks_exact(ty.size())
                .map(|c| ty.decode(c))
                .collect();
            let bad: Vec<usize> = (0..expect.len())
                .filter(|&i| !got.get(i).is_some_and(|g| tolerance.accepts(*g, expect[i])))
                .collect();
            if let Some(&first) = bad.first() {
                return Err((
                    Step::Verify,
                    Failure::Mismatch {
                        function: launch.function.clone(),
                        arg: *index,
                        mismatched: bad.len(),
                        compared: expect.len(),
                        first: (
                            first,
                            got.get(first).copied().unwrap_or(f64::NAN),
                            expect[first],
                        ),
                    },
                ));
            }
            compared += expect.len();
        }
        self.log.emit(&Event::Verified {
            function: launch.function.clone(),
            compared,
        });

        self.enter(Step::Time);
        for _ in 0..launch.warmup {
            run(&mut params).map_err(at(Step::Time))?;
        }
        driver.synchronize().map_err(at(Step::Time))?;
        let (start, end) = (
            driver.event().map_err(at(Step::Time))?,
            driver.event().map_err(at(Step::Time))?,
        );
        let mut samples_ms = Vec::with_capacity(launch.iterations as usize);
        for _ in 0..launch.iterations {
            start.record().map_err(at(Step::Time))?;
            run(&mut params).map_err(at(Step::Time))?;
            end.record().map_err(at(Step::Time))?;
            samples_ms.push(end.since(&start).map_err(at(Step::Time))?);
        }
        self.log.emit(&Event::Timed(LaunchTiming {
            function: launch.function.clone(),
            warmup: launch.warmup,
            samples_ms,
        }));
        Ok(())
    }
}
