//! Held events of one key and one stream, stored by column (semantics section 6's WES):
//! kept sorted by time so a time range is two binary searches, purged from the front
//! as the key's floor passes, with no Python object per event.
//!
//! Each event's values sit in a row of `width` slots (slot 0 is `ts`; a stream's
//! columns get slots as they are first seen); its `shape` says which data columns it
//! has, in order, for `SELECT *`. The attribute mask of an event (the queries its own
//! attribute predicates fail) is cached with the version of the stream's lists it was
//! computed under.

use crate::value::V;

/// Where an event came from, opaque here: the bindings encode Python positions.
pub type Pos = (u32, i64);

/// What is kept per held event besides its values (24 bytes: `ts` is read from slot
/// 0 of the values, not kept twice).
#[derive(Clone, Copy, Debug)]
pub struct Row {
    /// Arrival number: results sort by it, and history sees only earlier partners.
    pub seq: u64,
    pub pos_offset: i64,
    pub pos_tag: u32,
    /// The shape id, and in the top bit whether the cached attribute mask is valid.
    shape: u32,
}

const CACHED: u32 = 1 << 31;

/// Four vectors per key and stream (rows, values, cached masks, value indexes), so a
/// key with few events costs little.
#[derive(Clone, Debug, Default)]
pub struct Store {
    head: usize,
    pub rows: Vec<Row>,
    /// Row-major values, `width` per event; slot 0 is the event's `ts`.
    pub vals: Vec<V>,
    pub width: usize,
    /// Cached attribute masks, `cache_words` per event, valid where the row says so
    /// and only under the stream's list version `cache_version`.
    cache: Vec<u64>,
    pub cache_words: usize,
    cache_version: u32,
    /// JES: value indexes over joined columns, made on first probe.
    pub indexes: Vec<ValueIndex>,
    /// Whether an event of this stream ever arrived for the key.
    pub seen: bool,
}

/// A joined column's held values in order (semantics 6's JES), each with the event's
/// index in the store (kept right as inserts and compaction move events), in two
/// vectors so an entry costs 12 bytes. Entries of purged events stay until the store
/// compacts; probes skip them by time.
#[derive(Clone, Debug, Default)]
pub struct ValueIndex {
    pub slot: usize,
    keys: Vec<f64>,
    at: Vec<u32>,
}

/// A bound on a partner's value in `slot`: `lo <= v <= hi`.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Bound {
    pub slot: usize,
    pub lo: f64,
    pub hi: f64,
}

/// Necessary conditions for an event to be of use to some queries, checked on each
/// index entry a probe visits (so an event only the loosest or widest of the probed
/// queries could use is not retrieved): its ts in [tlo, thi], and its value within
/// each bound. A value that is no number (no `index_key`) meets no bound: it
/// satisfies no range predicate.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Sieve {
    /// In 64 bits, as a ts is (see `Sieve::new`): compared with every entry visited.
    pub tlo: i64,
    pub thi: i64,
    /// Its bounds: a run in the vector of bounds its sieves share (a vector per sieve
    /// was a heap block to take, fill and give back for each of a retrieval's
    /// sieves, and one more to read per sieve an entry is checked against).
    pub bounds: std::ops::Range<usize>,
}

impl Sieve {
    /// The sieve of times [tlo, thi] (empty when tlo > thi): the part of the range a
    /// ts can hold, or, when it holds none, a range empty in 64 bits too.
    pub fn new(tlo: i128, thi: i128, bounds: std::ops::Range<usize>) -> Self {
        let (min, max) = (i64::MIN as i128, i64::MAX as i128);
        let (tlo, thi) = if tlo > thi || tlo > max || thi < min {
            (i64::MAX, i64::MIN)
        } else {
            (tlo.max(min) as i64, thi.min(max) as i64)
        };
        Sieve { tlo, thi, bounds }
    }
}

/// A value's place in a value index: doubles as they are, ints beyond 64 bits nearly
/// (probes widen their ranges far beyond that rounding); other types satisfy no
/// range predicate and are left out.
fn index_key(v: &V) -> Option<f64> {
    match v {
        V::X(text) => text.parse::<f64>().ok(),
        other => other.as_f64(),
    }
}

