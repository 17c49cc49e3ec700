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

/// What is kept per held event besides its values.
#[derive(Clone, Copy, Debug)]
pub struct Row {
    pub ts: i64,
    /// Arrival number: results sort by it, and history sees only earlier partners.
    pub seq: u64,
    pub pos_offset: i64,
    pub pos_tag: u32,
    pub shape: u32,
    /// The stream's list version the cached attribute mask was computed under.
    pub cache_version: u32,
}

/// Four vectors per key and stream (rows, values, cached masks, value indexes), so a
/// key with few events costs little.
#[derive(Clone, Debug, Default)]
pub struct Store {
    head: usize,
    pub rows: Vec<Row>,
    /// Row-major values, `width` per event.
    pub vals: Vec<crate::value::V>,
    pub width: usize,
    /// Cached attribute masks, `cache_words` per event, valid where the row's
    /// `cache_version` equals the stream's version.
    pub cache: Vec<u64>,
    pub cache_words: usize,
    /// JES: value indexes over joined columns, made on first probe.
    pub indexes: Vec<ValueIndex>,
    /// Whether an event of this stream ever arrived for the key.
    pub seen: bool,
}

/// A joined column's held values in order (DESIGN 6's JES), each with the event's
/// index in the store (kept right as inserts and compaction move events). Entries of
/// purged events stay until the store compacts; probes skip them by time.
#[derive(Clone, Debug, Default)]
pub struct ValueIndex {
    pub slot: usize,
    pub entries: Vec<(f64, usize)>,
}

/// A value's place in a value index: doubles as they are, ints beyond 64 bits nearly
/// (probes widen their ranges far beyond that rounding); other types satisfy no
/// range predicate and are left out.
fn index_key(v: &crate::value::V) -> Option<f64> {
    match v {
        crate::value::V::X(text) => text.parse::<f64>().ok(),
        other => other.as_f64(),
    }
}

impl Store {
    pub fn len(&self) -> usize {
        self.rows.len() - self.head
    }

    pub fn ts(&self, i: usize) -> i64 {
        self.rows[i].ts
    }

    pub fn seq(&self, i: usize) -> u64 {
        self.rows[i].seq
    }

    pub fn pos(&self, i: usize) -> Pos {
        (self.rows[i].pos_tag, self.rows[i].pos_offset)
    }

    pub fn shape(&self, i: usize) -> u32 {
        self.rows[i].shape
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Indices (absolute) of the events with lo <= ts <= hi.
    pub fn between(&self, lo: i128, hi: i128) -> std::ops::Range<usize> {
        let rows = &self.rows[self.head..];
        let a = rows.partition_point(|r| (r.ts as i128) < lo);
        let b = rows.partition_point(|r| (r.ts as i128) <= hi);
        self.head + a..self.head + b.max(a)
    }

    /// Every held index, in time order.
    pub fn all(&self) -> std::ops::Range<usize> {
        self.head..self.rows.len()
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
        let n = self.rows.len();
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
            self.cache = vec![0; self.rows.len() * words];
            self.rows.iter_mut().for_each(|r| r.cache_version = u32::MAX);
        }
    }

    /// Insert an event at its place in time order (after every event with the same
    /// ts), returning its index. Values must have `width` slots.
    pub fn insert(&mut self, ts: i64, seq: u64, pos: Pos, shape: u32, row: Vec<crate::value::V>) -> usize {
        debug_assert_eq!(row.len(), self.width);
        self.seen = true;
        let i = self.head + self.rows[self.head..].partition_point(|r| r.ts <= ts);
        let meta = Row { ts, seq, pos_offset: pos.1, pos_tag: pos.0, shape, cache_version: u32::MAX };
        let moved = i < self.rows.len();
        self.rows.insert(i, meta);
        let at = i * self.width;
        self.vals.splice(at..at, row);
        let at = i * self.cache_words;
        self.cache.splice(at..at, std::iter::repeat_n(0, self.cache_words));
        for x in &mut self.indexes {
            if moved {
                x.entries.iter_mut().filter(|e| e.1 >= i).for_each(|e| e.1 += 1);
            }
            if let Some(v) = index_key(&self.vals[i * self.width + x.slot]) {
                let at = x.entries.partition_point(|e| e.0 < v);
                x.entries.insert(at, (v, i));
            }
        }
        i
    }

    /// Bytes this store holds: the struct and its vectors' capacity.
    pub fn bytes(&self) -> usize {
        use std::mem::size_of;
        size_of::<Self>()
            + self.rows.capacity() * size_of::<Row>()
            + self.vals.capacity() * size_of::<crate::value::V>()
            + self.vals.iter().map(|v| match v {
                crate::value::V::S(s) | crate::value::V::X(s) => size_of::<String>() + s.capacity(),
                _ => 0,
            }).sum::<usize>()
            + self.cache.capacity() * size_of::<u64>()
            + self.indexes.capacity() * size_of::<ValueIndex>()
            + self.indexes.iter().map(|x| x.entries.capacity() * size_of::<(f64, usize)>()).sum::<usize>()
    }

