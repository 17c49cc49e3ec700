//! Registration: a query's predicates into the shared lists, its bits, its
//! MAXWINDOW, and deregistration that gives them back.

use super::*;

impl Operator {
    /// Add a query; returns its bit.
    pub fn register(&mut self, spec: QuerySpec) -> usize {
        self.register_many(vec![spec])[0]
    }

    /// Add queries (a restore, a burst of commands); returns their bits, in order.
    /// Enough of them at once (a quarter of what is registered, at least `BULK`) go in
    /// bulk: the lists take their entries unsorted and are sorted and cut once at the
    /// end, where one at a time each entry is placed as it comes.
    pub fn register_many(&mut self, specs: Vec<QuerySpec>) -> Vec<usize> {
        let bulk = specs.len() >= BULK && 4 * specs.len() >= self.registered;
        let bits: Vec<usize> = specs.iter().map(|_| self.free_bit()).collect();
        let need = bits.iter().max().map_or(0, |b| b / 64 + 1);
        if need > self.nw {
            self.grow(need.next_power_of_two());
        }
        for (spec, &bit) in specs.into_iter().zip(&bits) {
            self.add_query(spec, bit, bulk);
        }
        if bulk {
            self.settle();
        }
        bits
    }

    /// Make the registered queries `other`'s, `batch` (bits) the ones it registered
    /// last: what registering them here would have built, copied instead (every
    /// partition of a worker registers the same queries, so one builds and the others
    /// copy). Only for an operator whose registered queries, registered in the same
    /// order, were `other`'s before that batch: the caller keeps track. Keys and held
    /// events stay; the horizon widens to the batch's windows as registering does.
    pub fn copy_registry(&mut self, other: &Operator, batch: &[usize]) {
        for (s, &width) in other.widths.iter().enumerate() {
            self.widen(s as u32, width);
        }
        if other.nw != self.nw {
            for ks in self.keys.values_mut() {
                ks.stores.iter_mut().for_each(|s| s.set_cache_words(other.nw));
            }
        }
        self.horizon = batch.iter().map(|&b| other.window_of[b]).fold(self.horizon, i64::max);
        self.nw = other.nw;
        self.ranges.clone_from(&other.ranges);
        self.eqs.clone_from(&other.eqs);
        self.list_of.clone_from(&other.list_of);
        self.range_keys.clone_from(&other.range_keys);
        self.eq_keys.clone_from(&other.eq_keys);
        self.free_ranges.clone_from(&other.free_ranges);
        self.free_eqs.clone_from(&other.free_eqs);
        self.nodes.clone_from(&other.nodes);
        self.roots.clone_from(&other.roots);
        self.streams.clone_from(&other.streams);
        self.windows.clone_from(&other.windows);
        self.window_heads.clone_from(&other.window_heads);
        self.window_of.clone_from(&other.window_of);
        self.queries.clone_from(&other.queries);
        self.registered = other.registered;
        self.free_bits.clone_from(&other.free_bits);
        self.next_bit = other.next_bit;
        self.registrations = other.registrations;
        if self.scratch.len() < other.scratch.len() {
            self.scratch.resize_with(other.scratch.len(), Scratch::default);
        }
    }

    pub(super) fn free_bit(&mut self) -> usize {
        self.free_bits.pop().unwrap_or_else(|| {
            self.next_bit += 1;
            self.next_bit - 1
        })
    }

    pub(super) fn add_query(&mut self, spec: QuerySpec, bit: usize, bulk: bool) {
        let order = self.registrations;
        self.registrations += 1;
        self.horizon = self.horizon.max(spec.window);
        let lists: Vec<(ListRef, u32)> = spec.preds.iter().map(|pred| self.add_pred(pred, bit, bulk)).collect();
        self.add_window(spec.window, bit, bulk);
        self.add_paths(&spec, bit, &lists);
        for &s in &spec.streams {
            self.stream_mut(s).version += 1;
        }
        if self.queries.len() <= bit {
            self.queries.resize(bit + 1, None);
        }
        self.queries[bit] = Some(Registered { order, streams: spec.streams.into(), lists: lists.into() });
        self.registered += 1;
    }

    /// Sort into the lists and the MAXWINDOW classes what a bulk registration left
    /// waiting.
    pub(super) fn settle(&mut self) {
        let nw = self.nw;
        self.ranges.iter_mut().filter(|l| l.unsettled()).for_each(|l| l.settle(nw));
        self.eqs.iter_mut().filter(|l| l.unsettled()).for_each(|l| l.settle(nw));
        if self.windows.unsettled() {
            self.windows.settle(nw, window_order);
            self.window_heads();
        }
    }

    pub fn deregister(&mut self, bit: usize) {
        let Some(q) = self.queries.get_mut(bit).and_then(Option::take) else { return };
        self.registered -= 1;
        let b = bit as u32;
        for &(list, id) in q.lists.iter() {
            let empty = match list {
                ListRef::Range(i) => {
                    self.ranges[i].remove(id, b);
                    self.ranges[i].is_empty()
                }
                ListRef::Eq(i) => {
                    self.eqs[i].remove(id, b);
                    self.eqs[i].is_empty()
                }
            };
            if empty {
                self.drop_list(list);
            }
        }
        for node in &mut self.nodes {
            set(&mut node.mask, bit, false);
            set(&mut node.ends, bit, false);
            node.checks_of.put(bit, &[]);
            node.attrs_of.put(bit, &[]);
            node.check_sets.put(bit, &[]);
            if node.own.runs.len() > bit {
                node.own.put(bit, &[], &[]);
            }
        }
        let window = self.window_of[bit];
        let at = self.windows.search(|c| c.window < window);
        self.windows.take_bit(at, b);
        self.windows.fix_rows(b, None);
        self.window_heads();
        for &s in q.streams.iter() {
            self.stream_mut(s).version += 1;
        }
        self.free_bits.push(bit);
    }

