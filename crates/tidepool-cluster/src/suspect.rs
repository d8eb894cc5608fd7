//! Which deliveries must be checked against the results stream before they
//! run (the check of step 2 of the node's protocol, see [`crate::node`];
//! step 5 of the protocol in `docs/cluster.md`).
//!
//! A redelivery (delivery count > 1) may have run before: its first run may
//! have recorded its result and then lost its ack. A *first* delivery can be
//! in the same case after a broker restart: the restarted server's consumer
//! state can be older than what the old server delivered (its delivered
//! sequence and pending set were not all written when it stopped), so it
//! delivers again, numbered 1, requests it had already handed out — some
//! still running on a node, some already run and recorded. The chaos test
//! saw both (docs/cluster.md, "A broker restart replays first deliveries").
//!
//! Such a replay only follows a broker restart, and a restart drops every
//! client's connection. So a node suspects every first delivery from the
//! moment its client has connected again (the client counts its
//! connections before it reads anything from the new one) until it has read
//! the requests stream's last sequence from the restarted broker; from then
//! on, a first delivery is suspect when its stream sequence is at or below
//! that bound (it was stored, so it may have been delivered, before the
//! restart). A request stored after the restart has a higher sequence and
//! is not checked: without a reconnect the rule costs one comparison.

/// The suspicion of one node's puller.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Suspicion {
    /// The client's connection count already bounded by `through`.
    bounded_connects: u64,
    /// First deliveries with a stream sequence at or below this are suspect.
    through: u64,
}

impl Suspicion {
    /// A node whose client has connected `connects` times (1 at start).
    pub(crate) fn new(connects: u64) -> Suspicion {
        Suspicion {
            bounded_connects: connects,
            through: 0,
        }
    }

    /// Has the client connected again since the last [`Suspicion::bound`]?
    pub(crate) fn needs_bound(&self, connects: u64) -> bool {
        connects > self.bounded_connects
    }

    /// The requests stream's last sequence read after the client's
    /// `connects`-th connection: everything delivered before it is at or
    /// below `last_seq`.
    pub(crate) fn bound(&mut self, connects: u64, last_seq: u64) {
        self.bounded_connects = self.bounded_connects.max(connects);
        self.through = self.through.max(last_seq);
    }

    /// Must a delivery (count `delivered`, stream sequence `stream_seq`)
    /// received when the client had connected `connects` times be checked
    /// against the results before it runs?
    pub(crate) fn suspect(&self, connects: u64, delivered: i64, stream_seq: u64) -> bool {
        delivered > 1 || self.needs_bound(connects) || stream_seq <= self.through
    }
}

#[cfg(test)]
mod tests {
    use super::Suspicion;

    #[test]
    fn without_a_reconnect_only_redeliveries_are_suspect() {
        let s = Suspicion::new(1);
        assert!(!s.needs_bound(1));
        assert!(!s.suspect(1, 1, 1));
        assert!(!s.suspect(1, 1, u64::MAX));
        assert!(s.suspect(1, 2, 5));
    }

    #[test]
    fn after_a_reconnect_every_first_delivery_is_suspect_until_bounded() {
        let s = Suspicion::new(1);
        assert!(s.needs_bound(2));
        assert!(s.suspect(2, 1, 1));
        assert!(s.suspect(2, 1, u64::MAX));
    }

    #[test]
    fn the_bound_is_the_stream_sequence_read_after_the_reconnect() {
        let mut s = Suspicion::new(1);
        s.bound(2, 1000);
        assert!(!s.needs_bound(2));
        assert!(s.suspect(2, 1, 1));
        assert!(s.suspect(2, 1, 1000));
        assert!(!s.suspect(2, 1, 1001));
        // A second reconnect suspects everything again; a lower bound read
        // after it (the stream lost its tail) does not shrink the first.
        assert!(s.suspect(3, 1, 5000));
        s.bound(3, 900);
        assert!(s.suspect(3, 1, 1000));
        assert!(!s.suspect(3, 1, 1001));
    }

    #[test]
    fn a_reconnect_during_the_bound_read_is_bounded_again() {
        // The puller read `connects` = 2, a third connection came while it
        // read the last sequence: the third is not covered by that read.
        let mut s = Suspicion::new(1);
        s.bound(2, 100);
        assert!(s.needs_bound(3));
        assert!(s.suspect(3, 1, 101));
    }
}
