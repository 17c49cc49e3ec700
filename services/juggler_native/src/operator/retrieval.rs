//! Retrieval: the partners a plan node binds, by time ranges narrowed by window lists
//! (WES) or by value-index probes (JES), each checked against its queries' sieves.

use super::*;

impl Operator {
    /// The node's time range narrowed by each window list (a `ts` against a bound
    /// stream's `ts`) in which every query of `group` has a predicate: the WES probe of
    /// the window type. Times are ints, so the bounds are exact. Inlined: it runs per
    /// child of every bound tuple (see `lists::diff`).
    #[inline(always)]
    pub(super) fn narrowed(&self, ks: &KeyState, c: &Node, partial: &[(u32, usize)], group: &[u64], lo: i128,
                hi: i128) -> (i128, i128) {
        // The lists every query of the group uses are among any one query's.
        let Some(bit) = first_bit(group) else { return (lo, hi) };
        let r = words(group);
        let single = group[r.clone()].iter().map(|w| w.count_ones()).sum::<u32>() == 1;
        self.narrowed_for(ks, c, partial, bit, (!single).then_some((group, &r)), lo, hi)
    }

    /// `narrowed` for query `bit` alone, or for the group `shared` (and its words) whose
    /// first query `bit` is.
    #[allow(clippy::too_many_arguments)]
    #[inline(always)]
    pub(super) fn narrowed_for(&self, ks: &KeyState, c: &Node, partial: &[(u32, usize)], bit: usize,
                    shared: Option<(&[u64], &Words)>, mut lo: i128, mut hi: i128) -> (i128, i128) {
        debug_assert_eq!(partial.len(), c.depth);
        for &OwnWindow { list, other, partner_is_left, d } in c.own.windows(bit) {
            // d = l - r in [a, b], exactly, for the group's loosest (a query alone: its own)
            let d = match shared {
                None => d,
                Some(shared) => self.window_interval(list, bit, Some(shared)),
            };
            let Some((a, b)) = d else { continue };
            let (os, oi) = partial[other];
            let ots = ks.stores[os as usize].ts(oi) as i128;
            if partner_is_left {
                // p - o in [a, b]
                lo = lo.max(ots + a);
                hi = hi.min(ots + b);
            } else {
                // o - p in [a, b]
                lo = lo.max(ots - b);
                hi = hi.min(ots - a);
            }
        }
        (lo, hi)
    }

    /// The range of a partner's column each of query `bit`'s lists allows at its own
    /// constant in it, or with `shared` (a group of queries and its words) at the
    /// loosest constant of the group's queries when all of them use the list (else the
    /// list is skipped), widened past rounding (the lists' exact filter decides): one
    /// per join list whose other side is bound to a number, one per attribute range
    /// list of the partner's stream, passed to `each` as (partner slot and range, the
    /// index of the list's step in the query's plan, the list's predicate type). Inlined, as
    /// `Store::between` is: called per query a retrieval sieves for, and per
    /// retrieval, their calls were 0.6% of the instructions of J n=100.
    #[inline(always)]
    pub(super) fn partner_ranges(&self, ks: &KeyState, c: &Node, partial: &[(u32, usize)], bit: usize,
                      shared: Option<(&[u64], &Words)>, mut each: impl FnMut(Bound, u32, Phase)) {
        debug_assert_eq!(partial.len(), c.depth);
        for (i, step) in c.own.ranges(bit).iter().enumerate() {
            let &OwnRange { list, slot, join, own, .. } = step;
            // the other side's value, or the least and greatest it can be
            let (ov, ov_hi) = match join {
                Some((Other::Bound(depth, other), _)) => {
                    let (os, oi) = partial[depth];
                    let Some(ov) = ks.stores[os as usize].value(oi, other).as_f64() else { continue };
                    (ov, ov)
                }
                Some((Other::Ahead(stream, other), _)) => {
                    let Some(extent) = ks.stores.get(stream as usize).and_then(|s| s.extent(other)) else { continue };
                    extent
                }
                None => (0.0, 0.0),
            };
            let picked = match shared {
                None => own.map(|(t, _)| self.allowed(list, t)),
                Some((group, r)) => self.allowed_all(list, group, r),
            };
            let Some(d) = picked else { continue };
            if let Some((_, partner_is_left)) = join {
                let f = self.factor(list);
                // the partner's range moves monotonically with the other side's value
                let ends = (join_range(f, partner_is_left, ov, d), join_range(f, partner_is_left, ov_hi, d));
                if let (Some(a), Some(b)) = ends {
                    each(Bound { slot, lo: a.0.min(b.0), hi: a.1.max(b.1) }, i as u32, Phase::J);
                }
            } else if let Some((lo, hi)) = attr_range(d) {
                each(Bound { slot, lo, hi }, i as u32, Phase::A);
            }
        }
    }