/// How many of the sorted `keys` are below `v` (not above it, with `inclusive`): what
/// a binary search answers, found from where `v` would sit were the keys spread
/// evenly from the first to the last (column values are near that), then galloping
/// to the exact place. A retrieval sizes a few hundred candidate probes per event
/// over indexes of about a thousand entries: a binary search is ten dependent loads,
/// this a few in one or two cache lines (and at most twice the binary search's
/// steps when the values are skewed).
fn count_below(keys: &[f64], v: f64, inclusive: bool) -> usize {
    let below = |k: f64| if inclusive { k <= v } else { k < v };
    let n = keys.len();
    if n < 16 {
        return keys.partition_point(|&k| below(k));
    }
    let (first, last) = (keys[0], keys[n - 1]);
    if !below(first) {
        return 0;
    }
    if below(last) {
        return n;
    }
    // The answer is in 1..n: keys[0] is below, keys[n - 1] is not, so first < last.
    // The cast saturates (and takes NaN, from infinite keys, to 0).
    let guess = (((v - first) / (last - first)) * (n - 1) as f64) as usize;
    let guess = guess.clamp(1, n - 1);
    // Narrow [lo, hi] around the answer, keys[hi] not below, in steps doubling away
    // from the guess.
    let (mut lo, mut hi) = (1, n - 1);
    let mut step = 1;
    if below(keys[guess]) {
        lo = guess + 1;
        while guess + step < n - 1 {
            if !below(keys[guess + step]) {
                hi = guess + step;
                break;
            }
            lo = guess + step + 1;
            step *= 2;
        }
    } else {
        hi = guess;
        while step < guess {
            if below(keys[guess - step]) {
                lo = guess - step + 1;
                break;
            }
            hi = guess - step;
            step *= 2;
        }
    }
    lo + keys[lo..hi].partition_point(|&k| below(k))
}

/// How many entries or partners ahead of the one being read the next are prefetched.
pub const AHEAD: usize = 4;

fn prefetch<T>(at: &T) {
    #[cfg(target_arch = "x86_64")]
    // SAFETY: a prefetch is a hint; it reads nothing and faults on no address.
    unsafe {
        use std::arch::x86_64::{_MM_HINT_T0, _mm_prefetch};
        _mm_prefetch::<_MM_HINT_T0>((at as *const T).cast());
    }
}

/// Room for `extra` more elements, growing by an eighth rather than doubling: held
/// events are most of the state, and a doubled vector is half empty after growing.
fn room<T>(v: &mut Vec<T>, extra: usize) {
    if v.len() + extra > v.capacity() {
        v.reserve_exact(extra.max(v.len() / 8 + 4));
    }
}

impl Store {
    pub fn len(&self) -> usize {
        self.rows.len() - self.head
    }

    pub fn ts(&self, i: usize) -> i64 {
        match self.vals[i * self.width] {
            V::I(ts) => ts,
            _ => unreachable!("slot 0 holds the event's ts"),
        }
    }

    pub fn seq(&self, i: usize) -> u64 {
        self.rows[i].seq
    }

    pub fn pos(&self, i: usize) -> Pos {
        (self.rows[i].pos_tag, self.rows[i].pos_offset)
    }