    /// Forget a list left with no predicate: no event probes it, and its place goes to
    /// the next new list.
    pub(super) fn drop_list(&mut self, list: ListRef) {
        let key = match list {
            ListRef::Range(i) => self.range_keys[i],
            ListRef::Eq(i) => self.eq_keys[i],
        };
        if self.list_of.get(&key) != Some(&list) {
            return; // dropped already (a query with two predicates in it)
        }
        self.list_of.remove(&key);
        let info = self.stream_mut(key.l.0);
        if let Some(k) = info.attr_at.remove(&list) {
            info.attr[k as usize] = None;
            info.free.push(k);
        }
        match list {
            ListRef::Range(i) => {
                self.ranges[i] = RangeList::new(false, None, self.nw);
                self.free_ranges.push(i);
            }
            ListRef::Eq(i) => {
                self.eqs[i] = EqList::new(None, self.nw);
                self.free_eqs.push(i);
            }
        }
    }

    pub(super) fn grow(&mut self, nw: usize) {
        self.nw = nw;
        for node in &mut self.nodes {
            node.mask.resize(nw, 0);
            node.ends.resize(nw, 0);
        }
        self.ranges.iter_mut().for_each(|l| l.settle(nw));
        self.eqs.iter_mut().for_each(|l| l.settle(nw));
        self.windows.settle(nw, window_order);
        self.window_heads();
        for ks in self.keys.values_mut() {
            ks.stores.iter_mut().for_each(|s| s.set_cache_words(nw));
        }
    }

    /// The list predicates agreeing on `key` share, made on first use.
    pub(super) fn list(&mut self, key: ListKey, factor: Option<Factor>) -> ListRef {
        if let Some(&found) = self.list_of.get(&key) {
            return found;
        }
        let nw = self.nw;
        let list = if key.family == 2 {
            ListRef::Eq(place(&mut self.eqs, &mut self.eq_keys, &mut self.free_eqs, EqList::new(factor, nw), key))
        } else {
            let made = RangeList::new(key.family == 1, factor, nw);
            ListRef::Range(place(&mut self.ranges, &mut self.range_keys, &mut self.free_ranges, made, key))
        };
        self.list_of.insert(key, list);
        // Per-event lists: probed with the event's own attribute mask.
        if key.r.is_none_or(|r| r.0 == key.l.0) {
            let entry = Some((list, key.l.1, key.r.map(|r| r.1)));
            let info = self.stream_mut(key.l.0);
            let k = match info.free.pop() {
                Some(k) => {
                    info.attr[k as usize] = entry;
                    k
                }
                None => {
                    info.attr.push(entry);
                    info.attr.len() as u32 - 1
                }
            };
            info.attr_at.insert(list, k);
        }
        list
    }

    pub(super) fn add_pred(&mut self, pred: &PredSpec, bit: usize, bulk: bool) -> (ListRef, u32) {
        let b = bit as u32;
        let fkey = |f: &Factor| Some((f.f.to_bits(), f.int));
        match pred {
            PredSpec::Range { id, stream, slot, lower, tf, ti } | PredSpec::PairRange { id, l: (stream, slot), lower, tf, ti, .. } => {
                let (r, factor) = match pred {
                    PredSpec::PairRange { r, factor, .. } => (Some(*r), Some(*factor)),
                    _ => (None, None),
                };
                let key = ListKey { family: *lower as u8, l: (*stream, *slot), r, factor: factor.as_ref().and_then(fkey) };
                let list = self.list(key, factor);
                let ListRef::Range(i) = list else { unreachable!() };
                self.ranges[i].add(*id, *tf, *ti, b, bulk);
                (list, *id)
            }
            PredSpec::Eq { id, stream, slot, eq, constant } | PredSpec::PairEq { id, l: (stream, slot), eq, constant, .. } => {
                let (r, factor) = match pred {
                    PredSpec::PairEq { r, factor, .. } => (Some(*r), Some(*factor)),
                    _ => (None, None),
                };
                let key = ListKey { family: 2, l: (*stream, *slot), r, factor: factor.as_ref().and_then(fkey) };
                let list = self.list(key, factor);
                let ListRef::Eq(i) = list else { unreachable!() };
                self.eqs[i].add(*id, *eq, constant, b, bulk);
                (list, *id)
            }
        }
    }

    pub(super) fn add_window(&mut self, window: i64, bit: usize, bulk: bool) {
        if self.window_of.len() <= bit {
            self.window_of.resize(bit + 1, 0);
        }
        self.window_of[bit] = window;
        let (b, nw) = (bit as u32, self.nw);
        if bulk {
            self.windows.push(WindowClass { window, set: QSet::one(b, nw) });
            return;
        }
        let at = self.windows.search(|c| c.window < window);
        if at.0 < self.windows.blocks().len() && self.windows.entry(at).window == window {
            self.windows.add_bit(at, b);
        } else {
            self.windows.insert(at, WindowClass { window, set: QSet::one(b, nw) });
        }
        self.window_heads();
    }

    pub(super) fn window_heads(&mut self) {
        self.window_heads = self.windows.blocks().iter().map(|b| b.entries[0].window).collect();
    }
}
