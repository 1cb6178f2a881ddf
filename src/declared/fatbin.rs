//! The fatbinary container: what an ELF `.nv_fatbin` section or a `.fatbin`
//! file holds, parsed with every read bounds-checked.
//!
//! Layout (REFERENCE §4, checked against nvcc 13.5): concatenated containers
//! (`0xBA55ED50`, 16-byte header); each holds entries with their own header
//! size; a payload may be LZ4- or zstd-compressed. nvcc's `--concat` mode
//! adds group entries (kind 0x100) whose compressed payload holds several
//! images, described by a table of sub-headers inside the group header.

use crate::declared::arch::{ImageKind, PtxIsa};
use crate::declared::inflate::{HEAD_STEP, decompress, zstd_head};
use serde::Serialize;
use std::borrow::Cow;
use std::ops::Range;
use std::sync::{Arc, OnceLock};

/// Magic number that opens every fatbin container.
pub const FATBIN_MAGIC: u32 = 0xBA55_ED50;

const CONTAINER_HEADER: usize = 16;
const ENTRY_HEADER_MIN: usize = 64;
const KIND_PTX: u16 = 1;
const KIND_ELF: u16 = 2;
const KIND_GROUP: u16 = 0x100;
const FLAG_LZ4: u64 = 0x2000;
const FLAG_ZSTD: u64 = 0x8000;
/// Seen in nvcc 13.5 entries built for `…a` targets.
const FLAG_ARCH_SPECIFIC: u64 = 0x10_0000;
/// Seen in nvcc 13.5 entries built for `…f` targets.
const FLAG_FAMILY: u64 = 0x20_0000;
/// Where an entry header's optional attribute block starts: `u32 0x48`,
/// `u32 length`, then the attributes.
const ATTRIBUTES_AT: usize = 0x40;
/// The JIT option nvcc 13.5 records for `-rdc=true` PTX.
const COMPILE_ONLY: &[u8] = b"--compile-only";

/// How an entry's payload is compressed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Compression {
    /// An LZ4 block (flag 0x2000).
    Lz4,
    /// A zstd frame (flag 0x8000).
    Zstd,
}

impl std::fmt::Display for Compression {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Compression::Lz4 => "lz4",
            Compression::Zstd => "zstd",
        })
    }
}

/// A fatbin that cannot be read. Offsets are absolute (from the start of the
/// file that holds the fatbin).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum FatbinError {
    /// A container does not start with [`FATBIN_MAGIC`].
    #[error(
        "fatbin container at offset {offset:#x}: expected magic 0xba55ed50, found {found:#010x}"
    )]
    BadMagic {
        /// Where the container was expected.
        offset: u64,
        /// The four bytes found there.
        found: u32,
    },
    /// A header or payload runs past the end of the data.
    #[error("fatbin {what} at offset {offset:#x} needs {needed} bytes, only {available} remain")]
    Truncated {
        /// Which structure.
        what: &'static str,
        /// Where it starts.
        offset: u64,
        /// Bytes it claims.
        needed: u64,
        /// Bytes there are.
        available: u64,
    },
    /// A header field holds an impossible value.
    #[error("fatbin {what} at offset {offset:#x}: {problem}")]
    Corrupt {
        /// Which structure.
        what: &'static str,
        /// Where it starts.
        offset: u64,
        /// What is wrong.
        problem: String,
    },
    /// A compressed payload does not decompress to its declared size.
    #[error(
        "fatbin entry at offset {offset:#x}: cannot decompress its {method} payload: {problem}"
    )]
    Decompress {
        /// The entry.
        offset: u64,
        /// The compression method.
        method: Compression,
        /// The decoder's complaint.
        problem: String,
    },
}