    pub fn shape(&self, i: usize) -> u32 {
        self.rows[i].shape & !CACHED
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The first held index whose ts is not below `lo` (nor equal to it, with
    /// `past`): a binary search over slot 0 of the values.
    fn first(&self, lo: i128, past: bool) -> usize {
        // The first ts not below `lo + past`, searched in 64 bits as a ts is (i128
        // comparisons and `past` per step were 0.5% of the instructions of J n=100).
        let (mut a, mut b) = (self.head, self.rows.len());
        let Ok(lo) = i64::try_from((lo + past as i128).max(i64::MIN as i128)) else { return b };
        while a < b {
            let mid = (a + b) / 2;
            if self.ts(mid) < lo {
                a = mid + 1;
            } else {
                b = mid;
            }
        }
        a
    }

    /// Indices (absolute) of the events with lo <= ts <= hi (inlined: see
    /// `Operator::partner_ranges`).
    #[inline(always)]
    pub fn between(&self, lo: i128, hi: i128) -> std::ops::Range<usize> {
        let a = self.first(lo, false);
        a..self.first(hi, true).max(a)
    }

    /// Every held index, in time order.
    pub fn all(&self) -> std::ops::Range<usize> {
        self.head..self.rows.len()
    }

    pub fn value(&self, i: usize, slot: usize) -> &V {
        if slot < self.width { &self.vals[i * self.width + slot] } else { &V::Missing }
    }

    pub fn row(&self, i: usize) -> &[V] {
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
            self.vals.extend(std::iter::repeat_n(V::Missing, width - self.width));
        }
        self.width = width;
    }

    /// Resize the cached masks to `words` per event, invalidating them.
    pub fn set_cache_words(&mut self, words: usize) {
        if words != self.cache_words {
            self.cache_words = words;
            self.cache = vec![0; self.rows.len() * words];
            self.rows.iter_mut().for_each(|r| r.shape &= !CACHED);
        }
    }

    /// The cached attribute mask of event `i`, if computed under list `version`.
    pub fn cached(&self, i: usize, version: u32) -> Option<&[u64]> {
        let w = self.cache_words;
        (self.cache_version == version && self.rows[i].shape & CACHED != 0).then(|| &self.cache[i * w..(i + 1) * w])
    }

    /// Cache event `i`'s attribute mask, computed under list `version` (a new version
    /// invalidates every other event's).
    pub fn set_cached(&mut self, i: usize, version: u32, mask: &[u64]) -> &[u64] {
        if self.cache_version != version {
            self.cache_version = version;
            self.rows.iter_mut().for_each(|r| r.shape &= !CACHED);
        }
        let w = self.cache_words;
        self.cache[i * w..(i + 1) * w].copy_from_slice(mask);
        self.rows[i].shape |= CACHED;
        &self.cache[i * w..(i + 1) * w]
    }

    /// Insert an event at its place in time order (after every event with the same
    /// ts), returning its index. Values must have `width` slots, `ts` in slot 0.
    pub fn insert(&mut self, seq: u64, pos: Pos, shape: u32, row: Vec<V>) -> usize {
        debug_assert_eq!(row.len(), self.width);
        debug_assert!(shape & CACHED == 0, "shape ids stay below 2^31");
        let V::I(ts) = row[0] else { unreachable!("slot 0 holds the event's ts") };
        self.seen = true;
        let i = self.first(ts as i128, true);
        let moved = i < self.rows.len();
        room(&mut self.rows, 1);
        self.rows.insert(i, Row { seq, pos_offset: pos.1, pos_tag: pos.0, shape });
        let at = i * self.width;
        room(&mut self.vals, self.width);
        self.vals.splice(at..at, row);
        let at = i * self.cache_words;
        room(&mut self.cache, self.cache_words);
        self.cache.splice(at..at, std::iter::repeat_n(0, self.cache_words));
        for x in &mut self.indexes {
            if moved {
                x.at.iter_mut().filter(|e| **e as usize >= i).for_each(|e| *e += 1);
            }
            if let Some(v) = index_key(&self.vals[i * self.width + x.slot]) {
                let p = count_below(&x.keys, v, false);
                room(&mut x.keys, 1);
                room(&mut x.at, 1);
                x.keys.insert(p, v);
                x.at.insert(p, i as u32);
            }
        }
        i
    }

    /// Bytes this store holds: the struct and its vectors' capacity.
    pub fn bytes(&self) -> usize {
        use std::mem::size_of;
        size_of::<Self>()
            + self.rows.capacity() * size_of::<Row>()
            + self.vals.capacity() * size_of::<V>()
            + self.vals.iter().map(|v| match v {
                V::S(s) | V::X(s) => size_of::<String>() + s.capacity(),
                _ => 0,
            }).sum::<usize>()
            + self.cache.capacity() * size_of::<u64>()
            + self.indexes.capacity() * size_of::<ValueIndex>()
            + self.indexes.iter().map(|x| x.keys.capacity() * size_of::<f64>() + x.at.capacity() * size_of::<u32>()).sum::<usize>()
    }

    /// The value index of `slot`, made from the held events if there is none.
    pub fn index(&mut self, slot: usize) -> usize {
        if let Some(i) = self.indexes.iter().position(|x| x.slot == slot) {
            return i;
        }
        let mut entries: Vec<(f64, u32)> =
            self.all().filter_map(|i| index_key(self.value(i, slot)).map(|v| (v, i as u32))).collect();
        entries.sort_by(|a, b| a.0.total_cmp(&b.0));
        let (keys, at) = entries.into_iter().unzip();
        self.indexes.push(ValueIndex { slot, keys, at });
        self.indexes.len() - 1
    }

    /// The least and the greatest value in the value index over `slot`, if there is
    /// one and both are finite: every held event's number in `slot` lies between them
    /// (the index also keeps purged events until the store compacts, which only
    /// widens it).
    pub fn extent(&self, slot: usize) -> Option<(f64, f64)> {
        let x = self.indexes.iter().find(|x| x.slot == slot)?;
        let (&lo, &hi) = (x.keys.first()?, x.keys.last()?);
        (lo.is_finite() && hi.is_finite()).then_some((lo, hi))
    }

    /// The events at `entries` of index `x` (see `entries`), each as (store index, k)
    /// for every `sieves[k]` it meets, appended to `out`. `bounds`: the sieves'.
    pub fn probe(&self, x: usize, entries: std::ops::Range<usize>, sieves: &[Sieve], bounds: &[Bound],
                 out: &mut Vec<(usize, usize)>) {
        let at = &self.indexes[x].at[entries];
        for (p, &i) in at.iter().enumerate() {
            if let Some(&next) = at.get(p + AHEAD) {
                self.prefetch_values(next as usize);
            }
            if i as usize >= self.head {
                self.sift(i as usize, sieves, bounds, out);
            }
        }
    }

    /// Ask the cache for event `i`'s values: the entries a probe visits, and the
    /// partners a retrieval returns, are events spread over the store, each a cache
    /// miss when it is read.
    pub fn prefetch_values(&self, i: usize) {
        if let Some(v) = self.vals.get(i * self.width) {
            prefetch(v);
        }
    }

    /// Ask the cache for what filtering partner `i` reads besides its values: its row
    /// and its cached attribute mask.
    pub fn prefetch_partner(&self, i: usize) {
        if let Some(row) = self.rows.get(i) {
            prefetch(row);
        }
        // each cache line of the mask (eight words)
        for w in (0..self.cache_words).step_by(8) {
            if let Some(word) = self.cache.get(i * self.cache_words + w) {
                prefetch(word);
            }
        }
        self.prefetch_values(i);
    }

    /// Append (i, k) to `out` for every `sieves[k]` event `i` meets: its ts and every
    /// bounded value in range. `bounds`: the sieves'. Inlined into each loop over
    /// entries: a call per entry, saving and restoring registers, was 4% of the
    /// instructions of J n=100.
    #[inline(always)]
    pub fn sift(&self, i: usize, sieves: &[Sieve], bounds: &[Bound], out: &mut Vec<(usize, usize)>) {
        // the row sliced once: no bounds check of the values per sieve and bound
        let row = self.row(i);
        let V::I(ts) = row[0] else { unreachable!("slot 0 holds the event's ts") };
        for (k, sieve) in sieves.iter().enumerate() {
            if sieve.tlo <= ts
                && ts <= sieve.thi
                && bounds[sieve.bounds.clone()]
                    .iter()
                    .all(|b| row.get(b.slot).and_then(index_key).is_some_and(|v| b.lo <= v && v <= b.hi))
            {
                out.push((i, k));
            }
        }
    }

    /// The positions in index `x` of the entries whose values lie in [vlo, vhi]: what
    /// a probe of that range visits. An infinite end takes in every entry on its side
    /// without a search (numbers are never NaN, semantics section 1).
    pub fn entries(&self, x: usize, vlo: f64, vhi: f64) -> std::ops::Range<usize> {
        let keys = &self.indexes[x].keys;
        let a = if vlo == f64::NEG_INFINITY { 0 } else { count_below(keys, vlo, false) };
        a..if vhi == f64::INFINITY { keys.len() } else { count_below(keys, vhi, true) }.max(a)
    }

    /// Drop the events below `floor` (the key's floor: no result can use them). They
    /// leave the vectors once they are an eighth of them (amortized, a few rows moved
    /// per event), and the vectors give back what they no longer need: a key with few
    /// events must not keep every event it ever had.
    pub fn purge(&mut self, floor: i64) {
        self.head = self.first(floor as i128, false);
        if self.head > 0 && self.head * 8 >= self.rows.len() {
            let h = self.head;
            self.rows.drain(..h);
            self.vals.drain(..h * self.width);
            self.cache.drain(..h * self.cache_words);
            self.head = 0;
            for x in &mut self.indexes {
                let mut kept = 0;
                for p in 0..x.at.len() {
                    if x.at[p] as usize >= h {
                        x.keys[kept] = x.keys[p];
                        x.at[kept] = x.at[p] - h as u32;
                        kept += 1;
                    }
                }
                x.keys.truncate(kept);
                x.at.truncate(kept);
                shrink(&mut x.keys);
                shrink(&mut x.at);
            }
            shrink(&mut self.rows);
            shrink(&mut self.vals);
            shrink(&mut self.cache);
        }
    }
}

/// Give back capacity beyond a quarter over the length.
fn shrink<T>(v: &mut Vec<T>) {
    if v.capacity() > v.len() + v.len() / 4 + 4 {
        v.shrink_to(v.len() + v.len() / 8 + 4);
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
            s.insert(seq as u64, (0, seq as i64), 0, vec![V::I(ts)]);
        }
        assert_eq!(s.all().map(|i| s.ts(i)).collect::<Vec<_>>(), [5, 10, 20, 30, 30]);
        assert_eq!(s.all().map(|i| s.seq(i)).collect::<Vec<_>>(), [4, 0, 2, 1, 3]);
        assert_eq!(s.between(10, 29), 1..3);
        assert_eq!(s.between(31, 40), 5..5);
        // ranges reaching beyond 64 bits
        assert_eq!(s.between(-(1 << 100), 1 << 100), 0..5);
        assert_eq!(s.between(i64::MAX as i128 + 1, 1 << 100), 5..5);
        assert_eq!(s.between(-(1 << 100), i64::MIN as i128 - 1), 0..0);
        assert_eq!(s.between(-(1 << 100), 10), 0..2);
        s.widen(2);
        assert_eq!(s.value(2, 0), &V::I(20));
        assert_eq!(s.value(2, 1), &V::Missing);
        s.purge(20);
        assert_eq!(s.len(), 3);
        let left: Vec<i64> = s.between(0, 100).map(|i| s.ts(i)).collect();
        assert_eq!(left, [20, 30, 30]);
        s.purge(30); // compacts
        assert!(s.rows.capacity() <= s.rows.len() + s.rows.len() / 4 + 4, "purged rows are given back");
    }