    /// The value index of `slot`, made from the held events if there is none.
    pub fn index(&mut self, slot: usize) -> usize {
        if let Some(i) = self.indexes.iter().position(|x| x.slot == slot) {
            return i;
        }
        let mut entries: Vec<(f64, usize)> =
            self.all().filter_map(|i| index_key(self.value(i, slot)).map(|v| (v, i))).collect();
        entries.sort_by(|a, b| a.0.total_cmp(&b.0));
        self.indexes.push(ValueIndex { slot, entries });
        self.indexes.len() - 1
    }

    /// Store indices of the events whose value in index `x` lies in [vlo, vhi] and
    /// whose ts lies in [tlo, thi], appended to `out`; returns the entries visited.
    pub fn probe(&self, x: usize, vlo: f64, vhi: f64, tlo: i128, thi: i128, out: &mut Vec<usize>) -> usize {
        let entries = &self.indexes[x].entries;
        let a = entries.partition_point(|e| e.0 < vlo);
        let b = entries.partition_point(|e| e.0 <= vhi).max(a);
        for &(_, i) in &entries[a..b] {
            let ts = self.rows[i].ts as i128;
            if i >= self.head && tlo <= ts && ts <= thi {
                out.push(i);
            }
        }
        b - a
    }

    /// How many index entries lie in [vlo, vhi] (what a probe would visit).
    pub fn count(&self, x: usize, vlo: f64, vhi: f64) -> usize {
        let entries = &self.indexes[x].entries;
        entries.partition_point(|e| e.0 <= vhi).saturating_sub(entries.partition_point(|e| e.0 < vlo))
    }

    /// Drop the events below `floor` (the key's floor: no result can use them). They
    /// leave the vectors once they are a quarter of them (amortized, a few rows moved
    /// per event), and the vectors give back what they no longer need: a key with few
    /// events must not keep every event it ever had.
    pub fn purge(&mut self, floor: i64) {
        let dropped = self.rows[self.head..].partition_point(|r| r.ts < floor);
        self.head += dropped;
        if self.head > 0 && self.head * 4 >= self.rows.len() {
            let h = self.head;
            self.rows.drain(..h);
            self.vals.drain(..h * self.width);
            self.cache.drain(..h * self.cache_words);
            self.head = 0;
            for x in &mut self.indexes {
                x.entries.retain(|e| e.1 >= h);
                x.entries.iter_mut().for_each(|e| e.1 -= h);
                shrink(&mut x.entries);
            }
            shrink(&mut self.rows);
            shrink(&mut self.vals);
            shrink(&mut self.cache);
        }
    }
}

/// Give back capacity beyond twice the length.
fn shrink<T>(v: &mut Vec<T>) {
    if v.capacity() > 2 * v.len() + 4 {
        v.shrink_to(v.len() + v.len() / 2 + 4);
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
        assert_eq!(s.all().map(|i| s.ts(i)).collect::<Vec<_>>(), [5, 10, 20, 30, 30]);
        assert_eq!(s.all().map(|i| s.seq(i)).collect::<Vec<_>>(), [4, 0, 2, 1, 3]);
        assert_eq!(s.between(10, 29), 1..3);
        assert_eq!(s.between(31, 40), 5..5);
        s.widen(2);
        assert_eq!(s.value(2, 0), &V::I(20));
        assert_eq!(s.value(2, 1), &V::Missing);
        s.purge(20);
        assert_eq!(s.len(), 3);
        let left: Vec<i64> = s.between(0, 100).map(|i| s.ts(i)).collect();
        assert_eq!(left, [20, 30, 30]);
        assert!(s.rows.capacity() <= 2 * s.rows.len() + 4, "purged rows are given back");
    }

    #[test]
    fn value_index_probes_find_events_after_inserts_and_compaction_move_them() {
        let mut s = Store { width: 2, ..Default::default() };
        for seq in 0..100u64 {
            let ts = seq as i64 * 10;
            s.insert(ts, seq, (0, 0), 0, vec![V::I(ts), V::F((seq % 10) as f64)]);
        }
        let x = s.index(1);
        s.insert(55, 100, (0, 0), 0, vec![V::I(55), V::F(3.0)]); // in the middle
        s.purge(500);
        s.purge(800); // compacts
        s.insert(2000, 101, (0, 0), 0, vec![V::I(2000), V::F(3.0)]);
        let mut found = Vec::new();
        s.probe(x, 3.0, 3.0, 0, 10_000, &mut found);
        let mut seqs: Vec<u64> = found.iter().map(|&i| s.seq(i)).collect();
        seqs.sort();
        assert_eq!(seqs, vec![83, 93, 101]);
        assert!(found.iter().all(|&i| s.value(i, 1) == &V::F(3.0)));
    }
}
