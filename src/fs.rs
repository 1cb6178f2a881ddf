//! File-system helpers that every layer shares.

use std::io::Read;
use std::path::Path;

/// Read a whole small file (metadata, cache entries) with as few system
/// calls as possible: open, one read, close. `fs::read` also asks for the
/// size and reads once more to see the end, which on a warm `select` over
/// many variants is a measurable share of the time.
pub fn read_small(path: &Path) -> std::io::Result<Vec<u8>> {
    const FIRST: usize = 16 * 1024;
    let mut file = std::fs::File::open(path)?;
    let mut buf = vec![0u8; FIRST];
    let mut len = 0;
    loop {
        let n = file.read(&mut buf[len..])?;
        len += n;
        // A short read of a regular file is its end; a full buffer may not be.
        if n == 0 || len < buf.len() {
            break;
        }
        buf.resize(buf.len() * 2, 0);
    }
    buf.truncate(len);
    Ok(buf)
}

#[cfg(test)]
mod tests {
    use super::read_small;

    #[test]
    fn reads_files_of_every_size_whole() {
        let dir = tempfile::tempdir().unwrap();
        for size in [0usize, 1, 16 * 1024 - 1, 16 * 1024, 16 * 1024 + 1, 100_000] {
            let path = dir.path().join(format!("f{size}"));
            let data: Vec<u8> = (0..size).map(|i| (i * 7 % 251) as u8).collect();
            std::fs::write(&path, &data).unwrap();
            assert_eq!(read_small(&path).unwrap(), data, "size {size}");
        }
        assert!(read_small(&dir.path().join("missing")).is_err());
    }
}