    #[test]
    fn value_index_probes_find_events_after_inserts_and_compaction_move_them() {
        let mut s = Store { width: 2, ..Default::default() };
        for seq in 0..100u64 {
            let ts = seq as i64 * 10;
            s.insert(seq, (0, 0), 0, vec![V::I(ts), V::F((seq % 10) as f64)]);
        }
        let x = s.index(1);
        s.insert(100, (0, 0), 0, vec![V::I(55), V::F(3.0)]); // in the middle
        s.purge(500);
        s.purge(800); // compacts
        s.insert(101, (0, 0), 0, vec![V::I(2000), V::F(3.0)]);
        let mut found = Vec::new();
        let all = Sieve { tlo: 0, thi: 10_000, bounds: 0..0 };
        s.probe(x, s.entries(x, 3.0, 3.0), std::slice::from_ref(&all), &[], &mut found);
        let mut seqs: Vec<u64> = found.iter().map(|&(i, _)| s.seq(i)).collect();
        seqs.sort();
        assert_eq!(seqs, vec![83, 93, 101]);
        assert!(found.iter().all(|&(i, _)| s.value(i, 1) == &V::F(3.0)));
    }

    #[test]
    fn a_probe_returns_exactly_the_events_each_sieve_admits() {
        // slot 1: the indexed column; slot 2: another, missing on every seventh event
        let mut s = Store { width: 3, ..Default::default() };
        for seq in 0..300u64 {
            let other = if seq % 7 == 0 { V::Missing } else { V::I((seq * 37 % 100) as i64) };
            s.insert(seq, (0, 0), 0, vec![V::I((seq * 13 % 500) as i64), V::F((seq % 50) as f64), other]);
        }
        let x = s.index(1);
        let bound = |slot, lo, hi| Bound { slot, lo, hi };
        let bounds = [bound(2, 20.0, 60.0), bound(2, f64::NEG_INFINITY, 50.0), bound(1, 12.0, 12.0)];
        let sieves = [
            Sieve { tlo: 100, thi: 300, bounds: 0..0 },
            Sieve { tlo: 0, thi: 499, bounds: 0..1 },
            Sieve { tlo: 250, thi: 400, bounds: 1..3 },
            Sieve { tlo: 5, thi: 4, bounds: 3..3 },
        ];
        let mut found = Vec::new();
        let entries = s.entries(x, 10.0, 30.0);
        s.probe(x, entries.clone(), &sieves, &bounds, &mut found);
        found.sort();
        let in_range = |i: usize| matches!(s.value(i, 1), V::F(v) if (10.0..=30.0).contains(v));
        let meets = |i: usize, sieve: &Sieve| {
            let ts = s.ts(i);
            let value = |slot| match s.value(i, slot) {
                V::I(v) => Some(*v as f64),
                V::F(v) => Some(*v),
                _ => None,
            };
            sieve.tlo <= ts && ts <= sieve.thi
                && bounds[sieve.bounds.clone()].iter().all(|b| value(b.slot).is_some_and(|v| b.lo <= v && v <= b.hi))
        };
        let mut expected = Vec::new();
        for i in s.all().filter(|&i| in_range(i)) {
            expected.extend(sieves.iter().enumerate().filter(|(_, sv)| meets(i, sv)).map(|(k, _)| (i, k)));
        }
        expected.sort();
        assert_eq!(entries.len(), s.all().filter(|&i| in_range(i)).count());
        assert_eq!(found, expected);
        assert!((0..3).all(|k| found.iter().any(|f| f.1 == k)), "every live sieve admits some event");
    }

