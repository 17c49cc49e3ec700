//! Planning: each query's paths through the plan nodes, its own probe plans, and the
//! bounds its lists allow that the plan and the retrievals read.

use super::*;

impl Operator {
    /// Plan paths: from each of the query's streams, the others in FROM order; each
    /// node checks the join and window lists whose two streams it has just bound.
    pub(super) fn add_paths(&mut self, spec: &QuerySpec, bit: usize, lists: &[(ListRef, u32)]) {
        let pairs: Vec<(ListRef, (u32, usize), (u32, usize))> = spec
            .preds
            .iter()
            .zip(lists)
            .filter_map(|(p, &(list, _))| match p {
                PredSpec::PairRange { l, r, .. } | PredSpec::PairEq { l, r, .. } if l.0 != r.0 => Some((list, *l, *r)),
                _ => None,
            })
            .collect();
        for &root in &spec.streams {
            let path = Self::path(spec, root);
            let mut node = match self.roots.get(&root) {
                Some(&n) => n,
                None => {
                    self.nodes.push(self.new_node(root, 0));
                    self.roots.insert(root, self.nodes.len() - 1);
                    self.nodes.len() - 1
                }
            };
            for depth in 0..path.len() {
                if depth > 0 {
                    let stream = path[depth];
                    let found = self.nodes[node].children.iter().copied().find(|&c| self.nodes[c].stream == stream);
                    node = match found {
                        Some(c) => c,
                        None => {
                            self.nodes.push(self.new_node(stream, depth));
                            let c = self.nodes.len() - 1;
                            self.nodes[node].children.push(c);
                            // the buffers of its parent's depth, `depth - 1` (see `expand`)
                            if self.scratch.len() < depth {
                                self.scratch.resize_with(depth, Scratch::default);
                            }
                            c
                        }
                    };
                    let depth_of = |s: u32| path[..=depth].iter().position(|&p| p == s);
                    for &(list, l, r) in &pairs {
                        let (Some(ld), Some(rd)) = (depth_of(l.0), depth_of(r.0)) else { continue };
                        if ld != depth && rd != depth {
                            continue;
                        }
                        let check = Check { list, l: (ld, l.1), r: (rd, r.1), window: l.1 == 0 && r.1 == 0 };
                        let n = &mut self.nodes[node];
                        let at = n.check_index(check);
                        n.checks_of.add(bit, at);
                    }
                }
                // the attribute range lists of the node's stream the query uses
                let mut attrs: Vec<u32> = self.streams.get(path[depth] as usize).map_or_else(Vec::new, |info| {
                    lists
                        .iter()
                        .filter_map(|(l, _)| info.attr_at.get(l).copied())
                        .filter(|&k| matches!(info.attr[k as usize], Some((_, _, None))))
                        .collect()
                });
                attrs.sort_unstable();
                attrs.dedup();
                let n = &mut self.nodes[node];
                n.attrs_of.put(bit, &attrs);
                n.check_sets.put(bit, n.checks_of.of(bit));
                set(&mut n.mask, bit, true);
                n.widest = n.widest.max(spec.window);
                if depth == path.len() - 1 {
                    set(&mut n.ends, bit, true);
                }
                // join lists from the node's stream to a stream bound after it
                let later = &path[depth + 1..];
                let ahead: Vec<(ListRef, usize, bool, (u32, usize))> = pairs
                    .iter()
                    .filter(|(_, l, r)| l.1 != 0 || r.1 != 0)
                    .filter_map(|&(list, l, r)| {
                        if l.0 == path[depth] && later.contains(&r.0) {
                            Some((list, l.1, true, r))
                        } else if r.0 == path[depth] && later.contains(&l.0) {
                            Some((list, r.1, false, l))
                        } else {
                            None
                        }
                    })
                    .collect();
                let (windows, ranges) = self.own_plan(&self.nodes[node], bit, &ahead);
                self.nodes[node].own.put(bit, &windows, &ranges);
            }
        }
    }

