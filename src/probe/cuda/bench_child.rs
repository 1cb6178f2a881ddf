//! Child side of the cuda executor's bench mode: the mirror of the python
//! executor's `bench.py`, speaking the same protocol over the same FIFOs.
//!
//! It loads every module of a native target (NVRTC or prebuilt, as the
//! smoke does), runs each launch once and verifies it, warms up, announces
//! itself with a `bench` event and a line on the replies FIFO, then answers
//! round commands (`{"round": N, "samples": K}`) until end of file: each
//! sample is every launch of the target in order between two CUDA events,
//! with no host synchronisation between them, after an L2 flush unless the
//! request says not to. At end of file the buffers are put back and each
//! launch verified once more, so that a kernel whose result drifts under
//! repetition is caught.

use super::child::{Child, Failed};
use super::driver::{self, DeviceBuffer, Driver, Event as CudaEvent, Module};
use super::launch::Prepared;
use super::nvml::Nvml;
use super::request::BenchRequest;
use crate::protocol::{BenchSetup, DeviceInfo, Event, Failure, Phase, Sample};
use serde::Deserialize;
use std::io::{BufRead, BufReader, Write};
use std::path::Path;
use std::time::{Duration, Instant};

/// Warm-up: at least this many samples and this much time (as `bench.py`).
const WARMUP_CALLS: u32 = 3;
const WARMUP_TIME: Duration = Duration::from_millis(100);
/// The flush buffer where the device does not say its L2 size.
const FALLBACK_L2: usize = 64 << 20;

/// One round command.
#[derive(Deserialize)]
struct Command {
    round: u32,
    samples: u32,
    /// The samples' launches in a bare loop, timed as one.
    #[serde(default)]
    bare: bool,
}

/// The target's launches, ready, and what times them.
struct Timing<'r> {
    launches: Vec<Prepared<'r>>,
    flush: Option<DeviceBuffer>,
    start: CudaEvent,
    end: CudaEvent,
}

impl Timing<'_> {
    /// One sample: flush, then every launch between the two events.
    fn sample(&mut self, driver: &Driver) -> Result<f64, Failure> {
        if let Some(buffer) = &self.flush {
            driver.memset(buffer, 0)?;
        }
        self.start.record()?;
        for launch in &mut self.launches {
            launch.run(driver)?;
        }
        self.end.record()?;
        self.end.since(&self.start)
    }

    /// `calls` samples' launches in a bare loop between one pair of events:
    /// their mean, the baseline of the harness's own overhead.
    fn bare(&mut self, driver: &Driver, calls: u32) -> Result<f64, Failure> {
        self.start.record()?;
        for _ in 0..calls {
            for launch in &mut self.launches {
                launch.run(driver)?;
            }
        }
        self.end.record()?;
        Ok(self.end.since(&self.start)? / f64::from(calls.max(1)))
    }
}

