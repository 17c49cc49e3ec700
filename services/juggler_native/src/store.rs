//! Held events of one key and one stream, stored by column (DESIGN section 6's WES):
//! kept sorted by time so a time range is two binary searches, purged from the front
//! as the key's floor passes, with no Python object per event.
//!
//! Each event's values sit in a row of `width` slots (slot 0 is `ts`; a stream's
//! columns get slots as they are first seen); its `shape` says which data columns it
//! has, in order, for `SELECT *`. The attribute mask of an event (the queries its own
//! attribute predicates fail) is cached with the version of the stream's lists it was
//! computed under.

/// Where an event came from, opaque here: the bindings encode Python positions.
pub type Pos = (u32, i64);

#[derive(Clone, Debug, Default)]
pub struct Store {
    head: usize,
    pub ts: Vec<i64>,
    pub seq: Vec<u64>,
    pub pos: Vec<Pos>,
    pub shape: Vec<u32>,
    /// Row-major values, `width` per event.
    pub vals: Vec<crate::value::V>,
    pub width: usize,
    /// Cached attribute masks, `cache_words` per event, valid where `cache_version`
    /// equals the stream's version.
    pub cache: Vec<u64>,
    pub cache_version: Vec<u32>,
    pub cache_words: usize,
}

impl Store {
    pub fn len(&self) -> usize {
        self.ts.len() - self.head
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Indices (absolute) of the events with lo <= ts <= hi.
    pub fn between(&self, lo: i128, hi: i128) -> std::ops::Range<usize> {
        let ts = &self.ts[self.head..];
        let a = ts.partition_point(|&t| (t as i128) < lo);
        let b = ts.partition_point(|&t| (t as i128) <= hi);
        self.head + a..self.head + b.max(a)
    }

    /// Every held index, in time order.
    pub fn all(&self) -> std::ops::Range<usize> {
        self.head..self.ts.len()
    }

    pub fn value(&self, i: usize, slot: usize) -> &crate::value::V {
        if slot < self.width { &self.vals[i * self.width + slot] } else { &crate::value::V::Missing }
    }

    pub fn row(&self, i: usize) -> &[crate::value::V] {
        &self.vals[i * self.width..(i + 1) * self.width]
    }

    /// Widen every row to `width` slots (a column seen for the first time).
    pub fn widen(&mut self, width: usize) {
        if width <= self.width {
            return;
        }
        let old = std::mem::take(&mut self.vals);
        let n = self.ts.len();
        self.vals = Vec::with_capacity(n * width);
        for i in 0..n {
            self.vals.extend_from_slice(&old[i * self.width..(i + 1) * self.width]);
            self.vals.extend(std::iter::repeat_n(crate::value::V::Missing, width - self.width));
        }
        self.width = width;
    }

    /// Resize the cached masks to `words` per event, invalidating them.
    pub fn set_cache_words(&mut self, words: usize) {
        if words != self.cache_words {
            self.cache_words = words;
            self.cache = vec![0; self.ts.len() * words];
            self.cache_version.iter_mut().for_each(|v| *v = u32::MAX);
        }
    }

    /// Insert an event at its place in time order (after every event with the same
    /// ts), returning its index. Values must have `width` slots.
    pub fn insert(&mut self, ts: i64, seq: u64, pos: Pos, shape: u32, row: Vec<crate::value::V>) -> usize {
        debug_assert_eq!(row.len(), self.width);
        let i = self.head + self.ts[self.head..].partition_point(|&t| t <= ts);
        if i == self.ts.len() {
            self.ts.push(ts);
            self.seq.push(seq);
            self.pos.push(pos);
            self.shape.push(shape);
            self.vals.extend(row);
            self.cache.extend(std::iter::repeat_n(0, self.cache_words));
            self.cache_version.push(u32::MAX);
        } else {
            self.ts.insert(i, ts);
            self.seq.insert(i, seq);
            self.pos.insert(i, pos);
            self.shape.insert(i, shape);
            let at = i * self.width;
            self.vals.splice(at..at, row);
            let at = i * self.cache_words;
            self.cache.splice(at..at, std::iter::repeat_n(0, self.cache_words));
            self.cache_version.insert(i, u32::MAX);
        }
        i
    }

    /// Drop the events below `floor` (the key's floor: no result can use them), and
    /// compact once the dropped prefix is as large as what is left.
    pub fn purge(&mut self, floor: i64) {
        let dropped = self.ts[self.head..].partition_point(|&t| t < floor);
        self.head += dropped;
        if self.head > 64 && self.head >= self.len() {
            let h = self.head;
            self.ts.drain(..h);
            self.seq.drain(..h);
            self.pos.drain(..h);
            self.shape.drain(..h);
            self.vals.drain(..h * self.width);
            self.cache.drain(..h * self.cache_words);
            self.cache_version.drain(..h);
            self.head = 0;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::value::V;

    #[test]
    fn events_stay_in_time_order_and_purge_from_the_front() {
        let mut s = Store { width: 1, ..Default::default() };
        for (seq, ts) in [10, 30, 20, 30, 5].into_iter().enumerate() {
            s.insert(ts, seq as u64, (0, seq as i64), 0, vec![V::I(ts)]);
        }
        assert_eq!(&s.ts[s.all()], &[5, 10, 20, 30, 30]);
        assert_eq!(&s.seq[s.all()], &[4, 0, 2, 1, 3]);
        assert_eq!(s.between(10, 29), 1..3);
        assert_eq!(s.between(31, 40), 5..5);
        s.widen(2);
        assert_eq!(s.value(2, 0), &V::I(20));
        assert_eq!(s.value(2, 1), &V::Missing);
        s.purge(20);
        assert_eq!(s.len(), 3);
        assert_eq!(s.between(0, 100), 2..5);
    }
}
