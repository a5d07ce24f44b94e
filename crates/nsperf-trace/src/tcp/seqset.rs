//! The sequence space a sender has covered: a sorted list of disjoint, non-adjacent ranges.
//! A bulk transfer keeps one range plus a few holes, so the list stays short; it is capped
//! so a pathological capture cannot grow it without bound.

/// Most ranges kept; past it the two lowest are joined (that old data is long acknowledged).
const MAX_RANGES: usize = 1024;

/// How a new segment relates to what was sent before (the tcptrace definitions).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Coverage {
    /// Bytes from the first already-covered byte of the segment to its end: the
    /// retransmitted length as tcptrace counts it (0 when nothing overlaps).
    pub retransmitted: u64,
    /// Bytes not covered before.
    pub new: u64,
    /// The segment lies before data already sent (it was sent or captured out of order).
    pub out_of_order: bool,
}

/// Covered sequence ranges `[start, end)` in unwrapped 64-bit sequence space.
#[derive(Debug, Clone, Default)]
pub struct SeqSet {
    ranges: Vec<(u64, u64)>,
}

impl SeqSet {
    /// Highest covered end, if any.
    pub fn max_end(&self) -> Option<u64> {
        self.ranges.last().map(|r| r.1)
    }

    /// Number of disjoint ranges (holes + 1).
    pub fn len(&self) -> usize {
        self.ranges.len()
    }

    /// True when sequence number `pos` is covered.
    pub fn contains(&self, pos: u64) -> bool {
        let i = self.ranges.partition_point(|r| r.1 <= pos);
        self.ranges.get(i).is_some_and(|r| r.0 <= pos)
    }

    /// Adds `[start, end)` and says how it overlapped.
    pub fn insert(&mut self, start: u64, end: u64) -> Coverage {
        if end <= start {
            return Coverage::default();
        }
        // Fast path: in-order data extends the last range.
        if let Some(last) = self.ranges.last_mut() {
            if start == last.1 {
                last.1 = end;
                return Coverage {
                    new: end - start,
                    ..Coverage::default()
                };
            }
            if start > last.1 {
                self.push((start, end));
                return Coverage {
                    new: end - start,
                    ..Coverage::default()
                };
            }
        }
        // First range ending after `start`.
        let i = self.ranges.partition_point(|r| r.1 <= start);
        let mut cov = Coverage::default();
        if let Some(&(rs, re)) = self.ranges.get(i) {
            if rs >= end {
                cov.out_of_order = true;
            } else {
                cov.retransmitted = end - start.max(rs);
                if start < rs && end < re {
                    cov.out_of_order = true;
                }
            }
        }
        // Merge every range touching [start, end].
        let j = self.ranges.partition_point(|r| r.0 <= end);
        let lo = self.ranges.partition_point(|r| r.1 < start);
        let mut covered_before = 0;
        let (mut ns, mut ne) = (start, end);
        for r in &self.ranges[lo..j] {
            covered_before += r.1.min(end).saturating_sub(r.0.max(start));
            ns = ns.min(r.0);
            ne = ne.max(r.1);
        }
        cov.new = (end - start) - covered_before;
        self.ranges.splice(lo..j, [(ns, ne)]);
        if self.ranges.len() > MAX_RANGES {
            let second_end = self.ranges[1].1;
            self.ranges[0].1 = second_end;
            self.ranges.remove(1);
        }
        cov
    }

    fn push(&mut self, r: (u64, u64)) {
        self.ranges.push(r);
        if self.ranges.len() > MAX_RANGES {
            let second_end = self.ranges[1].1;
            self.ranges[0].1 = second_end;
            self.ranges.remove(1);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn in_order_retransmit_and_hole() {
        let mut s = SeqSet::default();
        assert_eq!(s.insert(0, 100).new, 100);
        assert_eq!(s.insert(100, 200).new, 100);
        // a hole, then data after it
        let c = s.insert(300, 400);
        assert_eq!((c.new, c.retransmitted, c.out_of_order), (100, 0, false));
        assert_eq!(s.len(), 2);
        // fill the hole: new, and before later data, so out of order
        let c = s.insert(200, 300);
        assert_eq!((c.new, c.retransmitted, c.out_of_order), (100, 0, true));
        assert_eq!(s.len(), 1);
        // full retransmission
        let c = s.insert(100, 200);
        assert_eq!((c.new, c.retransmitted), (0, 100));
        // partial: 350..450 overlaps 50 bytes, tcptrace counts from the overlap to the end
        let c = s.insert(350, 450);
        assert_eq!((c.new, c.retransmitted), (50, 100));
        assert_eq!(s.max_end(), Some(450));
    }

    #[test]
    fn bounded() {
        let mut s = SeqSet::default();
        for i in 0..5000u64 {
            s.insert(i * 10, i * 10 + 5);
        }
        assert!(s.len() <= MAX_RANGES);
    }
}
