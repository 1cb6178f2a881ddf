//! File-system helpers that every layer shares.

use std::io::Read;
use std::path::Path;

/// Opens `path` for reading when it is a regular file (links followed),
/// and refuses anything else — a FIFO, a device, a socket, a folder —
/// without waiting: opening a FIFO for reading blocks until a writer comes,
/// and reading a device may never end. `ErrorKind::InvalidInput`, "not a
/// regular file", for those.
///
/// Recorded as a `stat` ([`crate::seen::stat`]) when a record is being
/// made: what is read from an ordinary file is vouched for by its `stat`.
pub fn open_regular(path: &Path) -> std::io::Result<std::fs::File> {
    let found = open_regular_seen(path);
    if crate::seen::recording() {
        // Refused (a folder, a FIFO) or absent: what is there.
        let meta = match &found {
            Ok((_, m)) => Some(m.clone()),
            Err(_) => std::fs::metadata(path).ok(),
        };
        crate::seen::stat(path, meta.as_ref());
    }
    found.map(|(file, _)| file)
}

/// [`open_regular`], and the open file's `stat`.
fn open_regular_seen(path: &Path) -> std::io::Result<(std::fs::File, std::fs::Metadata)> {
    use std::os::unix::fs::{FileTypeExt, OpenOptionsExt};
    let file = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NONBLOCK | libc::O_NOCTTY)
        .open(path)?;
    let meta = file.metadata()?;
    let kind = meta.file_type();
    if kind.is_file() {
        return Ok((file, meta));
    }
    let what = if kind.is_fifo() {
        "a FIFO"
    } else if kind.is_dir() {
        "a folder"
    } else if kind.is_socket() {
        "a socket"
    } else {
        "a device"
    };
    Err(std::io::Error::new(
        std::io::ErrorKind::InvalidInput,
        format!("not a regular file ({what})"),
    ))
}

/// Read a whole small file (metadata, cache entries) with as few system
/// calls as possible: open, a `stat` (only a regular file is read:
/// [`open_regular`]), one read, close. `fs::read` also asks for the size
/// and reads once more to see the end, which on a warm `select` over many
/// variants is a measurable share of the time.
///
/// Recorded ([`crate::seen::content`]) when a record is being made.
pub fn read_small(path: &Path) -> std::io::Result<Vec<u8>> {
    let found = read_small_seen(path);
    crate::seen::content(path, found.as_ref().ok().map(|(m, b)| (m, b.as_slice())));
    found.map(|(_, bytes)| bytes)
}

fn read_small_seen(path: &Path) -> std::io::Result<(std::fs::Metadata, Vec<u8>)> {
    const FIRST: usize = 16 * 1024;
    let (mut file, meta) = open_regular_seen(path)?;
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
    Ok((meta, buf))
}

/// [`read_small`] as text; bytes that are not UTF-8 are an error, as for
/// `fs::read_to_string`.
pub fn read_small_text(path: impl AsRef<Path>) -> std::io::Result<String> {
    String::from_utf8(read_small(path.as_ref())?)
        .map_err(|e| std::io::Error::new(std::io::ErrorKind::InvalidData, e))
}

/// The absolute path of `path` with every link resolved, as
/// `std::fs::canonicalize` gives it, in three system calls: the kernel
/// resolves the path once when it is opened (`O_PATH`: nothing is read, a
/// folder works too), and `/proc/self/fd` names what was opened.
/// `canonicalize` (glibc's `realpath`) asks for every component in turn,
/// a `readlink` each: a venv's interpreter took 17. Without `/proc`, or
/// when the kernel's name for the file is not a plain path, it falls back
/// to `canonicalize`.
///
/// Recorded ([`crate::seen::resolved`]) when a record is being made.
pub fn canonicalize(path: &Path) -> std::io::Result<std::path::PathBuf> {
    let found = canonicalize_unseen(path);
    crate::seen::resolved(path, found.as_deref().ok());
    found
}

fn canonicalize_unseen(path: &Path) -> std::io::Result<std::path::PathBuf> {
    use std::os::unix::fs::OpenOptionsExt;
    use std::os::unix::io::AsRawFd;
    let file = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_PATH)
        .open(path)?;
    match std::fs::read_link(format!("/proc/self/fd/{}", file.as_raw_fd())) {
        // Unlinked since it was opened, or not in this process's view of
        // the file system: the kernel's name is not a path to it.
        Ok(real)
            if real.is_absolute()
                && !real.as_os_str().as_encoded_bytes().ends_with(b" (deleted)") =>
        {
            Ok(real)
        }
        _ => std::fs::canonicalize(path),
    }
}