    /// The sieves a retrieval for the queries `q` checks its partners against, pushed
    /// to `sv`: one per query up to `alone` queries, else one per State-Slice
    /// MAXWINDOW slice (`slices`), each with its time range narrowed by the window
    /// lists all its queries use, and (with `joins`) the ranges of every join and
    /// attribute list all its queries use (`own`: a query and where `bounds` holds its
    /// ranges, known already for a sieve of that query alone), appended to `bounds`.
    /// A partner outside them is of use to none of the sieve's queries; a sieve with
    /// an empty time range is left out.
    #[allow(clippy::too_many_arguments)]
    #[inline(always)]
    pub(super) fn sieves(&self, ks: &KeyState, c: &Node, partial: &[(u32, usize)], q: &[u64],
              own: Option<(usize, std::ops::Range<usize>)>, range: (i128, i128), times: (i64, i64), joins: bool,
              alone: usize, bounds: &mut Vec<Bound>, sv: &mut Sieves) {
        let nw = self.nw;
        let r = words(q);
        if q[r.clone()].iter().map(|w| w.count_ones()).sum::<u32>() as usize <= alone {
            for bit in bits(&q[r.clone()]).map(|b| r.start * 64 + b) {
                let w = self.window_of[bit];
                if let Some(sieve) = self.sieve(ks, c, partial, bit, None, w, own.clone(), range, times, joins, bounds) {
                    sv.list.push(sieve);
                    sv.of.extend((0..nw).map(|w| if w == bit / 64 { 1 << (bit % 64) } else { 0 }));
                }
            }
            return;
        }
        self.slices(q, &r, &mut sv.slices, &mut sv.widest);
        for (slice, &w) in sv.slices.chunks(nw).zip(&sv.widest) {
            let r = words(slice);
            let single = slice[r.clone()].iter().map(|w| w.count_ones()).sum::<u32>() == 1;
            let bit = first_bit(slice).expect("no slice is empty");
            let shared = (!single).then_some((slice, &r));
            if let Some(sieve) = self.sieve(ks, c, partial, bit, shared, w, own.clone(), range, times, joins, bounds) {
                sv.list.push(sieve);
                sv.of.extend_from_slice(slice);
            }
        }
    }

    /// The sieve of query `bit` alone, or of the group `shared` (and its words) whose
    /// first query `bit` is, given its widest window `w` (see `sieves`): None when its
    /// time range is empty.
    #[allow(clippy::too_many_arguments)]
    #[inline(always)]
    pub(super) fn sieve(&self, ks: &KeyState, c: &Node, partial: &[(u32, usize)], bit: usize, shared: Option<(&[u64], &Words)>,
             w: i64, own: Option<(usize, std::ops::Range<usize>)>, (lo, hi): (i128, i128), (mints, maxts): (i64, i64),
             joins: bool, bounds: &mut Vec<Bound>) -> Option<Sieve> {
        let w = w as i128;
        let (tlo, thi) = self.narrowed_for(ks, c, partial, bit, shared, lo.max(maxts as i128 - w), hi.min(mints as i128 + w));
        if tlo > thi {
            return None;
        }
        // The lists all the sieve's queries use are among any one query's. A query
        // alone: its own (tightest) constants in each of its lists, as `cover` finds
        // them for the query a probe is chosen for.
        let ranges = match own {
            Some((of, ranges)) if shared.is_none() && of == bit => ranges,
            _ => {
                let start = bounds.len();
                if joins {
                    self.partner_ranges(ks, c, partial, bit, shared, |b, _, _| bounds.push(b));
                }
                start..bounds.len()
            }
        };
        Some(Sieve::new(tlo, thi, ranges))
    }

