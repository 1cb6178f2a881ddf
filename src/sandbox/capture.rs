//! Bounded capture of a child's output: the first bytes, the last bytes and
//! a count of everything in between.

use std::collections::VecDeque;

/// What a child wrote on one stream, bounded in memory.
///
/// The first `head.len()` bytes and the last `tail.len()` bytes are kept;
/// anything in between is only counted, so a child that floods its output
/// costs the parent at most `output_head + output_tail` bytes.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Captured {
    /// The first bytes written, up to `Limits::output_head`.
    pub head: Vec<u8>,
    /// The last bytes written after the head, up to `Limits::output_tail`.
    pub tail: Vec<u8>,
    /// Everything the child wrote on this stream, kept or not.
    pub total_bytes: u64,
}

impl Captured {
    /// Whether bytes between the head and the tail were dropped.
    pub fn truncated(&self) -> bool {
        self.omitted() > 0
    }

    /// How many bytes between the head and the tail were dropped.
    pub fn omitted(&self) -> u64 {
        self.total_bytes
            .saturating_sub((self.head.len() + self.tail.len()) as u64)
    }

    /// The output as text (lossy UTF-8), with a marker where bytes were dropped.
    pub fn text(&self) -> String {
        let head = String::from_utf8_lossy(&self.head);
        let tail = String::from_utf8_lossy(&self.tail);
        if self.truncated() {
            format!("{head}\n[… {} bytes omitted …]\n{tail}", self.omitted())
        } else {
            let mut all = self.head.clone();
            all.extend_from_slice(&self.tail);
            String::from_utf8_lossy(&all).into_owned()
        }
    }

    /// The last `n` lines of the output (lossy UTF-8), for error messages.
    ///
    /// Taken from the tail alone when bytes were dropped, so a line cut by
    /// the truncation may come first; a final newline does not count as an
    /// empty last line.
    pub fn tail_lines(&self, n: usize) -> String {
        let bytes = if self.truncated() {
            self.tail.clone()
        } else {
            let mut all = self.head.clone();
            all.extend_from_slice(&self.tail);
            all
        };
        let text = String::from_utf8_lossy(&bytes);
        let text = text.strip_suffix('\n').unwrap_or(&text);
        if n == 0 {
            return String::new();
        }
        match text.rmatch_indices('\n').nth(n - 1) {
            Some((at, _)) => text[at + 1..].to_owned(),
            None => text.to_owned(),
        }
    }
}

/// Accumulates one stream into a [`Captured`] as chunks arrive.
#[derive(Debug)]
pub(crate) struct Capture {
    head_limit: usize,
    tail_limit: usize,
    head: Vec<u8>,
    tail: VecDeque<u8>,
    total: u64,
}

impl Capture {
    pub(crate) fn new(head_limit: usize, tail_limit: usize) -> Capture {
        Capture {
            head_limit,
            tail_limit,
            // Small up front: most children print little.
            head: Vec::with_capacity(head_limit.min(4096)),
            tail: VecDeque::new(),
            total: 0,
        }
    }

    pub(crate) fn push(&mut self, mut chunk: &[u8]) {
        self.total += chunk.len() as u64;
        let room = self.head_limit - self.head.len();
        if room > 0 {
            let take = room.min(chunk.len());
            self.head.extend_from_slice(&chunk[..take]);
            chunk = &chunk[take..];
        }
        if chunk.len() >= self.tail_limit {
            self.tail.clear();
            self.tail.extend(&chunk[chunk.len() - self.tail_limit..]);
        } else {
            let overflow = (self.tail.len() + chunk.len()).saturating_sub(self.tail_limit);
            self.tail.drain(..overflow);
            self.tail.extend(chunk);
        }
    }

    pub(crate) fn finish(mut self) -> Captured {
        Captured {
            head: self.head,
            tail: self.tail.make_contiguous().to_vec(),
            total_bytes: self.total,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn captured(head: usize, tail: usize, chunks: &[&[u8]]) -> Captured {
        let mut capture = Capture::new(head, tail);
        for chunk in chunks {
            capture.push(chunk);
        }
        capture.finish()
    }

    #[test]
    fn small_output_is_kept_whole() {
        let c = captured(8, 8, &[b"hello ", b"world"]);
        assert!(!c.truncated());
        assert_eq!(c.text(), "hello world");
        assert_eq!(c.total_bytes, 11);
    }

    #[test]
    fn large_output_keeps_head_and_tail() {
        let c = captured(4, 4, &[b"0123", b"45678", b"9abcdef"]);
        assert_eq!(c.head, b"0123");
        assert_eq!(c.tail, b"cdef");
        assert_eq!(c.total_bytes, 16);
        assert!(c.truncated());
        assert_eq!(c.text(), "0123\n[… 8 bytes omitted …]\ncdef");
    }

    #[test]
    fn tail_ring_keeps_the_last_bytes_across_small_chunks() {
        let chunks: Vec<[u8; 1]> = (b'a'..=b'z').map(|b| [b]).collect();
        let refs: Vec<&[u8]> = chunks.iter().map(|c| &c[..]).collect();
        let c = captured(2, 3, &refs);
        assert_eq!(c.head, b"ab");
        assert_eq!(c.tail, b"xyz");
        assert_eq!(c.omitted(), 21);
    }

    #[test]
    fn zero_limits_only_count() {
        let c = captured(0, 0, &[b"abc"]);
        assert_eq!(c.total_bytes, 3);
        assert!(c.head.is_empty() && c.tail.is_empty());
        assert!(c.truncated());
    }

    #[test]
    fn tail_lines_counts_from_the_end() {
        let c = captured(64, 64, &[b"one\ntwo\nthree\n"]);
        assert_eq!(c.tail_lines(2), "two\nthree");
        assert_eq!(c.tail_lines(5), "one\ntwo\nthree");
        assert_eq!(c.tail_lines(0), "");
    }

    #[test]
    fn invalid_utf8_is_replaced() {
        let c = captured(8, 8, &[b"a\xffb"]);
        assert_eq!(c.text(), "a\u{fffd}b");
    }
}