/// One image in a fatbin, with its payload (decompressed on demand).
#[derive(Debug, Clone)]
pub struct Entry<'a> {
    /// Absolute offset of the entry header (for a `--concat` group member:
    /// of its sub-header).
    pub offset: u64,
    /// SASS (an ELF cubin) or PTX.
    pub kind: ImageKind,
    /// SM number from the entry header (`90`, `100`).
    pub sm: u32,
    /// For PTX: the ISA version from the header.
    pub ptx_isa: Option<PtxIsa>,
    /// The header's flags.
    pub flags: u64,
    /// Compression of the stored bytes, if any.
    pub compression: Option<Compression>,
    /// Bytes stored in the file (compressed size when compressed).
    pub stored_size: u64,
    /// The image's size once decompressed.
    pub size: u64,
    /// The header's attribute block (nvcc writes the JIT options of a PTX
    /// image there: `--compile-only` for `-rdc`), empty when there is none.
    attributes: &'a [u8],
    payload: Payload<'a>,
}

#[derive(Debug, Clone)]
enum Payload<'a> {
    Plain(&'a [u8]),
    Compressed(&'a [u8]),
    /// A member of a compressed `--concat` group, which is inflated as a
    /// whole, once, by the first member that needs its bytes.
    Grouped(Arc<Group<'a>>, Range<usize>),
}

/// The compressed payload of a `--concat` group.
#[derive(Debug)]
struct Group<'a> {
    stored: &'a [u8],
    method: Compression,
    size: u64,
    offset: u64,
    inflated: OnceLock<Result<Vec<u8>, FatbinError>>,
}

impl Group<'_> {
    fn inflated(&self) -> Result<&[u8], FatbinError> {
        let inflated = self
            .inflated
            .get_or_init(|| decompress(self.stored, self.method, self.size, self.offset));
        match inflated {
            Ok(bytes) => Ok(bytes),
            Err(e) => Err(e.clone()),
        }
    }
}

impl<'a> Entry<'a> {
    /// Whether the header marks the entry arch-specific (`a`).
    pub fn flags_arch_specific(&self) -> bool {
        self.flags & FLAG_ARCH_SPECIFIC != 0
    }

    /// Whether the header marks the entry family-specific (`f`).
    pub fn flags_family(&self) -> bool {
        self.flags & FLAG_FAMILY != 0
    }

    /// Whether the image is relocatable device code (`nvcc -rdc=true`),
    /// which the driver cannot load without the device link step: a SASS
    /// cubin of ELF type `ET_REL` (nvcc 13.5 sets no header flag for it),
    /// or PTX whose JIT options say `--compile-only`.
    pub fn relocatable(&self) -> Result<bool, FatbinError> {
        const ET_TYPE: usize = 16;
        const ET_REL: u16 = 1;
        match self.kind {
            ImageKind::Sass => {
                let head = self.head(|b| b.len() > ET_TYPE + 1)?;
                Ok(head.starts_with(b"\x7fELF")
                    && head.get(ET_TYPE..ET_TYPE + 2) == Some(&ET_REL.to_le_bytes()[..]))
            }
            ImageKind::Ptx => Ok(self
                .attributes
                .windows(COMPILE_ONLY.len())
                .any(|w| w == COMPILE_ONLY)),
        }
    }

    /// The image bytes, decompressed if needed.
    pub fn bytes(&self) -> Result<Cow<'a, [u8]>, FatbinError> {
        match &self.payload {
            Payload::Plain(b) => Ok(Cow::Borrowed(b)),
            Payload::Compressed(b) => {
                let method = self.compression.unwrap_or(Compression::Zstd);
                decompress(b, method, self.size, self.offset).map(Cow::Owned)
            }
            Payload::Grouped(group, range) => {
                Ok(Cow::Owned(group.inflated()?[range.clone()].to_vec()))
            }
        }
    }

    /// The image's first bytes: the shortest of the prefixes 4 KiB, 8 KiB,
    /// 16 KiB, … that `enough` accepts, or the whole image. A zstd payload is
    /// decoded only that far (in whole zstd blocks, at most 128 KiB each),
    /// which for a PTX image's `.target` line is one block of a text that
    /// can run to megabytes. Only a whole image is checked against its
    /// declared size.
    pub fn head(
        &self,
        mut enough: impl FnMut(&[u8]) -> bool,
    ) -> Result<Cow<'a, [u8]>, FatbinError> {
        match &self.payload {
            Payload::Plain(b) => {
                let mut n = HEAD_STEP.min(b.len());
                while n < b.len() && !enough(&b[..n]) {
                    n = n.saturating_mul(2).min(b.len());
                }
                Ok(Cow::Borrowed(&b[..n]))
            }
            Payload::Compressed(b) if self.compression == Some(Compression::Zstd) => {
                zstd_head(b, self.size, self.offset, enough).map(Cow::Owned)
            }
            // An LZ4 block cannot be decoded in part; a group is shared.
            _ => self.bytes(),
        }
    }
}