    /// `q` (`r`: its words) split into State-Slice's MAXWINDOW slices: by MAXWINDOW,
    /// narrowest first, one slice per window, adjacent windows merged into at most
    /// `SLICES` slices, into `slices` (the queries, `nw` words each) and `widest`
    /// (their widest window).
    pub(super) fn slices(&self, q: &[u64], r: &Words, slices: &mut Vec<u64>, widest: &mut Vec<i64>) {
        slices.clear();
        widest.clear();
        let present = || self.windows.iter().filter(|c| c.set.intersects(q, r));
        let per_slice = present().count().div_ceil(SLICES).max(1);
        for (k, class) in present().enumerate() {
            if k % per_slice == 0 {
                slices.resize(slices.len() + q.len(), 0);
                widest.push(0);
            }
            let at = slices.len() - q.len();
            let slice = &mut slices[at..];
            class.set.or_into(slice, r);
            slice[r.clone()].iter_mut().zip(&q[r.clone()]).for_each(|(s, q)| *s &= q);
            *widest.last_mut().unwrap() = class.window;
        }
    }

    /// The child's partners for `group`'s queries in the time range [lo, hi], each
    /// once, into `rt.candidates`, with the queries it may serve into `rt.only` (`nw`
    /// words per partner): the queries a cover of value-index probes serves (J before
    /// W, when the probes visit fewer events than the time range holds) through those
    /// probes, the others through the time range. Each entry visited is checked
    /// against the sieves of the queries it is retrieved for (a time-range scan before
    /// J checks only their times), so a partner of use to none of them is not
    /// returned.
    #[allow(clippy::too_many_arguments)]
    pub(super) fn retrieve(&self, ks: &mut KeyState, c: &Node, partial: &[(u32, usize)], group: &[u64], (lo, hi): (i128, i128),
                times: (i64, i64), joins: bool, stats: &mut Stats, rt: &mut Retrieval) {
        let s = c.stream as usize;
        let nw = self.nw;
        let in_window = ks.stores[s].between(lo, hi);
        let Retrieval { candidates, only, found, rest, probes, sieves } = rt;
        sieves.clear();
        probes.bounds.clear();
        found.clear();
        rest.clear();
        rest.extend_from_slice(group);
        if joins && in_window.len() >= PROBE_MIN {
            self.cover(ks, c, partial, group, in_window.len(), stats, probes);
            stats.probed += !probes.chosen.is_empty() as u64;
            let Probes { chosen, covered, bounds, .. } = &mut *probes;
            for (k, probe) in chosen.iter().enumerate() {
                let covered = &covered[k * nw..(k + 1) * nw];
                and_not(rest, covered);
                let first = sieves.list.len();
                let own = Some(probe.own.clone());
                self.sieves(ks, c, partial, covered, own, (lo, hi), times, true, self.alone, bounds, sieves);
                if sieves.list.len() == first {
                    continue;
                }
                let start = found.len();
                ks.stores[s].probe(probe.index, probe.entries.clone(), &sieves.list[first..], bounds, found);
                found[start..].iter_mut().for_each(|f| f.1 += first);
                let visited = probe.entries.len() as u64;
                stats.visited += visited;
                stats.comparisons[probe.phase as usize] += 1 + visited;
            }
        }
        if rest.iter().any(|&w| w != 0) {
            stats.scanned += 1;
            stats.comparisons[Phase::W as usize] += 1 + in_window.len() as u64;
            let first = sieves.list.len();
            // A short time range (no probes were sized for it): a sieve per query costs
            // more to build than it saves (J-keys n=100, 10,000 keys: 177k against 265k
            // events/s).
            let alone = if in_window.len() >= PROBE_MIN { self.alone } else { 0 };
            self.sieves(ks, c, partial, rest, None, (lo, hi), times, joins, alone, &mut probes.bounds, sieves);
            let start = found.len();
            for i in in_window {
                ks.stores[s].sift(i, &sieves.list[first..], &probes.bounds, found);
            }
            found[start..].iter_mut().for_each(|f| f.1 += first);
        }
        found.sort_unstable();
        candidates.clear();
        only.clear();
        for &(i, k) in found.iter() {
            let of = &sieves.of[k * nw..(k + 1) * nw];
            if candidates.last() != Some(&i) {
                candidates.push(i);
                only.extend_from_slice(of);
            } else {
                let at = only.len() - nw;
                or_into(&mut only[at..], of);
            }
        }
    }

