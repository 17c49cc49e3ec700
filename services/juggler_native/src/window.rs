//! The MAXWINDOW table: which queries a combination spanning `span` ms fails.
//!
//! Built from `SharedPredicates.window_bounds` (the registered MAXWINDOW values,
//! sorted) and `.narrower_than` (for each position, the queries whose MAXWINDOW lies
//! below it).

use crate::bisect::bisect_left;

#[derive(Clone, Debug, Default)]
pub struct WindowTable {
    /// The registered MAXWINDOW values, ascending.
    pub bounds: Vec<i128>,
    /// `narrower_than[i]`: the queries whose MAXWINDOW is one of `bounds[..i]`.
    pub narrower_than: Vec<Vec<u64>>,
}

impl WindowTable {
    /// Queries whose MAXWINDOW is smaller than `span`.
    pub fn too_narrow(&self, span: i128) -> &[u64] {
        &self.narrower_than[bisect_left(&self.bounds, &span, 0)]
    }
}

/// `max(maxts, ts) - min(mints, ts)`: how far apart a partial combination's events are
/// once an event at `ts` joins it (exact: three i64 give an i128 difference).
pub fn span(mints: i64, maxts: i64, ts: i64) -> i128 {
    maxts.max(ts) as i128 - mints.min(ts) as i128
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_span_fails_the_queries_with_a_smaller_maxwindow() {
        // queries 0 and 1: MAXWINDOW 100; query 2: 1000
        let table =
            WindowTable { bounds: vec![100, 1000], narrower_than: vec![vec![], vec![0b011], vec![0b111]] };
        assert_eq!(table.too_narrow(0), &[] as &[u64]);
        assert_eq!(table.too_narrow(100), &[] as &[u64]);
        assert_eq!(table.too_narrow(101), &[0b011]);
        assert_eq!(table.too_narrow(1000), &[0b011]);
        assert_eq!(table.too_narrow(1001), &[0b111]);
    }

    #[test]
    fn spans_are_exact_over_the_whole_long_range() {
        assert_eq!(span(5, 10, 7), 5);
        assert_eq!(span(5, 10, 2), 8);
        assert_eq!(span(5, 10, 12), 7);
        assert_eq!(span(i64::MIN, i64::MAX, 0), (1i128 << 64) - 1);
    }
}
