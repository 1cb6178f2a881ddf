//! The channel file: written by the child one line per `write(2)`, read by
//! the parent after the child has ended, never parsed out of stdout.

use super::{Event, ExecutorKind, PROTOCOL_VERSION};
use serde::{Deserialize, Serialize};
use std::io::{Read, Write};
use std::path::Path;

/// Most bytes of a channel that are read: children write a few kilobytes,
/// and one that floods its channel must not flood the parent.
pub const CHANNEL_LIMIT: u64 = 4 << 20;

/// The child's protocol version is not the parent's.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct VersionMismatch {
    /// The version the child announced.
    pub child: u32,
    /// [`PROTOCOL_VERSION`] of this parent.
    pub parent: u32,
}

/// What was wrong with a channel, short of the child's own report.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ChannelProblems {
    /// The file exists but could not be read, and why.
    pub unreadable: Option<String>,
    /// Lines that did not parse (a line torn by a crash, a foreign write).
    pub bad_lines: usize,
    /// Events of a kind this parent does not know (a newer child).
    pub unknown_events: usize,
    /// The child announced another protocol version.
    pub version: Option<VersionMismatch>,
    /// The channel has lines but does not start with a hello.
    pub no_hello: bool,
    /// The file was longer than [`CHANNEL_LIMIT`]; the rest was not read.
    pub truncated: bool,
}

/// A channel as read by the parent: the events that parsed, in order, and
/// what did not.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Channel {
    /// Every event that parsed and is known, in the order written.
    pub events: Vec<Event>,
    /// What went wrong reading it.
    pub problems: ChannelProblems,
}

/// The part of a hello that every version keeps, so that a child of
/// another version is still recognised as one.
#[derive(Deserialize)]
struct AnyHello {
    event: String,
    protocol: u32,
}

impl Channel {
    /// The events of a channel's text.
    pub fn parse(text: &str) -> Channel {
        let mut channel = Channel::default();
        let problems = &mut channel.problems;
        for (index, line) in text.lines().filter(|l| !l.trim().is_empty()).enumerate() {
            if index == 0 {
                match serde_json::from_str::<AnyHello>(line) {
                    Ok(hello) if hello.event == "hello" => {
                        if hello.protocol != PROTOCOL_VERSION {
                            problems.version = Some(VersionMismatch {
                                child: hello.protocol,
                                parent: PROTOCOL_VERSION,
                            });
                        }
                    }
                    _ => problems.no_hello = true,
                }
            }
            match serde_json::from_str::<Event>(line) {
                Ok(Event::Unknown) => problems.unknown_events += 1,
                Ok(event) => channel.events.push(event),
                Err(_) => problems.bad_lines += 1,
            }
        }
        channel
    }

    /// Read the channel file: an absent file is an empty channel (the child
    /// died before it wrote anything); only its first [`CHANNEL_LIMIT`]
    /// bytes are read.
    pub fn read(path: &Path) -> Channel {
        let unreadable = |e: std::io::Error| Channel {
            problems: ChannelProblems {
                unreadable: Some(e.to_string()),
                ..ChannelProblems::default()
            },
            ..Channel::default()
        };
        let file = match crate::fs::open_regular(path) {
            Ok(file) => file,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Channel::default(),
            Err(e) => return unreadable(e),
        };
        let mut bytes = Vec::new();
        if let Err(e) = file.take(CHANNEL_LIMIT + 1).read_to_end(&mut bytes) {
            return unreadable(e);
        }
        let truncated = bytes.len() as u64 > CHANNEL_LIMIT;
        bytes.truncate(CHANNEL_LIMIT as usize);
        let mut channel = Channel::parse(&String::from_utf8_lossy(&bytes));
        channel.problems.truncated = truncated;
        channel
    }
}

/// A channel read while the child still writes it: each call returns the
/// lines completed since the last one (a torn last line waits for its end).
#[derive(Debug, Default)]
pub struct Tail {
    /// Bytes of the file read so far.
    offset: u64,
    /// A last line not complete yet.
    partial: Vec<u8>,
}

impl Tail {
    /// The complete lines appended to the file at `path` since the last
    /// call: none while it does not exist (or is not a regular file), and
    /// none past its first [`CHANNEL_LIMIT`] bytes.
    pub fn lines(&mut self, path: &Path) -> Vec<String> {
        use std::io::{Seek, SeekFrom};
        let left = CHANNEL_LIMIT.saturating_sub(self.offset);
        let Ok(mut file) = crate::fs::open_regular(path) else {
            return Vec::new();
        };
        if left == 0 || file.seek(SeekFrom::Start(self.offset)).is_err() {
            return Vec::new();
        }
        let mut bytes = Vec::new();
        let Ok(read) = file.take(left).read_to_end(&mut bytes) else {
            return Vec::new();
        };
        self.offset += read as u64;
        self.partial.extend_from_slice(&bytes);
        let Some(end) = self.partial.iter().rposition(|b| *b == b'\n') else {
            return Vec::new();
        };
        let complete: Vec<u8> = self.partial.drain(..=end).collect();
        String::from_utf8_lossy(&complete)
            .lines()
            .filter(|l| !l.trim().is_empty())
            .map(str::to_owned)
            .collect()
    }
}

/// The writing end, for children written in Rust: appends one event per
/// `write(2)` so that a line is in the file before the next step can crash
/// the process.
#[derive(Debug)]
pub struct EventLog {
    file: std::fs::File,
}

impl EventLog {
    /// Opens (creates) the channel file for appending and writes the hello.
    pub fn open(path: &Path, executor: ExecutorKind) -> std::io::Result<EventLog> {
        let file = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(path)?;
        let mut log = EventLog { file };
        log.emit(&Event::Hello {
            protocol: PROTOCOL_VERSION,
            executor,
            pid: Some(std::process::id()),
            pgid: u32::try_from(nix::unistd::getpgrp().as_raw()).ok(),
        });
        Ok(log)
    }

    /// Writes one event; an error here cannot be reported anywhere else,
    /// so it is ignored and the parent sees a shorter channel.
    pub fn emit(&mut self, event: &Event) {
        if let Ok(mut line) = serde_json::to_vec(event) {
            line.push(b'\n');
            let _ = self.file.write_all(&line);
        }
    }
}