/// Little-endian reads that fail with the structure's name and offset.
struct Reader<'a> {
    data: &'a [u8],
    base: u64,
}

impl<'a> Reader<'a> {
    fn slice(&self, at: usize, len: usize, what: &'static str) -> Result<&'a [u8], FatbinError> {
        match at.checked_add(len) {
            Some(end) if end <= self.data.len() => Ok(&self.data[at..end]),
            _ => Err(FatbinError::Truncated {
                what,
                offset: self.base + at as u64,
                needed: len as u64,
                available: self.data.len().saturating_sub(at) as u64,
            }),
        }
    }

    fn u16(&self, at: usize) -> u16 {
        u16::from_le_bytes([self.data[at], self.data[at + 1]])
    }

    fn u32(&self, at: usize) -> u32 {
        let b = &self.data[at..at + 4];
        u32::from_le_bytes([b[0], b[1], b[2], b[3]])
    }

    fn u64(&self, at: usize) -> u64 {
        let b = &self.data[at..at + 8];
        u64::from_le_bytes([b[0], b[1], b[2], b[3], b[4], b[5], b[6], b[7]])
    }
}

/// The fields of an entry header (or a `--concat` sub-header).
struct Header {
    kind: u16,
    size_or_offset: u32,
    payload_size: u64,
    compressed_size: u32,
    minor: u16,
    major: u16,
    sm: u32,
    flags: u64,
    uncompressed_size: u64,
}

fn header(h: &[u8]) -> Header {
    let r = Reader { data: h, base: 0 };
    Header {
        kind: r.u16(0),
        size_or_offset: r.u32(4),
        payload_size: r.u64(8),
        compressed_size: r.u32(0x10),
        minor: r.u16(0x18),
        major: r.u16(0x1a),
        sm: r.u32(0x1c),
        flags: r.u64(0x28),
        uncompressed_size: r.u64(0x38),
    }
}

/// The attribute block of a header (or sub-header) `h`, if it has one.
fn attributes(h: &[u8]) -> &[u8] {
    let word = |at: usize| {
        h.get(at..at + 4)
            .map(|b| u32::from_le_bytes([b[0], b[1], b[2], b[3]]) as usize)
    };
    match (word(ATTRIBUTES_AT), word(ATTRIBUTES_AT + 4)) {
        (Some(0x48), Some(len)) => {
            let start = ATTRIBUTES_AT + 8;
            &h[start..h.len().min(start.saturating_add(len))]
        }
        _ => &[],
    }
}

fn compression(flags: u64) -> Option<Compression> {
    if flags & FLAG_ZSTD != 0 {
        Some(Compression::Zstd)
    } else if flags & FLAG_LZ4 != 0 {
        Some(Compression::Lz4)
    } else {
        None
    }
}

fn image_kind(kind: u16) -> Option<ImageKind> {
    match kind {
        KIND_PTX => Some(ImageKind::Ptx),
        KIND_ELF => Some(ImageKind::Sass),
        _ => None,
    }
}

fn ptx_isa(kind: ImageKind, h: &Header) -> Option<PtxIsa> {
    (kind == ImageKind::Ptx).then(|| PtxIsa::new(u32::from(h.major), u32::from(h.minor)))
}

/// What a fatbin holds: its images, and how many entries of other kinds
/// (LTO IR, …) were skipped.
#[derive(Debug, Clone, Default)]
pub struct Fatbin<'a> {
    /// Number of containers found.
    pub containers: usize,
    /// Where each container lies (absolute offsets, header included): one
    /// container is one fatbin, what `cuModuleLoadData` takes.
    pub spans: Vec<Range<u64>>,
    /// SASS and PTX images, in file order.
    pub entries: Vec<Entry<'a>>,
    /// Entries of other kinds (e.g. LTO IR, kind 8), which the driver does
    /// not load directly.
    pub other_entries: usize,
}