    /// The order a query binds its streams from `root`: next, the stream whose
    /// partners are found most narrowly: one with attribute predicates (a value-index
    /// probe over a constant), then one joined to a bound stream (a probe over the
    /// bound value), then one with a window predicate on a bound stream (a narrower
    /// time range), then FROM order. Every combination of the streams bound before a
    /// stream multiplies its retrievals, so the narrow ones go first.
    pub(super) fn path(spec: &QuerySpec, root: u32) -> Vec<u32> {
        let mut path = vec![root];
        let mut rest: Vec<u32> = spec.streams.iter().copied().filter(|&s| s != root).collect();
        let rank = |path: &[u32], s: u32| {
            let mut score = (false, false, false);
            for p in &spec.preds {
                match p {
                    PredSpec::Range { stream, .. } | PredSpec::Eq { stream, .. } if *stream == s => score.0 = true,
                    PredSpec::PairRange { l, r, .. } | PredSpec::PairEq { l, r, .. } => {
                        let linked = (l.0 == s && path.contains(&r.0)) || (r.0 == s && path.contains(&l.0));
                        if linked && l.1 == 0 && r.1 == 0 {
                            score.2 = true;
                        } else if linked {
                            score.1 = true;
                        }
                    }
                    _ => {}
                }
            }
            score
        };
        while !rest.is_empty() {
            let mut best = 0;
            for k in 1..rest.len() {
                if rank(&path, rest[k]) > rank(&path, rest[best]) {
                    best = k;
                }
            }
            path.push(rest.remove(best));
        }
        path
    }

    pub(super) fn new_node(&self, stream: u32, depth: usize) -> Node {
        Node { stream, depth, mask: vec![0; self.nw], ends: vec![0; self.nw], widest: 0, children: Vec::new(),
               checks: Vec::new(), check_at: FxHashMap::default(), windowed: Vec::new(), checks_of: PerBit::default(),
               check_sets: CheckSets::default(), attrs_of: PerBit::default(), own: OwnPlans::default() }
    }

    /// Query `bit`'s own plan at node `c` (see `OwnPlans`): its window lists in the
    /// node's order, then its join lists to bound streams, its attribute lists, and
    /// its join lists to streams bound after the node's (`ahead`: each list, the
    /// partner's slot, whether the partner is its left side, and the other side).
    pub(super) fn own_plan(&self, c: &Node, bit: usize, ahead: &[(ListRef, usize, bool, (u32, usize))])
                -> (Vec<OwnWindow>, Vec<OwnRange>) {
        let (mut windows, mut ranges) = (Vec::new(), Vec::new());
        let mut ks: Vec<u32> = c.checks_of.of(bit).to_vec();
        ks.sort_unstable();
        for check in ks.iter().map(|&k| &c.checks[k as usize]).filter(|c| c.window) {
            let Some((partner_is_left, _, other)) = bound_side(check, c.depth) else { continue };
            let d = self.window_interval(check.list, bit, None);
            windows.push(OwnWindow { list: check.list, other: other.0, partner_is_left, d });
        }
        for &k in c.checks_of.of(bit) {
            let check = &c.checks[k as usize];
            // a window predicate: the time range already holds it
            let Some((partner_is_left, slot, other)) = bound_side(check, c.depth).filter(|_| !check.window) else {
                continue;
            };
            let own = self.own_constant(check.list, bit);
            let join = Some((Other::Bound(other.0, other.1), partner_is_left));
            ranges.push(OwnRange { list: check.list, slot, join, own, at: AtCache::default() });
        }
        let attr = self.streams.get(c.stream as usize).map_or(&[][..], |info| &info.attr[..]);
        for &k in c.attrs_of.of(bit) {
            let Some((list, slot, None)) = attr[k as usize] else { unreachable!("attribute lists only") };
            ranges.push(OwnRange { list, slot, join: None, own: self.own_constant(list, bit), at: AtCache::default() });
        }
        for &(list, slot, partner_is_left, (stream, other)) in ahead {
            let join = Some((Other::Ahead(stream, other), partner_is_left));
            ranges.push(OwnRange { list, slot, join, own: self.own_constant(list, bit), at: AtCache::default() });
        }
        (windows, ranges)
    }