    /// Value-index probes serving queries of `group`, each query by one probe, into
    /// `probes`: for the first query not yet served, the probe over its own constant
    /// in one of its lists that visits fewest entries, serving also the group's
    /// queries whose constants in that list are at least as tight, while the entries
    /// the probes visit stay below `limit` (what scanning the time range visits).
    /// Queries with no such list, or beyond the limit, are left to the scan. Sizing
    /// each candidate probe (two binary searches) counts as one comparison of its
    /// list's type.
    #[allow(clippy::too_many_arguments)]
    pub(super) fn cover(&self, ks: &mut KeyState, c: &Node, partial: &[(u32, usize)], group: &[u64], limit: usize,
             stats: &mut Stats, probes: &mut Probes) {
        let s = c.stream as usize;
        let Probes { chosen, covered, bounds, uncovered, steps } = probes;
        chosen.clear();
        covered.clear();
        bounds.clear();
        uncovered.clear();
        uncovered.extend_from_slice(group);
        let mut total = 0;
        while let Some(bit) = first_bit(uncovered) {
            // The query's ranges go to `bounds` as they come, its own run there if a
            // probe is chosen for it (copying each range's 100-byte step, and then the
            // ranges, was 1% of the instructions of J n=100).
            let start = bounds.len();
            steps.clear();
            self.partner_ranges(ks, c, partial, bit, None, |b, step, phase| {
                bounds.push(b);
                steps.push((step, phase));
            });
            let mut best: Option<(usize, std::ops::Range<usize>, usize)> = None;
            for (k, (&Bound { slot, lo, hi }, &(_, phase))) in
                bounds[start..].iter().zip(steps.iter()).enumerate()
            {
                let x = ks.stores[s].index(slot);
                stats.comparisons[phase as usize] += 1;
                let entries = ks.stores[s].entries(x, lo, hi);
                if total + entries.len() < limit
                    && best.as_ref().is_none_or(|(_, e, _)| entries.len() < e.len())
                {
                    best = Some((x, entries, k));
                }
            }
            set(uncovered, bit, false);
            let Some((index, entries, k)) = best else {
                bounds.truncate(start);
                continue;
            };
            let (step, phase) = steps[k];
            let step = &c.own.ranges(bit)[step as usize];
            // a query alone is given only the lists it has a constant in
            let (_, pred) = step.own.expect("a query's own range");
            // the queries it serves: those at least as tight as the query
            let at = covered.len();
            covered.resize(at + self.nw, 0);
            let served = &mut covered[at..];
            self.or_served(step.list, pred, &step.at, served, &(0..self.nw));
            served.iter_mut().zip(uncovered.iter()).for_each(|(s, u)| *s &= u);
            served[bit / 64] |= 1 << (bit % 64);
            and_not(uncovered, served);
            total += entries.len();
            let own = start..bounds.len();
            chosen.push(IndexProbe { index, entries, own: (bit, own), phase });
        }
    }
}
