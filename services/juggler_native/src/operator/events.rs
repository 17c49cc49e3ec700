//! The per-event path: an event's attribute mask, its store, the expansion along
//! the plan and the results it emits; and a new query's results over what is held.

use super::*;

impl Operator {
    /// The largest MAXWINDOW among `group`'s queries (State-Slice: a group of narrow
    /// queries does not retrieve what only a wider one could use).
    pub(super) fn widest(&self, group: &[u64]) -> i64 {
        self.windows.last_hit(group, &(0..group.len())).map_or(0, |at| self.windows.entry(at).window)
    }

    /// Clear in words `r` of `mask` the queries whose MAXWINDOW is below `span`;
    /// whether any query is left there.
    #[inline(always)]
    pub(super) fn clear_narrow(&self, span: i128, mask: &mut [u64], r: &Words) -> bool {
        let k0 = self.window_heads.partition_point(|&w| (w as i128) < span);
        let at = self.windows.locate(k0, |c| (c.window as i128) < span);
        self.windows.clear_before(at, mask, r)
    }


    /// The queries an event's own values fail: its attribute and in-event lists.
    pub(super) fn attr_fail(&self, stream: u32, row: &[V], out: &mut [u64], exact: &mut dyn Exact) {
        let Some(info) = self.streams.get(stream as usize) else { return };
        let value = |slot: usize| row.get(slot).unwrap_or(&V::Missing);
        let all = 0..out.len();
        for &(list, l, r) in info.attr.iter().flatten() {
            match (list, r) {
                (ListRef::Range(i), None) => self.ranges[i].attr_fail(value(l), out, &all, exact),
                (ListRef::Eq(i), None) => self.eqs[i].attr_fail(value(l), out, &all, exact),
                (ListRef::Range(i), Some(r)) => self.ranges[i].pair_fail(value(l), value(r), out, &all, exact),
                (ListRef::Eq(i), Some(r)) => self.eqs[i].pair_fail(value(l), value(r), out, &all, exact),
            }
        }
    }

