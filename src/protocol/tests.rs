//! The protocol's shapes against the golden lines both children are held to.

use super::*;
use std::collections::BTreeSet;

const GOLDEN: &str = include_str!("../../tests/fixtures/protocol/golden.jsonl");

fn golden() -> Vec<(String, Event)> {
    GOLDEN
        .lines()
        .filter(|l| !l.trim().is_empty())
        .map(|l| {
            let event = serde_json::from_str(l).unwrap_or_else(|e| panic!("{l}: {e}"));
            (l.to_owned(), event)
        })
        .collect()
}

#[test]
fn every_golden_line_round_trips_unchanged() {
    for (line, event) in golden() {
        assert_ne!(event, Event::Unknown, "{line}");
        let back = serde_json::to_value(&event).unwrap();
        let want: serde_json::Value = serde_json::from_str(&line).unwrap();
        assert_eq!(back, want, "{line}");
    }
}

/// The kind of an event, with its failure kind: `failed/cuda`.
fn kind(event: &Event) -> String {
    let value = serde_json::to_value(event).unwrap();
    let tag = value["event"].as_str().unwrap_or("?").to_owned();
    match event {
        Event::Failed { failure, .. } => format!("{tag}/{}", failure.kind()),
        _ => tag,
    }
}

#[test]
fn the_golden_lines_cover_every_event_and_failure_kind() {
    let covered: BTreeSet<String> = golden().iter().map(|(_, e)| kind(e)).collect();
    let phase = Phase::Start;
    let every = [
        Event::Hello {
            protocol: 1,
            executor: ExecutorKind::Python,
            pid: None,
            pgid: None,
        },
        Event::Phase { phase, what: None },
        Event::Runtime(Runtime::default()),
        Event::Module {
            name: String::new(),
            package: None,
        },
        Event::Device(DeviceInfo {
            ordinal: 0,
            name: String::new(),
            arch: DeviceArch::Cuda { major: 0, minor: 0 },
            sm_count: 0,
            total_memory: 0,
            pci_bus_id: None,
        }),
        Event::Devices {
            devices: Vec::new(),
        },
        Event::DeviceState(Default::default()),
        Event::Compiled(CompileInfo::default()),
        Event::Loaded {
            info_log: String::new(),
        },
        Event::Embedded(EmbeddedLoad {
            file: String::new(),
            images: String::new(),
            loaded: 0,
            relocatable: 0,
            other_gpus: 0,
            taken: None,
            load_ms: 0.0,
            jit_ms: None,
            error: None,
        }),
        Event::Timing {
            span: Span::Load,
            ms: 0.0,
        },
        Event::Launched {
            function: String::new(),
        },
        Event::Verified {
            label: String::new(),
            compared: 0,
        },
        Event::Sample(Sample::new(String::new(), 0, 0.0)),
        Event::Bench(BenchSetup {
            label: String::new(),
            role: String::new(),
            timer: String::new(),
            flush_bytes: 0,
            nvml: false,
            warmup_calls: 0,
            estimate_ms: 0.0,
            has_reference: false,
            exclusive: false,
        }),
        Event::Done { depth: Depth::Load },
    ];
    let failures = [
        Failure::Exception(Box::default()),
        Failure::Cuda(CudaError {
            call: String::new(),
            code: 0,
            name: String::new(),
            message: String::new(),
            log: None,
        }),
        Failure::Nvrtc(NvrtcError {
            call: String::new(),
            code: 0,
            message: String::new(),
            log: String::new(),
        }),
        Failure::LibraryMissing {
            library: String::new(),
            detail: String::new(),
        },
        Failure::SymbolMissing {
            detail: String::new(),
        },
        Failure::NoSuchDevice {
            ordinal: 0,
            count: 0,
        },
        Failure::HubRefused {
            validator: HubCheck::Metadata,
            message: String::new(),
            package: None,
        },
        Failure::DeviceUnusable {
            device: String::new(),
            message: String::new(),
        },
        Failure::Mismatch {
            label: None,
            message: String::new(),
        },
        Failure::InvalidSmoke {
            message: String::new(),
        },
        Failure::InvalidInput {
            message: String::new(),
        },
        Failure::Internal {
            message: String::new(),
            traceback: None,
        },
    ];
    let all = every.into_iter().chain(
        failures
            .into_iter()
            .map(|failure| Event::Failed { phase, failure }),
    );
    for event in all {
        assert!(
            covered.contains(&kind(&event)),
            "no golden line for {}",
            kind(&event)
        );
    }
}

#[test]
fn unknown_kinds_from_a_newer_child_are_counted_not_fatal() {
    let text = r#"{"event":"hello","protocol":1,"executor":"python"}
{"event":"phase","phase":"import"}
{"event":"gpu_clock","mhz":1980}
{"event":"failed","phase":"import","failure":{"error":"quantum_flux","detail":"x"}}
{"event":"done","depth":"load","extra":"ignored"}"#;
    let channel = Channel::parse(text);
    assert_eq!(channel.problems.unknown_events, 1);
    assert_eq!(channel.problems.bad_lines, 0);
    let report = Report::fold(&channel.events);
    assert_eq!(report.last_phase, Some(Phase::Import));
    assert_eq!(report.failure, Some((Phase::Import, Failure::Unknown)));
    assert_eq!(report.done, Some(Depth::Load));
}