/// Serve a bench request until the parent closes its commands.
pub(super) fn serve(
    child: &mut Child,
    driver: &Driver,
    device: &DeviceInfo,
    request: &BenchRequest,
    nvrtc: Option<&Path>,
) -> Result<(), Failed> {
    let at = |phase| move |f| (phase, f);
    let mut modules: Vec<Module> = Vec::with_capacity(request.modules.len());
    let mut launches = Vec::new();
    for m in &request.modules {
        let (image, kind) = child.image(&m.module, device, nvrtc)?;
        child.enter(Phase::Load, &format!("load {}", m.module.name()));
        let loaded = driver.load(&image, kind).map_err(at(Phase::Load))?;
        child.log.emit(&Event::Loaded {
            info_log: loaded.info_log,
        });
        for launch in &m.launches {
            child.enter(Phase::Launch, &launch.function);
            launches
                .push(Prepared::new(driver, &loaded.module, launch).map_err(at(Phase::Launch))?);
        }
        modules.push(loaded.module);
    }
    verify(child, driver, &mut launches, "")?;

    child.enter(Phase::Launch, &format!("warm-up {}", request.label));
    let flush = if request.flush_l2 {
        let l2 = driver
            .attribute(driver::ATTRIBUTE_L2_CACHE_SIZE)
            .map_err(at(Phase::Launch))?;
        // Twice the cache, as bench.py writes: no line of the last sample survives.
        let bytes = usize::try_from(l2)
            .ok()
            .filter(|b| *b > 0)
            .unwrap_or(FALLBACK_L2)
            * 2;
        Some(driver.alloc(bytes).map_err(at(Phase::Launch))?)
    } else {
        None
    };
    let flush_bytes = flush.as_ref().map_or(0, |b| b.bytes() as u64);
    let mut timing = Timing {
        launches,
        flush,
        start: driver.event().map_err(at(Phase::Launch))?,
        end: driver.event().map_err(at(Phase::Launch))?,
    };
    let (warmup_calls, estimate_ms) = warm_up(&mut timing, driver).map_err(at(Phase::Launch))?;
    // The device's clocks after each sample, where NVML answers for it: a
    // sample the device throttled is dropped by the parent, and counted.
    let nvml = device.pci_bus_id.as_deref().and_then(Nvml::open);
    let exclusive = driver
        .attribute(driver::ATTRIBUTE_COMPUTE_MODE)
        .is_ok_and(|mode| mode == driver::COMPUTEMODE_EXCLUSIVE_PROCESS);

    child.enter(Phase::Launch, &format!("rounds {}", request.label));
    let fail = |what: &str, path: &Path, e: std::io::Error| {
        (
            Phase::Launch,
            Failure::Internal {
                message: format!("bench child: cannot {what} {}: {e}", path.display()),
                traceback: None,
            },
        )
    };
    let mut replies = std::fs::OpenOptions::new()
        .write(true)
        .open(&request.replies)
        .map_err(|e| fail("open", &request.replies, e))?;
    child.log.emit(&Event::Bench(BenchSetup {
        label: request.label.clone(),
        role: "variant".into(),
        timer: "device_events".into(),
        flush_bytes,
        nvml: nvml.is_some(),
        warmup_calls,
        estimate_ms,
        has_reference: false,
        exclusive,
    }));
    replies
        .write_all(b"ready\n")
        .map_err(|e| fail("write", &request.replies, e))?;
    let commands =
        std::fs::File::open(&request.commands).map_err(|e| fail("open", &request.commands, e))?;
    for line in BufReader::new(commands).lines() {
        let line = line.map_err(|e| fail("read", &request.commands, e))?;
        if line.trim().is_empty() {
            continue;
        }
        let command: Command = serde_json::from_str(&line).map_err(|e| {
            (
                Phase::Launch,
                Failure::Internal {
                    message: format!("bench child: bad command {line:?}: {e}"),
                    traceback: None,
                },
            )
        })?;
        if command.bare {
            let ms = timing
                .bare(driver, command.samples)
                .map_err(at(Phase::Launch))?;
            let label = format!("bare:{}", request.label);
            child
                .log
                .emit(&Event::Sample(Sample::new(label, command.round, ms)));
        } else {
            for _ in 0..command.samples {
                let ms = timing.sample(driver).map_err(at(Phase::Launch))?;
                let mut sample = Sample::new(request.label.clone(), command.round, ms);
                if let Some(clocks) = nvml.as_ref().and_then(Nvml::read) {
                    sample.sm_clock_mhz = Some(clocks.sm_mhz);
                    sample.throttle_reasons = Some(clocks.reasons);
                    sample.throttled = clocks.throttled();
                }
                child.log.emit(&Event::Sample(sample));
            }
        }
        replies
            .write_all(format!("{}\n", command.round).as_bytes())
            .map_err(|e| fail("write", &request.replies, e))?;
    }
    for launch in &timing.launches {
        launch.reset(driver).map_err(at(Phase::Verify))?;
    }
    verify(child, driver, &mut timing.launches, " after timing")?;
    drop(modules);
    Ok(())
}

/// Run each launch once and verify its buffers, as the smoke does.
fn verify(
    child: &mut Child,
    driver: &Driver,
    launches: &mut [Prepared],
    when: &str,
) -> Result<(), Failed> {
    let at = |phase| move |f| (phase, f);
    for launch in launches {
        let name = launch.launch.function.clone();
        child.enter(Phase::Launch, &format!("{name}{when}"));
        launch.run(driver).map_err(at(Phase::Launch))?;
        driver.synchronize().map_err(at(Phase::Launch))?;
        child.log.emit(&Event::Launched {
            function: name.clone(),
        });
        child.depth = child.depth.max(crate::protocol::Depth::Smoke);
        child.enter(Phase::Verify, &format!("{name}{when}"));
        let compared = launch.verify(driver).map_err(at(Phase::Verify))?;
        if compared > 0 {
            child.log.emit(&Event::Verified {
                label: name,
                compared,
            });
            child.depth = crate::protocol::Depth::Verified;
        }
    }
    Ok(())
}

/// Samples until both minimums are met (and each launch's own `warmup`
/// count from `preflight.toml`); the median of the second half estimates
/// one sample, which the parent sizes its rounds by.
fn warm_up(timing: &mut Timing, driver: &Driver) -> Result<(u32, f64), Failure> {
    let least = timing
        .launches
        .iter()
        .map(|l| l.launch.warmup)
        .max()
        .unwrap_or(0)
        .max(WARMUP_CALLS);
    let begin = Instant::now();
    let mut times = Vec::new();
    while (times.len() as u32) < least || begin.elapsed() < WARMUP_TIME {
        times.push(timing.sample(driver)?);
    }
    let mut tail = times.split_off(times.len() / 2);
    tail.sort_by(f64::total_cmp);
    Ok((times.len() as u32 + tail.len() as u32, tail[tail.len() / 2]))
}