/// Parse every container in `data`, which starts at absolute offset `base`
/// of its file. Zero padding between and after containers is skipped.
pub fn parse(data: &[u8], base: u64) -> Result<Fatbin<'_>, FatbinError> {
    let r = Reader { data, base };
    let mut fatbin = Fatbin::default();
    let mut at = 0usize;
    loop {
        while at < data.len() && data[at] == 0 {
            at += 1;
        }
        if at >= data.len() {
            break;
        }
        let head = r.slice(at, CONTAINER_HEADER, "container header")?;
        let hr = Reader {
            data: head,
            base: 0,
        };
        let magic = hr.u32(0);
        if magic != FATBIN_MAGIC {
            return Err(FatbinError::BadMagic {
                offset: base + at as u64,
                found: magic,
            });
        }
        let header_size = usize::from(hr.u16(6));
        if header_size < CONTAINER_HEADER {
            return Err(FatbinError::Corrupt {
                what: "container",
                offset: base + at as u64,
                problem: format!("header size {header_size} is below {CONTAINER_HEADER}"),
            });
        }
        let body_size = usize::try_from(hr.u64(8)).unwrap_or(usize::MAX);
        let body_at = at + header_size;
        r.slice(at, header_size, "container header")?;
        let body = r.slice(body_at, body_size, "container body")?;
        parse_entries(body, base + body_at as u64, &mut fatbin)?;
        fatbin.containers += 1;
        fatbin
            .spans
            .push(base + at as u64..base + (body_at + body_size) as u64);
        at = body_at + body_size;
    }
    Ok(fatbin)
}

fn parse_entries<'a>(body: &'a [u8], base: u64, out: &mut Fatbin<'a>) -> Result<(), FatbinError> {
    let r = Reader { data: body, base };
    let mut at = 0usize;
    while at < body.len() {
        let offset = base + at as u64;
        let h = header(r.slice(at, ENTRY_HEADER_MIN, "entry header")?);
        let header_size = h.size_or_offset as usize;
        if header_size < ENTRY_HEADER_MIN {
            return Err(FatbinError::Corrupt {
                what: "entry",
                offset,
                problem: format!("header size {header_size} is below {ENTRY_HEADER_MIN}"),
            });
        }
        let full_header = r.slice(at, header_size, "entry header")?;
        let payload_size = usize::try_from(h.payload_size).unwrap_or(usize::MAX);
        let payload_at = at.saturating_add(header_size);
        let payload = r.slice(payload_at, payload_size, "entry payload")?;
        let compression = compression(h.flags);
        let stored = match compression {
            Some(_) if h.compressed_size as usize <= payload.len() => {
                &payload[..h.compressed_size as usize]
            }
            Some(_) => {
                return Err(FatbinError::Corrupt {
                    what: "entry",
                    offset,
                    problem: format!(
                        "compressed size {} exceeds its payload of {} bytes",
                        h.compressed_size,
                        payload.len()
                    ),
                });
            }
            None => payload,
        };
        if h.kind == KIND_GROUP {
            let group = match compression {
                Some(method) => Members::Compressed(Arc::new(Group {
                    stored,
                    method,
                    size: h.uncompressed_size,
                    offset,
                    inflated: OnceLock::new(),
                })),
                None => Members::Plain(stored),
            };
            parse_group(full_header, offset, group, compression, out)?;
        } else if let Some(kind) = image_kind(h.kind) {
            out.entries.push(Entry {
                offset,
                kind,
                sm: h.sm,
                ptx_isa: ptx_isa(kind, &h),
                flags: h.flags,
                compression,
                stored_size: stored.len() as u64,
                size: match compression {
                    Some(_) => h.uncompressed_size,
                    None => stored.len() as u64,
                },
                attributes: attributes(full_header),
                payload: match compression {
                    Some(_) => Payload::Compressed(stored),
                    None => Payload::Plain(stored),
                },
            });
        } else {
            out.other_entries += 1;
        }
        at = payload_at + payload_size;
    }
    Ok(())
}