#[test]
fn another_protocol_version_is_named_with_both_numbers() {
    let channel = Channel::parse(
        r#"{"event":"hello","protocol":7,"executor":"rocm","shape":"new"}
{"event":"phase","phase":"start"}"#,
    );
    assert_eq!(
        channel.problems.version,
        Some(VersionMismatch {
            child: 7,
            parent: PROTOCOL_VERSION
        })
    );
    assert!(
        !channel.problems.no_hello,
        "a hello of another version is a hello"
    );
}

#[test]
fn a_torn_last_line_is_counted_and_the_rest_kept() {
    let text = r#"{"event":"hello","protocol":1,"executor":"cuda","pid":10,"pgid":10}
{"event":"phase","phase":"load"}
{"event":"timing","span":"load","ms":1.5}
{"event":"phase","pha"#;
    let channel = Channel::parse(text);
    assert_eq!(channel.problems.bad_lines, 1);
    let report = Report::fold(&channel.events);
    assert_eq!(report.last_phase, Some(Phase::Load));
    assert_eq!((report.pid, report.pgid), (Some(10), Some(10)));
    assert_eq!(report.load_ms, Some(1.5));
    assert_eq!(report.executor, Some(ExecutorKind::Cuda));
}

#[test]
fn a_channel_without_hello_says_so() {
    let channel = Channel::parse(r#"{"event":"phase","phase":"start"}"#);
    assert!(channel.problems.no_hello);
    assert!(!Channel::parse("").problems.no_hello);
}

#[test]
fn reads_are_bounded_and_an_absent_file_is_empty() {
    let dir = tempfile::tempdir().unwrap();
    assert_eq!(
        Channel::read(&dir.path().join("absent.jsonl")),
        Channel::default()
    );
    let path = dir.path().join("flood.jsonl");
    let mut log = EventLog::open(&path, ExecutorKind::Cuda).unwrap();
    let line = Event::Phase {
        phase: Phase::Launch,
        what: Some("x".repeat(1000)),
    };
    for _ in 0..(CHANNEL_LIMIT / 1000 + 10) {
        log.emit(&line);
    }
    let channel = Channel::read(&path);
    assert!(channel.problems.truncated);
    assert!(channel.problems.bad_lines <= 1, "only the cut line is bad");
    assert!(matches!(
        channel.events[0],
        Event::Hello {
            protocol: PROTOCOL_VERSION,
            ..
        }
    ));
}

#[test]
fn the_writer_starts_with_its_hello() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("c.jsonl");
    let mut log = EventLog::open(&path, ExecutorKind::Cuda).unwrap();
    log.emit(&Event::Done {
        depth: Depth::Device,
    });
    let channel = Channel::read(&path);
    assert_eq!(channel.problems, ChannelProblems::default());
    let report = Report::fold(&channel.events);
    assert_eq!(report.pid, Some(std::process::id()));
    assert_eq!(report.done, Some(Depth::Device));
}

#[test]
fn timings_take_the_first_launch_median_and_round() {
    let events = [
        Event::Timing {
            span: Span::Load,
            ms: 1.23456789,
        },
        Event::Sample(Sample::new("f", 0, 3.0)),
        Event::Sample(Sample::new("g", 0, 9.0)),
        Event::Sample(Sample::new("f", 1, 1.0)),
    ];
    let t = Report::fold(&events).timings(10.0004);
    assert_eq!(t.total_ms, 10.0);
    assert_eq!(t.import_ms, Some(1.235));
    assert_eq!(t.smoke_ms, Some(2.0));
}

#[test]
fn the_depth_reached_is_that_of_the_phases_left_behind() {
    let reached = |phases: &[Phase]| {
        let events: Vec<Event> = phases
            .iter()
            .map(|&phase| Event::Phase { phase, what: None })
            .collect();
        Report::fold(&events).reached
    };
    use Phase::*;
    // Failed while importing: nothing done.
    assert_eq!(reached(&[Start, Import]), None);
    // Imported, then failed confirming the device.
    assert_eq!(reached(&[Start, Import, Load]), Some(Depth::Load));
    // Imported, device confirmed, failed in the smoke.
    assert_eq!(reached(&[Start, Import, Load, Smoke]), Some(Depth::Device));
    // No device needed: imported, failed in the smoke.
    assert_eq!(reached(&[Start, Import, Smoke]), Some(Depth::Load));
    // The smoke ran, its verification failed.
    assert_eq!(reached(&[Start, Import, Smoke, Verify]), Some(Depth::Smoke));
    // A native module: loaded, launched, failed verifying.
    assert_eq!(reached(&[Start, Load, Launch, Verify]), Some(Depth::Smoke));
    // A phase entered again finishes nothing: the second module's load
    // failing leaves the device depth unreached; a bench verifying again
    // after timing keeps what it had.
    assert_eq!(reached(&[Start, Load, Load]), None);
    assert_eq!(
        reached(&[Start, Import, Smoke, Verify, Launch, Verify]),
        Some(Depth::Smoke)
    );
}
