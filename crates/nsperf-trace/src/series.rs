//! The throughput series of `--bin`, in bounded memory: bins of one width over the whole
//! capture (the aggregate) and per connection. When the capture would need more than
//! [`MAX_BINS`] aggregate bins, or the connections' series more than [`MAX_HELD_CELLS`] cells
//! (beyond two per connection), every bin doubles in width (neighbours merged), so the series
//! covers the whole capture at a coarser grain instead of stopping early or growing without
//! bound. The width used is reported beside the width asked.

/// Aggregate bins at most.
pub(crate) const MAX_BINS: usize = 1_000_000;
/// Cells of the per-connection series held at once (live connections and the largest
/// finished ones), beyond two per connection.
pub(crate) const MAX_HELD_CELLS: usize = 2_000_000;

/// One bin's counters: wire bytes, unique payload bytes, retransmissions.
pub(crate) type Cell = (u64, u64, u64);

/// The cells of one series from its first bin on.
#[derive(Debug, Default)]
pub(crate) struct Bins {
    first: usize,
    cells: Vec<Cell>,
}

impl Bins {
    /// The cell of bin `bin` (created, and the cells before it, when new) and how many
    /// cells were added. Bins before the first one are folded into the first.
    pub(crate) fn cell(&mut self, bin: usize) -> (&mut Cell, usize) {
        if self.cells.is_empty() {
            self.first = bin;
        }
        let i = bin.saturating_sub(self.first);
        let before = self.cells.len();
        if before <= i {
            self.cells.resize(i + 1, (0, 0, 0));
        }
        let added = self.cells.len() - before;
        (&mut self.cells[i], added)
    }

    /// Cells held.
    pub(crate) fn len(&self) -> usize {
        self.cells.len()
    }

    /// The counters of bin `bin`, if this series has that bin.
    pub(crate) fn get(&self, bin: usize) -> Option<Cell> {
        bin.checked_sub(self.first)
            .and_then(|i| self.cells.get(i))
            .copied()
    }

    /// Every cell with its bin.
    pub(crate) fn iter(&self) -> impl Iterator<Item = (usize, Cell)> + '_ {
        self.cells
            .iter()
            .enumerate()
            .map(|(i, &c)| (self.first + i, c))
    }

    /// Bins twice as wide: bin `b` becomes `b / 2`, its counters added to its neighbour's.
    pub(crate) fn widen(&mut self) {
        if self.cells.is_empty() {
            return;
        }
        let first = self.first / 2;
        let mut out: Vec<Cell> = Vec::with_capacity(self.cells.len() / 2 + 1);
        for (b, c) in self.iter() {
            let i = b / 2 - first;
            if out.len() <= i {
                out.resize(i + 1, (0, 0, 0));
            }
            let o = &mut out[i];
            o.0 += c.0;
            o.1 += c.1;
            o.2 += c.2;
        }
        self.first = first;
        self.cells = out;
    }
}

/// The aggregate series and the width of every bin.
#[derive(Debug)]
pub(crate) struct Series {
    /// The width asked, ns (0: no series).
    pub(crate) asked_ns: i64,
    /// The width now, ns: the one asked, doubled each time the series had to shrink.
    pub(crate) width_ns: i64,
    /// The sum over every connection, from bin 0.
    pub(crate) total: Bins,
    /// Cells of the per-connection series held now.
    pub(crate) held_cells: usize,
}

impl Series {
    /// A series of bins `bin_ns` wide (0: none).
    pub(crate) fn new(bin_ns: i64) -> Series {
        Series {
            asked_ns: bin_ns,
            width_ns: bin_ns,
            total: Bins::default(),
            held_cells: 0,
        }
    }

    /// True when a series was asked for.
    pub(crate) fn on(&self) -> bool {
        self.asked_ns > 0
    }

    /// The bin of a packet `since_first_ns` after the capture's first one, at the current
    /// width; `None` without a series or before the first packet.
    pub(crate) fn bin(&self, since_first_ns: i64) -> Option<usize> {
        (self.on() && since_first_ns >= 0).then(|| (since_first_ns / self.width_ns) as usize)
    }

    /// True when the aggregate would pass [`MAX_BINS`] at bin `bin`, or the per-connection
    /// series of `series` connections hold too many cells: time to [`Series::widen`].
    pub(crate) fn too_big(&self, bin: usize, series: usize) -> bool {
        bin >= MAX_BINS || self.held_cells > MAX_HELD_CELLS + 2 * series
    }

    /// Doubles the width of the aggregate (the caller widens every per-connection series
    /// and recounts [`Series::held_cells`]).
    pub(crate) fn widen(&mut self) {
        self.width_ns = self.width_ns.saturating_mul(2);
        self.total.widen();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn widening_adds_neighbours_and_keeps_every_byte() {
        let mut b = Bins::default();
        for (bin, v) in [(3, 1), (4, 2), (5, 4), (8, 8)] {
            let (c, _) = b.cell(bin);
            c.0 += v;
            c.1 += v;
        }
        assert_eq!(b.len(), 6);
        b.widen();
        let cells: Vec<(usize, Cell)> = b.iter().collect();
        assert_eq!(
            cells,
            vec![
                (1, (1, 1, 0)),
                (2, (6, 6, 0)),
                (3, (0, 0, 0)),
                (4, (8, 8, 0))
            ]
        );
        assert_eq!(b.get(2), Some((6, 6, 0)));
        assert_eq!(b.get(0), None);
        b.widen();
        assert_eq!(b.iter().map(|(_, c)| c.0).sum::<u64>(), 15);
        assert_eq!(b.len(), 3);
        let (_, added) = b.cell(9);
        assert_eq!(added, 7);
    }
}