/// Where the images of a `--concat` group lie.
enum Members<'a> {
    /// In the file, stored as they are.
    Plain(&'a [u8]),
    /// In a payload compressed as a whole.
    Compressed(Arc<Group<'a>>),
}

/// A `--concat` group: after the usual 64-byte header, `u32 count`, `u32
/// table size`, then one sub-header per image, whose size field holds the
/// image's offset in the inflated payload instead. A sub-header is 64 bytes,
/// or longer when it carries an attribute block (`u32 0x48`, `u32 length`,
/// the attributes, padded to 8). Nothing is inflated here: each member
/// points into the group's payload.
fn parse_group<'a>(
    header_bytes: &'a [u8],
    offset: u64,
    members: Members<'a>,
    compression: Option<Compression>,
    out: &mut Fatbin<'a>,
) -> Result<(), FatbinError> {
    let corrupt = |problem: String| FatbinError::Corrupt {
        what: "concatenated entry",
        offset,
        problem,
    };
    let r = Reader {
        data: header_bytes,
        base: offset,
    };
    let table = r.slice(ENTRY_HEADER_MIN, 8, "concatenated entry table")?;
    let tr = Reader {
        data: table,
        base: 0,
    };
    let count = tr.u32(0) as usize;
    let table_size = tr.u32(4) as usize;
    let subs = r.slice(
        ENTRY_HEADER_MIN + 8,
        table_size.saturating_sub(8),
        "concatenated entry table",
    )?;
    let sr = Reader {
        data: subs,
        base: offset + ENTRY_HEADER_MIN as u64 + 8,
    };
    let inflated_len = match &members {
        Members::Plain(stored) => stored.len(),
        Members::Compressed(group) => usize::try_from(group.size).unwrap_or(usize::MAX),
    };
    let mut at = 0usize;
    for _ in 0..count {
        let h = header(sr.slice(at, ENTRY_HEADER_MIN, "concatenated sub-header")?);
        let mut size = ENTRY_HEADER_MIN;
        if at + 0x48 <= subs.len() && sr.u32(at + 0x40) == 0x48 {
            let attrs = sr.u32(at + 0x44) as usize;
            size = (0x48 + attrs + 4).next_multiple_of(8);
        }
        let sub = &subs[at..subs.len().min(at + size)];
        let start = h.size_or_offset as usize;
        let len = usize::try_from(h.payload_size).unwrap_or(usize::MAX);
        let range = match start.checked_add(len) {
            Some(end) if end <= inflated_len => start..end,
            _ => {
                return Err(corrupt(format!(
                    "image at {start}+{len} lies outside its {inflated_len} inflated bytes"
                )));
            }
        };
        match image_kind(h.kind) {
            Some(kind) => out.entries.push(Entry {
                offset: sr.base + at as u64,
                kind,
                sm: h.sm,
                ptx_isa: ptx_isa(kind, &h),
                flags: h.flags,
                compression,
                stored_size: len as u64,
                size: len as u64,
                attributes: attributes(sub),
                payload: match &members {
                    Members::Plain(stored) => Payload::Plain(&stored[range]),
                    Members::Compressed(group) => Payload::Grouped(group.clone(), range),
                },
            }),
            None => out.other_entries += 1,
        }
        at += size;
    }
    if at != subs.len() {
        return Err(corrupt(format!(
            "{count} sub-headers take {at} bytes, the table holds {}",
            subs.len()
        )));
    }
    Ok(())
}
