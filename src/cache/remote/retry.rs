//! What a failed exchange with the remote store means, and how long to wait
//! before the next try: a store that is slow for a moment (a fleet starting
//! together, a restart, a failover, `CLIENT PAUSE`) is tried again with
//! growing, jittered pauses for at most the configured retry time; a store
//! that refuses this node (a password, an ACL, a Redis Cluster) is not.

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

/// Why an exchange with the store failed.
#[derive(Debug)]
pub(super) enum Trouble {
    /// It may pass by itself (no answer in time, a refused or dropped
    /// connection, a server loading its data or failing over): try again.
    Transient(String),
    /// The address is a node of a Redis Cluster, which the store does not
    /// use: never try again.
    Cluster(String),
    /// Anything else (a wrong password, a command an ACL forbids): never
    /// try again.
    Fatal(String),
}

impl Trouble {
    /// The failure `e`, sorted.
    pub(super) fn of(e: &redis::RedisError) -> Trouble {
        use redis::{ErrorKind, ServerErrorKind as S};
        let text = e.to_string();
        match e.kind() {
            ErrorKind::Server(S::Moved | S::Ask | S::CrossSlot | S::ClusterDown) => {
                Trouble::Cluster(text)
            }
            // `LOADING` after a restart, `READONLY` from a primary demoted
            // by a failover, `MASTERDOWN`, `TRYAGAIN`.
            ErrorKind::Server(S::BusyLoading | S::ReadOnly | S::MasterDown | S::TryAgain) => {
                Trouble::Transient(text)
            }
            ErrorKind::Io if transient_io(e) => Trouble::Transient(text),
            _ => Trouble::Fatal(text),
        }
    }
}

/// Whether an I/O failure may pass: every one but a certificate or a
/// protocol refused (TLS says `InvalidData`), a forbidden or unsupported
/// operation.
fn transient_io(e: &redis::RedisError) -> bool {
    use std::io::ErrorKind as Io;
    type Inner = std::sync::Arc<dyn std::error::Error + Send + Sync>;
    // redis keeps the I/O error behind an `Arc`, which is what it gives as
    // the source.
    let io = std::error::Error::source(e).and_then(|s| {
        s.downcast_ref::<Inner>()
            .and_then(|inner| inner.downcast_ref::<std::io::Error>())
            .or_else(|| s.downcast_ref::<std::io::Error>())
    });
    !io.is_some_and(|io| {
        matches!(
            io.kind(),
            Io::InvalidData | Io::InvalidInput | Io::PermissionDenied | Io::Unsupported
        )
    })
}

/// Growing pauses, each drawn at random from the upper half of its step,
/// so that nodes that failed together do not all try again together.
#[derive(Debug)]
pub(crate) struct Backoff {
    next: Duration,
    cap: Duration,
}

impl Backoff {
    /// Pauses from `first`, half as long again each time, to `cap`.
    pub(crate) fn new(first: Duration, cap: Duration) -> Backoff {
        Backoff {
            next: first.min(cap),
            cap,
        }
    }

    /// The pause before the next try.
    pub(crate) fn pause(&mut self, jitter: &Jitter) -> Duration {
        let step = self.next;
        self.next = (step * 3 / 2).min(self.cap);
        step / 2 + jitter.below(step / 2)
    }
}

/// A cheap source of jitter, seeded per process (nothing here needs to be
/// unpredictable, only to differ between nodes).
#[derive(Debug)]
pub(crate) struct Jitter(AtomicU64);

impl Jitter {
    /// A source seeded with `seed` (this node's lease token).
    pub(crate) fn new(seed: &str) -> Jitter {
        let digest = crate::hash::sha256_hex(seed.as_bytes());
        let head = digest.get(..16).unwrap_or("0");
        Jitter(AtomicU64::new(u64::from_str_radix(head, 16).unwrap_or(1)))
    }

    /// A duration drawn evenly from `[0, d)`.
    pub(crate) fn below(&self, d: Duration) -> Duration {
        // splitmix64 over a Weyl sequence: lock-free, shared by threads.
        let mut z = self
            .0
            .fetch_add(0x9e37_79b9_7f4a_7c15, Ordering::Relaxed)
            .wrapping_add(0x9e37_79b9_7f4a_7c15);
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^= z >> 31;
        let nanos = u64::try_from(d.as_nanos()).unwrap_or(u64::MAX);
        if nanos == 0 {
            return Duration::ZERO;
        }
        Duration::from_nanos(z % nanos)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pauses_grow_to_the_cap_and_stay_in_the_upper_half_of_their_step() {
        let jitter = Jitter::new("node-a");
        let mut backoff = Backoff::new(Duration::from_millis(100), Duration::from_secs(1));
        let mut step = Duration::from_millis(100);
        for _ in 0..10 {
            let pause = backoff.pause(&jitter);
            assert!(pause >= step / 2 && pause <= step, "{pause:?} of {step:?}");
            step = (step * 3 / 2).min(Duration::from_secs(1));
        }
        assert_eq!(step, Duration::from_secs(1));
    }

    #[test]
    fn nodes_draw_different_pauses() {
        let (a, b) = (Jitter::new("node-a"), Jitter::new("node-b"));
        let d = Duration::from_secs(1);
        let draws = |j: &Jitter| (0..8).map(|_| j.below(d)).collect::<Vec<_>>();
        let (da, db) = (draws(&a), draws(&b));
        assert_ne!(da, db);
        assert!(da.iter().chain(&db).all(|x| *x < d));
        // Spread over the range, not stuck at one end.
        assert!(da.iter().any(|x| *x < d / 2) && da.iter().any(|x| *x >= d / 2));
    }

    #[test]
    fn failures_are_sorted_by_whether_trying_again_can_help() {
        let io = |kind| redis::RedisError::from(std::io::Error::new(kind, "x"));
        assert!(matches!(
            Trouble::of(&io(std::io::ErrorKind::TimedOut)),
            Trouble::Transient(_)
        ));
        assert!(matches!(
            Trouble::of(&io(std::io::ErrorKind::ConnectionRefused)),
            Trouble::Transient(_)
        ));
        assert!(matches!(
            Trouble::of(&io(std::io::ErrorKind::WouldBlock)),
            Trouble::Transient(_)
        ));
        for fatal in [
            std::io::ErrorKind::PermissionDenied,
            std::io::ErrorKind::InvalidData,
        ] {
            assert!(matches!(Trouble::of(&io(fatal)), Trouble::Fatal(_)));
        }
    }
}