/// This process's binary (`std::env::current_exe`), asked once: a warm
/// `select` needs it for the reaper, the full fingerprint's cuda child and
/// its warm record's key, and each ask is a `readlink` of `/proc/self/exe`.
/// `None` when it cannot be found.
pub fn current_exe() -> Option<std::path::PathBuf> {
    static EXE: std::sync::OnceLock<Option<std::path::PathBuf>> = std::sync::OnceLock::new();
    EXE.get_or_init(|| std::env::current_exe().ok()).clone()
}

/// `path` for a line of text: control characters (a newline in a folder
/// name from a downloaded repository) written as escapes, so that a name
/// cannot start a line of its own in what preflight prints.
pub fn shown(path: &Path) -> String {
    let text = path.display().to_string();
    if !text.chars().any(char::is_control) {
        return text;
    }
    let mut out = String::with_capacity(text.len() + 8);
    for c in text.chars() {
        if c.is_control() {
            out.extend(c.escape_default());
        } else {
            out.push(c);
        }
    }
    out
}

/// Write `bytes` to `path` so that readers see the old file or the new one,
/// never a part: a temp file named `prefix…` in the same directory (with
/// `mode`), its data fsynced, renamed over the target, then the directory
/// fsynced so that the rename itself survives a crash. Concurrent writers
/// of one file are harmless: the last rename wins, and each wrote a whole
/// file. A failed write leaves no temp file behind.
pub fn write_atomic(path: &Path, bytes: &[u8], prefix: &str, mode: u32) -> std::io::Result<()> {
    use std::io::Write;
    use std::os::unix::fs::PermissionsExt;
    let dir = match path.parent() {
        Some(p) if !p.as_os_str().is_empty() => p,
        _ => Path::new("."),
    };
    let mut tmp = tempfile::Builder::new()
        .prefix(prefix)
        .permissions(std::fs::Permissions::from_mode(mode))
        .tempfile_in(dir)?;
    tmp.write_all(bytes)?;
    tmp.as_file().sync_all()?;
    tmp.persist(path).map_err(|e| e.error)?;
    // The file is in place; a file system that cannot sync a directory
    // (some network ones) only loses the durability of the rename.
    if let Ok(d) = std::fs::File::open(dir) {
        let _ = d.sync_all();
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::{canonicalize, open_regular, read_small};

    #[test]
    fn only_regular_files_are_opened_and_a_fifo_does_not_block() {
        let dir = tempfile::tempdir().unwrap();
        let fifo = dir.path().join("metadata.json");
        nix::unistd::mkfifo(&fifo, nix::sys::stat::Mode::S_IRWXU).unwrap();
        for path in [
            fifo.as_path(),
            dir.path(),
            std::path::Path::new("/dev/zero"),
        ] {
            let err = read_small(path).expect_err("refused");
            assert_eq!(err.kind(), std::io::ErrorKind::InvalidInput, "{path:?}");
            assert!(err.to_string().starts_with("not a regular file"), "{err}");
        }
        assert!(
            open_regular(&fifo)
                .unwrap_err()
                .to_string()
                .contains("a FIFO")
        );
        std::fs::write(dir.path().join("f"), "x").unwrap();
        assert_eq!(read_small(&dir.path().join("f")).unwrap(), b"x");
    }

    #[test]
    fn canonicalize_agrees_with_std_through_links_and_dots() {
        let dir = tempfile::tempdir().unwrap();
        let real = dir.path().join("a/b");
        std::fs::create_dir_all(&real).unwrap();
        std::fs::write(real.join("f"), "x").unwrap();
        std::os::unix::fs::symlink(&real, dir.path().join("link")).unwrap();
        std::os::unix::fs::symlink("b/f", dir.path().join("a/rel")).unwrap();
        std::os::unix::fs::symlink("a/rel", dir.path().join("chain")).unwrap();
        for p in [
            dir.path().join("link/f"),
            dir.path().join("link/../b/f"),
            dir.path().join("a/./b"),
            dir.path().join("chain"),
            dir.path().join("link"),
        ] {
            assert_eq!(
                canonicalize(&p).unwrap(),
                std::fs::canonicalize(&p).unwrap(),
                "{}",
                p.display()
            );
        }
        let missing = dir.path().join("link/missing");
        assert_eq!(
            canonicalize(&missing).unwrap_err().kind(),
            std::io::ErrorKind::NotFound
        );
        std::os::unix::fs::symlink("nowhere", dir.path().join("dangling")).unwrap();
        assert!(canonicalize(&dir.path().join("dangling")).is_err());
    }

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

    #[test]
    fn control_characters_are_escaped_and_nothing_else() {
        let shown = |p: &str| super::shown(std::path::Path::new(p));
        assert_eq!(
            shown("build/a\nb\tc\u{1b}[31m"),
            "build/a\\nb\\tc\\u{1b}[31m"
        );
        assert_eq!(shown("build/tö rch x"), "build/tö rch x");
    }
}