    /// The held event's attribute mask, computed under the current lists if stale
    /// (inlined: see `RangeList::pair_fail`).
    #[inline(always)]
    pub(super) fn cached_fail<'a>(&self, store: &'a mut Store, stream: u32, i: usize, exact: &mut dyn Exact) -> &'a [u64] {
        let nw = self.nw;
        let version = self.streams.get(stream as usize).map_or(0, |s| s.version);
        if store.cache_words != nw {
            store.set_cache_words(nw);
        }
        if store.cached(i, version).is_none() {
            let mut out = vec![0; nw];
            self.attr_fail(stream, store.row(i), &mut out, exact);
            return store.set_cached(i, version, &out);
        }
        store.cached(i, version).unwrap()
    }

    /// Accept an event and return the results whose last event it is (semantics 3).
    pub fn process(&mut self, ev: Incoming, exact: &mut dyn Exact) -> Result<Vec<Hit>, Late> {
        if !self.keys.contains_key(ev.key) {
            self.keys.insert(ev.key.into(), KeyState::default());
        }
        // Taken out while it is evaluated (the operator is borrowed meanwhile) and put
        // back: no allocation per event.
        let slot = self.keys.get_mut(ev.key).unwrap();
        match slot.maxts {
            Some(m) if ev.ts < m.saturating_sub(self.lateness) => return Err(Late { maxts: m }),
            Some(m) if m >= ev.ts => {}
            _ => slot.maxts = Some(ev.ts),
        }
        let floor = slot.maxts.unwrap().saturating_sub(self.horizon).saturating_sub(self.lateness);
        if slot.floor.is_none_or(|f| floor > f) {
            slot.floor = Some(floor);
        }
        let floor = slot.floor.unwrap();
        let mut ks = std::mem::take(slot);
        for store in &mut ks.stores {
            store.purge(floor);
        }
        self.stats.events += 1;
        let seq = self.seq;
        let (stream, key) = (ev.stream, ev.key);
        let i = self.insert(&mut ks, ev);
        let mut out = Vec::new();
        if let Some(&root) = self.roots.get(&stream) {
            let mut mask = self.nodes[root].mask.clone();
            self.evaluate(&mut ks, stream, i, &mut mask, seq, true, exact, &mut out);
        }
        *self.keys.get_mut(key).unwrap() = ks;
        self.stats.results += out.len() as u64;
        Ok(out)
    }

    pub(super) fn insert(&mut self, ks: &mut KeyState, ev: Incoming) -> usize {
        let s = ev.stream as usize;
        if ks.stores.len() <= s {
            ks.stores.resize(s + 1, Store::default());
        }
        let width = self.widths.get(s).copied().unwrap_or(1);
        let store = &mut ks.stores[s];
        store.widen(width);
        store.set_cache_words(self.nw);
        let mut row = ev.row;
        row.resize(width, V::Missing);
        let seq = self.seq;
        self.seq += 1;
        store.insert(seq, ev.pos, ev.shape, row)
    }

    /// Results of the query with `bit` over the events already held, each from the
    /// event that arrived last (PSoup's query-data duality).
    pub fn history(&mut self, bit: usize, exact: &mut dyn Exact) -> Vec<(Box<str>, Hit)> {
        let Some(Some(q)) = self.queries.get(bit) else { return Vec::new() };
        let streams = q.streams.clone();
        let mut keys: Vec<Box<str>> = self.keys.keys().cloned().collect();
        keys.sort();
        let mut out = Vec::new();
        for key in keys {
            let mut ks = self.keys.remove(&key).unwrap();
            let floor = ks.floor.unwrap_or(i64::MIN);
            let mut held: Vec<(u64, u32, usize)> = Vec::new();
            for &s in &streams {
                if let Some(store) = ks.stores.get(s as usize) {
                    held.extend(store.all().filter(|&i| store.ts(i) >= floor).map(|i| (store.seq(i), s, i)));
                }
            }
            held.sort_unstable();
            let mut hits = Vec::new();
            for (seq, s, i) in held {
                let mut mask = vec![0; self.nw];
                set(&mut mask, bit, true);
                self.evaluate(&mut ks, s, i, &mut mask, seq, false, exact, &mut hits);
            }
            out.extend(hits.into_iter().map(|h| (key.clone(), h)));
            self.keys.insert(key, ks);
        }
        out
    }

    /// Evaluate a tuple under the current order: A first prunes the candidate queries
    /// by the tuple's attribute mask before any retrieval; otherwise that mask waits
    /// for the A phase of the tuple's first partners (and for its own single-stream
    /// results). `live`: an arriving event (sampled and counted by the predicate type
    /// manager), not a replay for a new query's history.
    #[allow(clippy::too_many_arguments)]
    pub(super) fn evaluate(&mut self, ks: &mut KeyState, stream: u32, i: usize, mask: &mut [u64], before: u64, live: bool,
                exact: &mut dyn Exact, out: &mut Vec<Hit>) {
        let Some(&root) = self.roots.get(&stream) else { return };
        let fail = self.cached_fail(&mut ks.stores[stream as usize], stream, i, exact).to_vec();
        for (m, n) in mask.iter_mut().zip(&self.nodes[root].mask) {
            *m &= n;
        }
        let mut stats = self.stats;
        if live && self.types.count_event() {
            let seen = self.measure(ks, root, (stream, i), mask, &fail, exact, &mut stats);
            self.types.observe(&seen, mask_intersects(mask, &self.nodes[root].ends));
        }
        let order = self.types.order;
        let pruned = order[0] == Phase::A;
        let ts = ks.stores[stream as usize].ts(i);
        let tuple = [(stream, i)];
        let a = Phase::A as usize;
        if pruned {
            stats.comparisons[a] += 1;
            stats.tested[a] += 1;
            if and_not(mask, &fail) {
                stats.passed[a] += 1;
                self.emit(ks, root, mask, &tuple, ts, out);
            }
        } else if mask_intersects(mask, &self.nodes[root].ends) {
            let mut own = mask.to_vec();
            stats.comparisons[a] += 1;
            if and_not(&mut own, &fail) {
                self.emit(ks, root, &own, &tuple, ts, out);
            }
        }
        if !self.nodes[root].children.is_empty() && mask.iter().any(|&w| w != 0) {
            let deferred = (!pruned).then_some(&fail[..]);
            let mut scratch = std::mem::take(&mut self.scratch);
            self.expand(ks, root, &mut tuple.to_vec(), mask, (ts, ts), before, deferred, order, exact, out, &mut stats,
                        &mut scratch);
            self.scratch = scratch;
        }
        if live && self.types.period_ends() {
            self.types.remeasure();
        }
        self.stats = stats;
    }

    /// The results of the queries in `mask` whose paths end at `node`, into `out`.
    /// Inlined: it runs for every partner that passes its filters, mostly to find none
    /// (its calls were 0.35% of the instructions of J n=100).
    #[inline(always)]
    pub(super) fn emit(&self, ks: &KeyState, node: usize, mask: &[u64], partial: &[(u32, usize)], ts: i64, out: &mut Vec<Hit>) {
        let ends = &self.nodes[node].ends;
        for (w, (&m, &e)) in mask.iter().zip(ends).enumerate() {
            let mut word = m & e;
            while word != 0 {
                let bit = w * 64 + word.trailing_zeros() as usize;
                word &= word - 1;
                let q = self.queries[bit].as_ref().expect("a registered query");
                let seqs = q
                    .streams
                    .iter()
                    .map(|s| {
                        let &(_, i) = partial.iter().find(|(ps, _)| ps == s).unwrap();
                        ks.stores[*s as usize].seq(i)
                    })
                    .collect();
                out.push(Hit { bit, order: q.order, ts, refs: partial.to_vec(), seqs });
            }
        }
    }

    /// The factor `f` of a pair list `l op f*r + o`.
    pub(super) fn factor(&self, list: ListRef) -> f64 {
        let factor = match list {
            ListRef::Range(j) => self.ranges[j].factor,
            ListRef::Eq(j) => self.eqs[j].factor,
        };
        factor.expect("a pair list").f
    }

    /// Whether a query of `mask`'s words `r` has a predicate in `check`'s list.
    #[inline(always)]
    pub(super) fn touches(&self, check: &Check, mask: &[u64], r: &Words) -> bool {
        match check.list {
            ListRef::Range(j) => self.ranges[j].touches(mask, r),
            ListRef::Eq(j) => self.eqs[j].touches(mask, r),
        }
    }

    /// One filter phase's list probes (`checks`: the window lists, or the join lists)
    /// for the partner last bound in `partial`: removes from `survivors` every query it
    /// fails; false once none is left.
    #[allow(clippy::too_many_arguments)]
    #[inline(always)]
    pub(super) fn probe_lists<'a>(&self, ks: &KeyState, checks: impl Iterator<Item = &'a Check>, phase: Phase,
                       partial: &[(u32, usize)], survivors: &mut [u64], fail: &mut [u64], r: &Words, exact: &mut dyn Exact,
                       stats: &mut Stats) -> bool {
        let phase = phase as usize;
        for check in checks {
            if !self.touches(check, survivors, r) {
                continue;
            }
            stats.probes += 1;
            stats.comparisons[phase] += 1;
            let (ls, li) = partial[check.l.0];
            let (rs, ri) = partial[check.r.0];
            let lv = ks.stores[ls as usize].value(li, check.l.1);
            let rv = ks.stores[rs as usize].value(ri, check.r.1);
            fail[r.clone()].iter_mut().for_each(|w| *w = 0);
            match check.list {
                ListRef::Range(j) => self.ranges[j].pair_fail(lv, rv, fail, r, exact),
                ListRef::Eq(j) => self.eqs[j].pair_fail(lv, rv, fail, r, exact),
            }
            if !and_not(&mut survivors[r.clone()], &fail[r.clone()]) {
                return false;
            }
        }
        true
    }

    /// Bind each child's stream: retrieve its partners (`retrieve`: J before W, value-
    /// index probes for the queries they serve and the WES time range for the rest;
    /// W before J, the time range), keep each for the queries whose MAXWINDOW it fits
    /// among those it was retrieved for, and run the filter phases A, W (the window
    /// lists), J on each in `order`'s order.
    /// `deferred`: the tuple's attribute mask when A did not come first (then only at
    /// the first level, where the A phase applies it too).
    /// `scratch`: the buffers of this depth and, after them, of the deeper ones (split
    /// off rather than taken out and put back: moving a `Scratch` twice per call was
    /// 1.2% of the instructions of J n=100).
    #[allow(clippy::too_many_arguments)]
    pub(super) fn expand(&self, ks: &mut KeyState, node: usize, partial: &mut Vec<(u32, usize)>, mask: &[u64],
              (mints, maxts): (i64, i64), before: u64, deferred: Option<&[u64]>, order: Order,
              exact: &mut dyn Exact, out: &mut Vec<Hit>, stats: &mut Stats, scratch: &mut [Scratch]) {
        let floor = ks.floor.unwrap_or(i64::MIN) as i128;
        let [Scratch { group, survivors, fail, sets, retrieval }, scratch @ ..] = scratch else {
            unreachable!("`add_paths` keeps a `Scratch` per depth with children")
        };
        for buf in [&mut *group, &mut *survivors, &mut *fail] {
            buf.resize(self.nw, 0);
        }
        for &child in &self.nodes[node].children {
            let c = &self.nodes[child];
            let mut any = 0;
            for ((g, m), n) in group.iter_mut().zip(mask).zip(&c.mask) {
                *g = m & n;
                any |= *g;
            }
            if any == 0 {
                continue;
            }
            let s = c.stream as usize;
            if ks.stores.get(s).is_none_or(|st| st.is_empty()) {
                continue;
            }
            let widest = self.widest(group).min(c.widest) as i128;
            let (lo, hi) = self.narrowed(ks, c, partial, group, (maxts as i128 - widest).max(floor),
                                         mints as i128 + widest);
            if lo > hi {
                continue;
            }
            self.retrieve(ks, c, partial, group, (lo, hi), (mints, maxts), join_first(order), stats, retrieval);
            let Retrieval { candidates, only, .. } = &*retrieval;
            let nw = self.nw;
            let r = words(group);
            sets.resize(c.check_sets.words, 0);
            'candidates: for (k, &i) in candidates.iter().enumerate() {
                if let Some(&next) = candidates.get(k + AHEAD) {
                    ks.stores[s].prefetch_partner(next);
                }
                if ks.stores[s].seq(i) >= before {
                    continue;
                }
                stats.candidates += 1;
                survivors.copy_from_slice(group);
                let ts = ks.stores[s].ts(i);
                let (lo_ts, hi_ts) = (mints.min(ts), maxts.max(ts));
                let span = hi_ts as i128 - lo_ts as i128;
                for (w, m) in survivors[r.clone()].iter_mut().zip(&only[k * nw + r.start..k * nw + r.end]) {
                    *w &= m;
                }
                // State-Slice: a retrieval keeps to its queries' time ranges, each
                // partner for the queries whose MAXWINDOW it fits.
                stats.comparisons[Phase::W as usize] += 1;
                if !self.clear_narrow(span, survivors, &r) {
                    continue;
                }
                // The words the partner's own queries span: a few queries of a large
                // group leave most of the group's words empty.
                let rc = words(survivors);
                partial.push((c.stream, i));
                // The lists probed: those of the queries left when the first list phase
                // comes, each once (a partner is left with few of a group's queries).
                let mut listed = false;
                for phase in order {
                    let p = phase as usize;
                    stats.tested[p] += 1;
                    let alive = match phase {
                        Phase::A => {
                            let attr = self.cached_fail(&mut ks.stores[s], c.stream, i, exact);
                            stats.comparisons[p] += 1 + deferred.is_some() as u64;
                            and_not(&mut survivors[rc.clone()], &attr[rc.clone()])
                                && deferred.is_none_or(|f| and_not(&mut survivors[rc.clone()], &f[rc.clone()]))
                        }
                        Phase::W | Phase::J => {
                            if !listed {
                                c.check_sets.union(survivors, &rc, &c.checks_of, sets);
                                listed = true;
                            }
                            let checks = c.phase_checks(sets, phase);
                            self.probe_lists(ks, checks, phase, partial, survivors, fail, &rc, exact, stats)
                        }
                    };
                    if !alive {
                        partial.pop();
                        continue 'candidates;
                    }
                    stats.passed[p] += 1;
                }
                self.emit(ks, child, survivors, partial, hi_ts, out);
                if !c.children.is_empty() {
                    self.expand(ks, child, partial, survivors, (lo_ts, hi_ts), before, None, order, exact, out, stats,
                                scratch);
                }
                partial.pop();
            }
        }
    }

    /// What retrieving and filtering each partner stream of a sampled tuple costs, for
    /// all its candidate queries (`mask`) and for those its attributes leave, whatever
    /// the current order: the time range's size, the JES probes' visits, the lists a
    /// partner is probed against, and whether a few partners spread over the time
    /// range pass each phase on its own.
    #[allow(clippy::too_many_arguments)]
    pub(super) fn measure(&self, ks: &mut KeyState, root: usize, tuple: (u32, usize), mask: &[u64], fail: &[u64],
               exact: &mut dyn Exact, stats: &mut Stats) -> Vec<[Expansion; 2]> {
        const SAMPLED: usize = 2;
        let floor = ks.floor.unwrap_or(i64::MIN) as i128;
        let ts = ks.stores[tuple.0 as usize].ts(tuple.1);
        let mut seen = Vec::new();
        let mut group = vec![0; self.nw];
        let mut survivors = vec![0; self.nw];
        let mut scratch = vec![0; self.nw];
        for &child in &self.nodes[root].children {
            let c = &self.nodes[child];
            let s = c.stream as usize;
            let held = ks.stores.get(s).map_or(0, |st| st.len());
            if held == 0 {
                continue;
            }
            let mut e = [Expansion::default(); 2];
            for v in [ALL, PRUNED] {
                for ((g, m), n) in group.iter_mut().zip(mask).zip(&c.mask) {
                    *g = m & n;
                }
                if v == PRUNED {
                    // the tuple's attributes leave every query: the same expansion
                    if !mask_intersects(&group, fail) {
                        e[PRUNED] = e[ALL];
                        continue;
                    }
                    and_not(&mut group, fail);
                }
                if group.iter().all(|&w| w == 0) {
                    continue;
                }
                let widest = self.widest(&group).min(c.widest) as i128;
                let (lo, hi) = self.narrowed(ks, c, &[tuple], &group, (ts as i128 - widest).max(floor), ts as i128 + widest);
                stats.comparisons[Phase::W as usize] += 1;
                if lo > hi {
                    continue; // no retrieval in any order
                }
                let range = ks.stores[s].between(lo, hi);
                let n = range.len();
                let x = &mut e[v];
                (x.scans, x.in_range) = (1.0, n as f64);
                (x.join_probes, x.join_visits, x.join_found) = (1.0, n as f64, n as f64);
                let mut probes = Probes::default();
                if n >= PROBE_MIN {
                    self.cover(ks, c, &[tuple], &group, n, stats, &mut probes);
                }
                let mut served = vec![0; self.nw];
                probes.covered.chunks(self.nw).for_each(|p| or_into(&mut served, p));
                let chosen = &probes.chosen;
                if !chosen.is_empty() && served == group {
                    let visits = chosen.iter().map(|p| p.entries.len()).sum::<usize>() as f64;
                    (x.join_probes, x.join_visits, x.join_found) = (chosen.len() as f64, visits, visits * n as f64 / held as f64);
                }
                let r = words(&group);
                let mut sets = vec![0; c.check_sets.words];
                c.check_sets.union(&group, &r, &c.checks_of, &mut sets);
                x.window_lists = (n * c.phase_checks(&sets, Phase::W).count()) as f64;
                x.join_lists = (n * c.phase_checks(&sets, Phase::J).count()) as f64;
                let step = (n / SAMPLED).max(1);
                for partner in range.step_by(step).take(SAMPLED) {
                    x.sampled += 1.0;
                    let partial = [tuple, (c.stream, partner)];
                    let attr = self.cached_fail(&mut ks.stores[s], c.stream, partner, exact);
                    survivors.copy_from_slice(&group);
                    stats.comparisons[Phase::A as usize] += 1 + (v == ALL) as u64;
                    if and_not(&mut survivors, attr) && (v == PRUNED || and_not(&mut survivors, fail)) {
                        x.passed[Phase::A as usize] += 1.0;
                    }
                    let pts = ks.stores[s].ts(partner);
                    let span = (ts.max(pts) - ts.min(pts)) as i128;
                    survivors.copy_from_slice(&group);
                    stats.comparisons[Phase::W as usize] += 1;
                    if self.clear_narrow(span, &mut survivors, &(0..self.nw))
                        && self.probe_lists(ks, c.phase_checks(&sets, Phase::W), Phase::W, &partial, &mut survivors, &mut scratch, &r,
                                            exact, stats)
                    {
                        x.passed[Phase::W as usize] += 1.0;
                    }
                    survivors.copy_from_slice(&group);
                    if self.probe_lists(ks, c.phase_checks(&sets, Phase::J), Phase::J, &partial, &mut survivors, &mut scratch, &r, exact,
                                        stats)
                    {
                        x.passed[Phase::J as usize] += 1.0;
                    }
                }
            }
            seen.push(e);
        }
        seen
    }
}
