//! The state seen from outside: the lists and held events described, its size,
//! and a key's snapshot and restore.

use super::*;

impl KeyState {
    /// The held event a result takes from stream `s`: its store and index.
    pub fn event_of(&self, hit: &Hit, s: u32) -> (&Store, usize) {
        let &(_, i) = hit.refs.iter().find(|(ps, _)| *ps == s).unwrap();
        (&self.stores[s as usize], i)
    }
}

impl Operator {
    /// Reinstate a key's bounds from a snapshot; its held events follow (`restore`).
    pub fn restore_key(&mut self, key: &str, maxts: Option<i64>, floor: Option<i64>) {
        let ks = self.keys.entry(key.into()).or_default();
        ks.maxts = maxts;
        ks.floor = floor;
    }

    /// Reinstate a held event of a key `restore_key` made, without evaluating it: its
    /// results were emitted before the snapshot.
    pub fn restore(&mut self, ev: Incoming) {
        let key = ev.key;
        let mut ks = std::mem::take(self.keys.get_mut(key).expect("restore_key comes first"));
        self.insert(&mut ks, ev);
        *self.keys.get_mut(key).unwrap() = ks;
    }

    /// Every predicate list: its family (0 upper, 1 lower, 2 equality), the (stream,
    /// slot) of its left side and of its right side (None for an attribute list), its
    /// factor, and how many predicates share it (thesis Figures 3.10-3.12).
    pub fn lists(&self) -> Vec<ListDesc> {
        let mut out: Vec<_> = self
            .list_of
            .iter()
            .map(|(key, list)| {
                let (entries, factor) = match *list {
                    ListRef::Range(i) => (self.ranges[i].len(), self.ranges[i].factor),
                    ListRef::Eq(i) => (self.eqs[i].len(), self.eqs[i].factor),
                };
                (key.family, key.l, key.r, factor.map(|f| f.f), entries)
            })
            .filter(|l| l.4 > 0)
            .collect();
        out.sort_by(|a, b| (a.0, a.1, a.2).cmp(&(b.0, b.1, b.2)).then(a.3.unwrap_or(0.0).total_cmp(&b.3.unwrap_or(0.0))));
        out
    }

    /// Held events per stream id, over all keys (None for a stream no event of any
    /// key arrived on).
    pub fn held(&self) -> Vec<Option<usize>> {
        let mut counts: Vec<Option<usize>> = Vec::new();
        for ks in self.keys.values() {
            for (s, store) in ks.stores.iter().enumerate().filter(|(_, st)| st.seen) {
                if counts.len() <= s {
                    counts.resize(s + 1, None);
                }
                *counts[s].get_or_insert(0) += store.len();
            }
        }
        counts
    }

    /// Bytes of per-key state: each key's entry, its stores and their held events
    /// (what memory per key and per held event are computed from).
    pub fn state_bytes(&self) -> usize {
        use std::mem::size_of;
        self.keys.capacity() * (size_of::<Box<str>>() + size_of::<KeyState>())
            + self.keys.iter().map(|(k, ks)| {
                k.len() + ks.stores.capacity() * size_of::<Store>()
                    + ks.stores.iter().map(|s| s.bytes() - size_of::<Store>()).sum::<usize>()
            }).sum::<usize>()
    }

    /// Bytes the registered queries take: the lists, the MAXWINDOW classes, the plan
    /// nodes and what is kept per query (what memory per registered query is computed
    /// from; allocator overhead aside).
    pub fn registry_bytes(&self) -> usize {
        use std::mem::size_of;
        let map = |cap: usize, item: usize| cap * (1 + item);
        let per_bit = |p: &PerBit| p.runs.capacity() * 8 + p.items.capacity() * 4;
        let nodes: usize = self
            .nodes
            .iter()
            .map(|n| {
                size_of::<Node>()
                    + (n.mask.capacity() + n.ends.capacity() + n.windowed.capacity() + n.check_sets.sets.capacity()) * 8
                    + n.checks.capacity() * size_of::<Check>()
                    + map(n.check_at.capacity(), size_of::<(Check, u32)>())
                    + per_bit(&n.checks_of)
                    + per_bit(&n.attrs_of)
                    + n.own.runs.capacity() * 16
                    + n.own.windows.capacity() * size_of::<OwnWindow>()
                    + n.own.ranges.capacity() * size_of::<OwnRange>()
            })
            .sum();
        let queries: usize = self.queries.capacity() * size_of::<Option<Registered>>()
            + self
                .queries
                .iter()
                .flatten()
                .map(|q| q.streams.len() * 4 + q.lists.len() * size_of::<(ListRef, u32)>())
                .sum::<usize>();
        self.ranges.iter().map(|l| size_of::<RangeList>() + l.heap_bytes()).sum::<usize>()
            + self.eqs.iter().map(|l| size_of::<EqList>() + l.heap_bytes()).sum::<usize>()
            + map(self.list_of.capacity(), size_of::<(ListKey, ListRef)>())
            + (self.range_keys.capacity() + self.eq_keys.capacity()) * size_of::<ListKey>()
            + self.windows.heap_bytes()
            + self.window_heads.capacity() * 8
            + self.window_of.capacity() * 8
            + self.free_bits.capacity() * 8
            + self
                .streams
                .iter()
                .map(|i| i.attr.capacity() * 32 + map(i.attr_at.capacity(), 24) + i.free.capacity() * 4)
                .sum::<usize>()
            + nodes
            + queries
    }

    /// A key's held events (ts >= floor) in arrival order, as (stream, index).
    pub fn snapshot(&self, key: &str) -> Option<(&KeyState, Vec<(u32, usize)>)> {
        let ks = self.keys.get(key)?;
        let floor = ks.floor.unwrap_or(i64::MIN);
        let mut held: Vec<(u64, u32, usize)> = Vec::new();
        for (s, store) in ks.stores.iter().enumerate() {
            held.extend(store.all().filter(|&i| store.ts(i) >= floor).map(|i| (store.seq(i), s as u32, i)));
        }
        held.sort_unstable();
        Some((ks, held.into_iter().map(|(_, s, i)| (s, i)).collect()))
    }
}
