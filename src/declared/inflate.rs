//! Decompressing fatbin payloads: LZ4 blocks (`lz4_flex`) and zstd frames
//! (libzstd), whole or, for zstd, only as far as a caller needs.

use crate::declared::fatbin::{Compression, FatbinError};

/// Refuse to inflate a single image beyond this (a corrupt size field must
/// not allocate terabytes).
const MAX_UNCOMPRESSED: u64 = 4 << 30;
/// The first prefix a head read offers; each next one is twice as long.
pub(crate) const HEAD_STEP: usize = 4 << 10;

/// A whole payload, which must inflate to exactly `size` bytes; `offset`
/// locates its entry in errors.
pub(crate) fn decompress(
    data: &[u8],
    method: Compression,
    size: u64,
    offset: u64,
) -> Result<Vec<u8>, FatbinError> {
    match method {
        Compression::Lz4 => lz4(data, size, offset),
        Compression::Zstd => zstd(data, size, offset),
    }
}

fn checked_size(method: Compression, size: u64, offset: u64) -> Result<usize, FatbinError> {
    if size > MAX_UNCOMPRESSED {
        return Err(FatbinError::Decompress {
            offset,
            method,
            problem: format!("declared size {size} is implausible"),
        });
    }
    Ok(size as usize)
}

fn lz4(data: &[u8], size: u64, offset: u64) -> Result<Vec<u8>, FatbinError> {
    let fail = |problem: String| FatbinError::Decompress {
        offset,
        method: Compression::Lz4,
        problem,
    };
    let size = checked_size(Compression::Lz4, size, offset)?;
    // LZ4 cannot expand more than 255-fold; a larger claim is corruption,
    // and must not become a huge allocation.
    if size > data.len().saturating_mul(255).saturating_add(16) {
        return Err(fail(format!(
            "declared size {size} is impossible for {} compressed bytes",
            data.len()
        )));
    }
    let mut out = vec![0u8; size];
    let n = lz4_flex::block::decompress_into(data, &mut out).map_err(|e| fail(e.to_string()))?;
    if n != size {
        return Err(fail(format!(
            "decompressed to {n} bytes, header says {size}"
        )));
    }
    Ok(out)
}

fn zstd_failure(offset: u64) -> impl Fn(String) -> FatbinError {
    move |problem| FatbinError::Decompress {
        offset,
        method: Compression::Zstd,
        problem,
    }
}

/// A whole zstd frame, in one call to libzstd.
fn zstd(data: &[u8], size: u64, offset: u64) -> Result<Vec<u8>, FatbinError> {
    let fail = zstd_failure(offset);
    let size = checked_size(Compression::Zstd, size, offset)?;
    // One byte of room past the declared size reveals a frame that is too long.
    let out = zstd::bulk::decompress(data, size + 1).map_err(|e| fail(e.to_string()))?;
    if out.len() != size {
        return Err(fail(format!(
            "decompressed to {} bytes, header says {size}",
            out.len()
        )));
    }
    Ok(out)
}

/// Decode a zstd frame until `enough` accepts the output (grown as in
/// [`Entry::head`](crate::declared::fatbin::Entry::head)) or the frame ends; a frame decoded to its end must hold
/// exactly `size` bytes. libzstd's streaming decoder hands out each block
/// (at most 128 KiB) as soon as it is decoded, so a short head costs one
/// block, not the frame.
pub(crate) fn zstd_head(
    data: &[u8],
    size: u64,
    offset: u64,
    mut enough: impl FnMut(&[u8]) -> bool,
) -> Result<Vec<u8>, FatbinError> {
    use std::io::Read;
    let fail = zstd_failure(offset);
    let size = checked_size(Compression::Zstd, size, offset)?;
    let mut decoder = zstd::stream::read::Decoder::with_buffer(data)
        .map_err(|e| fail(e.to_string()))?
        .single_frame();
    let mut out = Vec::new();
    // One byte past the declared size reveals a frame that is too long.
    let mut want = HEAD_STEP;
    loop {
        let target = want.min(size + 1);
        out.reserve_exact(target - out.len());
        (&mut decoder)
            .take((target - out.len()) as u64)
            .read_to_end(&mut out)
            .map_err(|e| fail(e.to_string()))?;
        if out.len() < target || target > size {
            break;
        }
        if enough(&out) {
            return Ok(out);
        }
        want = want.saturating_mul(2);
    }
    if out.len() != size {
        return Err(fail(format!(
            "decompressed to {} bytes, header says {size}",
            out.len()
        )));
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn text() -> Vec<u8> {
        (0..20_000)
            .flat_map(|i| format!("    add.s32 %r{i}, %r{i}, 1;\n").into_bytes())
            .collect()
    }

    #[test]
    fn a_zstd_head_stops_at_the_first_prefix_that_is_enough() {
        let text = text();
        let frame = zstd::bulk::compress(&text, 19).unwrap();
        let size = text.len() as u64;
        let head = zstd_head(&frame, size, 0, |h| h.len() >= 5000).unwrap();
        assert_eq!(head, text[..8 << 10]);
        let whole = zstd_head(&frame, size, 0, |_| false).unwrap();
        assert_eq!(whole, text);
        assert_eq!(
            decompress(&frame, Compression::Zstd, size, 0).unwrap(),
            text
        );
    }

    #[test]
    fn a_frame_of_another_size_than_declared_is_an_error() {
        let text = text();
        let zstd = zstd::bulk::compress(&text, 3).unwrap();
        let lz4 = lz4_flex::block::compress(&text);
        for (frame, method) in [(&zstd, Compression::Zstd), (&lz4, Compression::Lz4)] {
            for size in [text.len() - 1, text.len() + 1] {
                let err = decompress(frame, method, size as u64, 0x40).unwrap_err();
                assert!(
                    matches!(err, FatbinError::Decompress { offset: 0x40, .. }),
                    "{method} {size}: {err}"
                );
            }
        }
        let short = zstd_head(&zstd, text.len() as u64 + 1, 0, |_| false).unwrap_err();
        assert!(short.to_string().contains("header says"), "{short}");
        let huge = decompress(&zstd, Compression::Zstd, 1 << 40, 0).unwrap_err();
        assert!(huge.to_string().contains("implausible"), "{huge}");
    }
}