    /// Query `bit`'s own constant in `list` and the predicate holding it: in a range
    /// list its tightest threshold, in an equality list the constant of one of its `=`
    /// predicates (every value it can use equals it). None when the list bounds none
    /// of its values (only `!=`, or a string or boolean constant).
    pub(super) fn own_constant(&self, list: ListRef, bit: usize) -> Option<(f64, u32)> {
        match list {
            ListRef::Range(j) => self.ranges[j].tighter(bit),
            ListRef::Eq(j) => self.eqs[j].pinned(bit).and_then(|(c, pred)| c.number().map(|t| (t, pred))),
        }
    }

    /// The interval of `d` (an attribute's value, or a pair's `l - f*r`) that `list`
    /// allows at constant `t`: from it up (a lower list), up to it (an upper one), or
    /// it alone (an equality list).
    pub(super) fn allowed(&self, list: ListRef, t: f64) -> (f64, f64) {
        match list {
            ListRef::Range(j) if self.ranges[j].lower => (t, f64::INFINITY),
            ListRef::Range(_) => (f64::NEG_INFINITY, t),
            ListRef::Eq(_) => (t, t),
        }
    }

    /// The interval of `d` every query of `group` (words `r`) allows in `list`, when
    /// each has a constant there: a range list's loosest, or the hull of a few
    /// queries' equality constants; None otherwise (the list then bounds nothing).
    pub(super) fn allowed_all(&self, list: ListRef, group: &[u64], r: &Words) -> Option<(f64, f64)> {
        match list {
            ListRef::Range(j) => loosest_of_all(&self.ranges[j], group, r).map(|(t, _)| self.allowed(list, t)),
            ListRef::Eq(j) => self.eqs[j].pinned_all(group, r)?.try_fold((f64::INFINITY, f64::NEG_INFINITY), |(lo, hi), c| {
                c.number().map(|t| (lo.min(t), hi.max(t)))
            }),
        }
    }

    /// The exact interval of a window list's difference `l - r` of timestamps that
    /// query `bit` allows (its own tightest threshold, or its `=` constant), or with
    /// `shared` every query of a group; None when the list bounds nothing.
    pub(super) fn window_interval(&self, list: ListRef, bit: usize, shared: Option<(&[u64], &Words)>) -> Option<(i128, i128)> {
        match (list, shared) {
            (ListRef::Range(j), None) => self.ranges[j].tightest(bit).map(|(_, ti)| ts_interval(&self.ranges[j], ti)),
            (ListRef::Range(j), Some((group, r))) => {
                loosest_of_all(&self.ranges[j], group, r).map(|(_, ti)| ts_interval(&self.ranges[j], ti))
            }
            (ListRef::Eq(j), None) => self.eqs[j].pinned(bit).map(|(c, _)| ts_point(c)),
            (ListRef::Eq(j), Some((group, r))) => self.eqs[j].pinned_all(group, r)?.map(ts_point).reduce(|a, b| (a.0.min(b.0), a.1.max(b.1))),
        }
    }

    /// OR into `out` the queries a probe at predicate `pred`'s constant in `list`
    /// serves: those at least as tight (a range list), or with the same `=` predicate.
    pub(super) fn or_served(&self, list: ListRef, pred: u32, at: &AtCache, out: &mut [u64], r: &Words) {
        match list {
            ListRef::Range(j) => self.ranges[j].or_tighter(pred, at, out, r),
            ListRef::Eq(j) => self.eqs[j].or_same(pred, out, r),
        }
    }
}