    #[test]
    fn a_sieve_in_64_bits_admits_the_same_ts_as_its_range() {
        let (min, max) = (i64::MIN as i128, i64::MAX as i128);
        let ranges = [
            (min - 5, max + 5),
            (min - 5, 3),
            (3, max + 5),
            (max + 1, max + 9),
            (min - 9, min - 1),
            (4, 3),
            (max, max),
        ];
        for (tlo, thi) in ranges {
            let sieve = Sieve::new(tlo, thi, 0..0);
            for ts in [i64::MIN, i64::MIN + 1, -1, 0, 3, 4, i64::MAX - 1, i64::MAX] {
                let admitted = sieve.tlo <= ts && ts <= sieve.thi;
                assert_eq!(admitted, tlo <= ts as i128 && ts as i128 <= thi, "[{tlo}, {thi}] ts {ts}");
            }
        }
    }

    #[test]
    fn counting_keys_below_a_value_agrees_with_a_binary_search_on_any_spread() {
        // even, skewed (squares), clustered with duplicates, and with infinite ends
        let even: Vec<f64> = (0..1000).map(|i| i as f64 * 0.1).collect();
        let skewed: Vec<f64> = (0..1000).map(|i| (i * i) as f64).collect();
        let clustered: Vec<f64> = (0..1000).map(|i| if i < 900 { (i / 100) as f64 } else { 1e6 + i as f64 }).collect();
        let mut infinite = even.clone();
        infinite[0] = f64::NEG_INFINITY;
        infinite[999] = f64::INFINITY;
        let short: Vec<f64> = (0..10).map(|i| i as f64).collect();
        for keys in [&even, &skewed, &clustered, &infinite, &short] {
            let mut values: Vec<f64> = keys.iter().flat_map(|&k| [k, k - 0.05, k + 0.05, k * 1.5]).collect();
            values.extend([f64::NEG_INFINITY, f64::INFINITY, -1.0, 1e9]);
            for v in values {
                for inclusive in [false, true] {
                    let expected = keys.partition_point(|&k| if inclusive { k <= v } else { k < v });
                    assert_eq!(count_below(keys, v, inclusive), expected, "v {v} inclusive {inclusive}");
                }
            }
        }
    }
}
