//! The Juggler operator (thesis Figure 3.19), natively: every registered query over
//! one shared state.
//!
//! Per incoming event: the queries over its stream whose attribute predicates it
//! passes (one probe per predicate list) are the root's candidates; each plan node
//! binds one more stream, retrieving that stream's held events of the key inside the
//! time range the node's queries allow (the WES probe) or through value-index probes
//! (the JES), each checked against scalar bounds every query it is retrieved for
//! implies (`Sieve`), and each partner leaves the queries whose attribute mask
//! (cached per held event), MAXWINDOW and join/window lists (one probe each) it
//! passes. A query still standing where its path ends has a
//! result. Queries are bits in word arrays; lists, the plan and the window table are
//! shared by every query that uses them.
//!
//! Python keeps the language: it compiles each query to `QuerySpec` with exact
//! thresholds, and answers `Exact` where doubles cannot decide.

use std::collections::HashMap;

use rustc_hash::FxHashMap;

use crate::blocks::{Blocked, QSet};
use crate::lists::{AtCache, EqConst, EqList, Exact, Factor, RangeList};
use crate::masks::{Words, bits, or_into};
use crate::ordering::{ALL, Expansion, Order, PRUNED, Phase, TypeManager, join_first};
use crate::store::{AHEAD, Bound, Pos, Sieve, Store};
use crate::value::V;

mod events;
mod plan;
mod registry;
mod retrieval;
mod state;
#[cfg(test)]
mod tests;

/// One predicate of a query, with the stream and column slots it reads.
#[derive(Clone, Debug)]
pub enum PredSpec {
    Range { id: u32, stream: u32, slot: usize, lower: bool, tf: f64, ti: i128 },
    Eq { id: u32, stream: u32, slot: usize, eq: bool, constant: EqConst },
    PairRange { id: u32, l: (u32, usize), r: (u32, usize), lower: bool, factor: Factor, tf: f64, ti: i128 },
    PairEq { id: u32, l: (u32, usize), r: (u32, usize), eq: bool, factor: Factor, constant: EqConst },
}

#[derive(Clone, Debug)]
pub struct QuerySpec {
    /// Stream ids in FROM order.
    pub streams: Vec<u32>,
    pub window: i64,
    pub preds: Vec<PredSpec>,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
enum ListRef {
    Range(usize),
    Eq(usize),
}

/// What identifies a list: predicates that agree on all of it share one.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
struct ListKey {
    family: u8,
    l: (u32, usize),
    r: Option<(u32, usize)>,
    factor: Option<(u64, Option<i64>)>,
}

/// A join or window list probed at a plan node: the depths (in the node's path) of
/// the streams its two sides read, and its predicate type (a window list compares
/// two streams' timestamps, slot 0, with factor 1).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
struct Check {
    list: ListRef,
    l: (usize, usize),
    r: (usize, usize),
    window: bool,
}

/// Indices per query bit, looked up for every query a retrieval plans or a partner
/// is probed for (a hash lookup was a tenth of planning). Each bit's indices are a
/// run in one arena, the runs of bits in order side by side: a vector per bit was
/// two cache misses at n=1,000 (its header, then its own heap block), and a
/// retrieval plans its queries in bit order. Indices change only at registration: a
/// bit's new run is appended and its old one left, until left runs are most of the
/// arena and it is compacted. Indices never move (a node appends its checks), so a
/// registration touches its own bit's runs only.
#[derive(Clone, Debug, Default)]
struct PerBit {
    /// (start, length) in `items` per bit.
    runs: Vec<(u32, u32)>,
    items: Vec<u32>,
    /// The length of all runs: `items` less what was left behind.
    live: usize,
}

impl PerBit {
    fn bits(&self) -> usize {
        self.runs.len()
    }

    fn of(&self, bit: usize) -> &[u32] {
        self.runs.get(bit).map_or(&[], |&(a, n)| &self.items[a as usize..(a + n) as usize])
    }

    /// Make query `bit`'s indices `ks`.
    fn put(&mut self, bit: usize, ks: &[u32]) {
        if self.runs.len() <= bit {
            self.runs.resize(bit + 1, (0, 0));
        }
        self.live = self.live - self.runs[bit].1 as usize + ks.len();
        self.runs[bit] = (self.items.len() as u32, ks.len() as u32);
        self.items.extend_from_slice(ks);
        if self.items.len() > 2 * self.live + 64 {
            self.compact();
        }
    }

    /// Add index `k` to query `bit`'s, if not there.
    fn add(&mut self, bit: usize, k: usize) {
        let k = k as u32;
        if !self.of(bit).contains(&k) {
            let ks = [self.of(bit), &[k]].concat();
            self.put(bit, &ks);
        }
    }

    fn compact(&mut self) {
        let mut items = Vec::with_capacity(self.live);
        for run in &mut self.runs {
            let (a, n) = (run.0 as usize, run.1 as usize);
            run.0 = items.len() as u32;
            items.extend_from_slice(&self.items[a..a + n]);
        }
        self.items = items;
    }
}

/// Per query bit, a set of indices in a node's `checks`: `words` words per bit while a
/// node has at most `DENSE_CHECKS` words of checks (a partner's union is then one OR
/// per query); beyond, the sets would take memory quadratic in the queries (a node
/// with a list per query), and a union is made from `checks_of` instead.
#[derive(Clone, Debug, Default)]
struct CheckSets {
    words: usize,
    sets: Vec<u64>,
    sparse: bool,
}

/// See `CheckSets`.
const DENSE_CHECKS: usize = 8;

impl CheckSets {
    /// Room for `checks` indices: the dense sets are laid out again (from `checks_of`)
    /// when their words double, or given up past `DENSE_CHECKS` words.
    fn fit(&mut self, checks: usize, checks_of: &PerBit) {
        let need = checks.div_ceil(64);
        if need <= self.words {
            return;
        }
        if self.sparse || need > DENSE_CHECKS {
            (self.words, self.sets, self.sparse) = (need, Vec::new(), true);
            return;
        }
        self.words = need.next_power_of_two();
        self.sets.clear();
        for bit in 0..checks_of.bits() {
            self.put(bit, checks_of.of(bit));
        }
    }

    /// Make query `bit`'s set `ks` (indices below `words * 64`).
    fn put(&mut self, bit: usize, ks: &[u32]) {
        if self.sparse {
            return;
        }
        let words = self.words;
        if self.sets.len() < (bit + 1) * words {
            self.sets.resize((bit + 1) * words, 0);
        }
        let set = &mut self.sets[bit * words..(bit + 1) * words];
        set.iter_mut().for_each(|w| *w = 0);
        ks.iter().for_each(|&k| set[k as usize / 64] |= 1 << (k % 64));
    }

    /// OR into `out` (`words` long) the sets of the queries in `mask`'s words `r`
    /// (inlined: see `RangeList::pair_fail`).
    #[inline(always)]
    fn union(&self, mask: &[u64], r: &Words, checks_of: &PerBit, out: &mut [u64]) {
        out.iter_mut().for_each(|w| *w = 0);
        for (w, &word) in mask.iter().enumerate().take(r.end).skip(r.start) {
            let mut word = word;
            while word != 0 {
                let bit = w * 64 + word.trailing_zeros() as usize;
                word &= word - 1;
                if self.sparse {
                    checks_of.of(bit).iter().for_each(|&k| out[k as usize / 64] |= 1 << (k % 64));
                } else if let Some(set) = self.sets.get(bit * self.words..(bit + 1) * self.words) {
                    or_into(out, set);
                }
            }
        }
    }
}

/// A window list (factor 1, range or equality) a query uses at a node: it bounds a
/// partner's ts by the ts bound at depth `other`, exactly. `d`: the interval of the
/// difference `l - r` the query's own constant allows (`Operator::window_interval`).
#[derive(Clone, Copy, Debug)]
struct OwnWindow {
    list: ListRef,
    other: usize,
    partner_is_left: bool,
    d: Option<(i128, i128)>,
}

/// A join or attribute list (range or equality) a query uses at a node, which a
/// value-index probe over the partner's `slot` can serve it by: `own`, the query's
/// own constant in it (a range list's tightest threshold, an equality list's `=`
/// constant) and its predicate (with it the list finds the queries every value the
/// probe returns may serve: `Operator::or_served`).
#[derive(Clone, Debug)]
struct OwnRange {
    list: ListRef,
    slot: usize,
    /// A join list: its other side and whether the partner is the left side; None
    /// for an attribute list.
    join: Option<(Other, bool)>,
    own: Option<(f64, u32)>,
    /// Where the list's queries at least as tight start or end (`or_tighter`).
    at: AtCache,
}

/// The other side of a join list a partner is retrieved by.
#[derive(Clone, Copy, Debug)]
enum Other {
    /// A stream bound before the partner: its (depth, slot), whose value the list
    /// compares the partner's with.
    Bound(usize, usize),
    /// A stream the query binds after the partner: its (stream, slot). Its value is
    /// not known yet, but it will be one of its held events' (`Store::extent`), so
    /// the list still bounds the partner: an event no held value can pair with is
    /// of no use (a semi-join reduction).
    Ahead(u32, usize),
}

/// Per query bit, its window lists (in the node's order) and its join then attribute
/// range lists (in its `checks_of` and `attrs_of` order) at a node, with its own
/// constants in each: what a retrieval for it reads, where finding its tightest entry
/// in each list (a binary search) per retrieval was a fifth of J n=100's time. A
/// query's plan holds only its own constants, which no other registration changes:
/// it is made when the query is registered. Runs are kept as `PerBit`'s are.
#[derive(Clone, Debug, Default)]
struct OwnPlans {
    /// Per bit: its windows' start and end in `windows`, its ranges' in `ranges`.
    runs: Vec<[u32; 4]>,
    windows: Vec<OwnWindow>,
    ranges: Vec<OwnRange>,
    /// Items of all runs (what the arenas hold less what was left behind).
    live: usize,
}

impl OwnPlans {
    /// Make query `bit`'s plan.
    fn put(&mut self, bit: usize, windows: &[OwnWindow], ranges: &[OwnRange]) {
        if self.runs.len() <= bit {
            self.runs.resize(bit + 1, [0; 4]);
        }
        let [a, b, c, d] = self.runs[bit];
        self.live = self.live + windows.len() + ranges.len() - (b - a) as usize - (d - c) as usize;
        let (w, r) = (self.windows.len() as u32, self.ranges.len() as u32);
        self.windows.extend_from_slice(windows);
        self.ranges.extend_from_slice(ranges);
        self.runs[bit] = [w, self.windows.len() as u32, r, self.ranges.len() as u32];
        if self.windows.len() + self.ranges.len() > 2 * self.live + 64 {
            let (windows, ranges) = (std::mem::take(&mut self.windows), std::mem::take(&mut self.ranges));
            for run in &mut self.runs {
                let (w, r) = (self.windows.len() as u32, self.ranges.len() as u32);
                self.windows.extend_from_slice(&windows[run[0] as usize..run[1] as usize]);
                self.ranges.extend_from_slice(&ranges[run[2] as usize..run[3] as usize]);
                *run = [w, self.windows.len() as u32, r, self.ranges.len() as u32];
            }
        }
    }

    fn windows(&self, bit: usize) -> &[OwnWindow] {
        self.runs.get(bit).map_or(&[], |r| &self.windows[r[0] as usize..r[1] as usize])
    }

    fn ranges(&self, bit: usize) -> &[OwnRange] {
        self.runs.get(bit).map_or(&[], |r| &self.ranges[r[2] as usize..r[3] as usize])
    }
}

impl Node {
    /// The checks of filter phase `phase` (the window lists, or the join lists) in
    /// `set`, a union of `check_sets`, in the node's order.
    fn phase_checks<'a>(&'a self, set: &'a [u64], phase: Phase) -> impl Iterator<Item = &'a Check> + 'a {
        let window = phase == Phase::W;
        set.iter().enumerate().flat_map(move |(w, &word)| {
            let marks = self.windowed.get(w).copied().unwrap_or(0);
            let mut word = word & if window { marks } else { !marks };
            std::iter::from_fn(move || {
                (word != 0).then(|| {
                    let k = w * 64 + word.trailing_zeros() as usize;
                    word &= word - 1;
                    &self.checks[k]
                })
            })
        })
    }

    /// The index of `check` among the node's, appended if new.
    fn check_index(&mut self, check: Check) -> usize {
        if let Some(&k) = self.check_at.get(&check) {
            return k as usize;
        }
        let k = self.checks.len();
        self.checks.push(check);
        self.check_at.insert(check, k as u32);
        if check.window {
            if self.windowed.len() <= k / 64 {
                self.windowed.resize(k / 64 + 1, 0);
            }
            self.windowed[k / 64] |= 1 << (k % 64);
        }
        self.check_sets.fit(self.checks.len(), &self.checks_of);
        k
    }
}

#[derive(Clone, Debug)]
struct Node {
    stream: u32,
    /// Its place in its paths: the events bound before its partner.
    depth: usize,
    mask: Vec<u64>,
    ends: Vec<u64>,
    widest: i64,
    children: Vec<usize>,
    /// Every join and window list its queries probe, in the order they came (indices
    /// never move: a registration touches its own bit's sets only).
    checks: Vec<Check>,
    check_at: FxHashMap<Check, u32>,
    /// Which of `checks` are window lists: each filter phase probes its own.
    windowed: Vec<u64>,
    /// Per query bit, the indices in `checks` of its lists.
    checks_of: PerBit,
    /// The same as sets of indices: a partner is probed against the union of its
    /// queries' lists, in the node's order.
    check_sets: CheckSets,
    /// Per query bit, the indices in the node stream's `StreamInfo::attr` of its
    /// attribute range lists: with its join lists, what a retrieval for it may probe.
    attrs_of: PerBit,
    own: OwnPlans,
}

#[derive(Clone, Debug, Default)]
struct StreamInfo {
    /// Lists an event of this stream is probed against by itself: attribute lists
    /// (slot) and in-event pair lists (two slots); None where a list was dropped (the
    /// place is taken again by the next new list, so indices never move).
    attr: Vec<Option<(ListRef, usize, Option<usize>)>>,
    attr_at: FxHashMap<ListRef, u32>,
    free: Vec<u32>,
    version: u32,
}

/// What is kept of a registered query: its rank, its streams in FROM order (results
/// list their events so) and its predicates' lists; the rest is in the lists.
#[derive(Clone, Debug)]
struct Registered {
    order: u64,
    streams: Box<[u32]>,
    lists: Box<[(ListRef, u32)]>,
}

#[derive(Clone, Debug, Default)]
pub struct KeyState {
    pub maxts: Option<i64>,
    pub floor: Option<i64>,
    pub stores: Vec<Store>,
}

/// A result: the query's bit and order, and the events bound, as (stream, index) in
/// the order of the plan path (valid until the next call that changes state).
#[derive(Clone, Debug)]
pub struct Hit {
    pub bit: usize,
    pub order: u64,
    pub ts: i64,
    pub refs: Vec<(u32, usize)>,
    /// Arrival numbers of the events in FROM order: results sort by them.
    pub seqs: Vec<u64>,
}

#[derive(Clone, Copy, Debug, Default)]
pub struct Stats {
    pub events: u64,
    /// Held events examined as partners.
    pub candidates: u64,
    /// Join and window list probes on partners.
    pub probes: u64,
    pub results: u64,
    /// Partner retrievals by value-index probes, and by time-range scans (a retrieval
    /// that probes for some queries and scans for the others counts in both).
    pub probed: u64,
    /// Comparisons per predicate type (indexed by `Phase`), as the thesis counts them:
    /// bitset operations (an attribute mask, MAXWINDOW), exploitation-structure probes
    /// and the entries they return, predicate-list probes.
    pub comparisons: [u64; 3],
    /// Partners that reached each filter phase, and that passed it.
    pub tested: [u64; 3],
    pub passed: [u64; 3],
    /// Value-index entries visited by probes (each then checked against its sieves).
    pub visited: u64,
    pub scanned: u64,
}

pub struct Late {
    pub maxts: i64,
}

/// An event about to be processed or restored, its values in the stream's slots.
pub struct Incoming<'a> {
    pub stream: u32,
    pub key: &'a str,
    pub ts: i64,
    pub shape: u32,
    pub row: Vec<V>,
    pub pos: Pos,
}

/// The queries of one MAXWINDOW.
#[derive(Clone, Debug)]
struct WindowClass {
    window: i64,
    set: QSet,
}

crate::member!(WindowClass);

fn window_order(a: &WindowClass, b: &WindowClass) -> std::cmp::Ordering {
    a.window.cmp(&b.window)
}

#[derive(Default)]
pub struct Operator {
    pub retention: i64,
    pub lateness: i64,
    pub horizon: i64,
    /// Words of every query mask: a power of two, so widening (every time the bits
    /// double) is amortised over the registrations.
    nw: usize,
    ranges: Vec<RangeList>,
    eqs: Vec<EqList>,
    list_of: HashMap<ListKey, ListRef>,
    /// Per list, its key; lists left with no predicate are dropped and their places
    /// taken by the next new lists.
    range_keys: Vec<ListKey>,
    eq_keys: Vec<ListKey>,
    free_ranges: Vec<usize>,
    free_eqs: Vec<usize>,
    nodes: Vec<Node>,
    roots: FxHashMap<u32, usize>,
    streams: Vec<StreamInfo>,
    /// Slots per stream (grows as columns are seen).
    pub widths: Vec<usize>,
    /// The queries by MAXWINDOW, narrowest first (State-Slice), with the first window
    /// of each block.
    windows: Blocked<WindowClass>,
    window_heads: Vec<i64>,
    /// Per query bit, its MAXWINDOW.
    window_of: Vec<i64>,
    /// Per query bit (bits are reused, so this stays as long as the most registered
    /// at once), read for every result.
    queries: Vec<Option<Registered>>,
    /// How many are registered.
    registered: usize,
    free_bits: Vec<usize>,
    next_bit: usize,
    registrations: u64,
    seq: u64,
    pub keys: FxHashMap<Box<str>, KeyState>,
    pub stats: Stats,
    pub types: TypeManager,
    /// Buffers of each plan depth's expansion, reused from event to event: one per
    /// depth of a node with children.
    scratch: Vec<Scratch>,
    /// `ALONE` (the tests also run with 0: MAXWINDOW slices only).
    alone: usize,
}

fn set(mask: &mut Vec<u64>, bit: usize, on: bool) {
    if mask.len() <= bit / 64 {
        mask.resize(bit / 64 + 1, 0);
    }
    if on {
        mask[bit / 64] |= 1 << (bit % 64);
    } else {
        mask[bit / 64] &= !(1 << (bit % 64));
    }
}

/// Put a new list with its key at a dropped list's place, or at the end; its index.
fn place<L>(lists: &mut Vec<L>, keys: &mut Vec<ListKey>, free: &mut Vec<usize>, list: L, key: ListKey) -> usize {
    match free.pop() {
        Some(i) => {
            (lists[i], keys[i]) = (list, key);
            i
        }
        None => {
            lists.push(list);
            keys.push(key);
            lists.len() - 1
        }
    }
}

fn and_not(out: &mut [u64], fail: &[u64]) -> bool {
    let mut any = 0;
    for (o, f) in out.iter_mut().zip(fail) {
        *o &= !f;
        any |= *o;
    }
    any != 0
}

/// The loosest threshold in `list` of `group`'s queries (the lowest of a lower list,
/// the highest of an upper one) when every one of them has a predicate in it (`r`:
/// the group's words), else None. Allocates nothing: it runs for every list at
/// every retrieval.
fn loosest_of_all(list: &RangeList, group: &[u64], r: &Words) -> Option<(f64, i128)> {
    list.covers(group, r).then(|| list.loosest(group, r)).flatten()
}

/// Beyond any timestamp difference: stands for an unbounded side of an interval of
/// timestamps, so that adding a timestamp to it stays far inside i128.
const UNBOUNDED_TS: i128 = 1 << 100;

/// The interval of a window list's difference `l - r` (exact, timestamps are ints)
/// that threshold `ti` allows in a range list (above it, or below it).
fn ts_interval(list: &RangeList, ti: i128) -> (i128, i128) {
    let ti = ti.clamp(-UNBOUNDED_TS, UNBOUNDED_TS);
    if list.lower { (ti, UNBOUNDED_TS) } else { (-UNBOUNDED_TS, ti) }
}

/// The interval of a window list's difference `l - r` that an equality constant
/// allows: the int it is, or nothing (a constant that is no int equals no difference
/// of timestamps).
fn ts_point(c: &EqConst) -> (i128, i128) {
    match *c {
        EqConst::Diff(_, Some(i)) if (-UNBOUNDED_TS..=UNBOUNDED_TS).contains(&i) => (i, i),
        EqConst::Diff(_, Some(_)) | EqConst::Diff(_, None) => (1, 0),
        _ => (-UNBOUNDED_TS, UNBOUNDED_TS),
    }
}

/// The value `o` (an end of an interval of differences) gives, widened by `slack`
/// past the rounding of solving for it in doubles, downwards (`down`) or upwards;
/// an infinite `o` leaves that side unbounded; None when the solution is no finite
/// double.
fn widened(o: f64, t: f64, slack: f64, down: bool) -> Option<f64> {
    if o.is_infinite() {
        return Some(if down { f64::NEG_INFINITY } else { f64::INFINITY });
    }
    if !t.is_finite() || !slack.is_finite() {
        return None;
    }
    Some(if down { t - slack } else { t + slack })
}

/// The partner's values an attribute list allows when its value must lie in `d`,
/// widened past rounding (the lists' exact filter decides).
fn attr_range((dlo, dhi): (f64, f64)) -> Option<(f64, f64)> {
    let slack = |t: f64| t.abs() * (1.0 / (1u64 << 40) as f64) + 1e-300;
    Some((widened(dlo, dlo, slack(dlo), true)?, widened(dhi, dhi, slack(dhi), false)?))
}

/// For a join or window check at a node binding depth `depth`: whether the partner
/// is its left side, the partner's slot, and the bound side's (depth, slot); None
/// unless the check compares the partner with a stream bound before it.
fn bound_side(check: &Check, depth: usize) -> Option<(bool, usize, (usize, usize))> {
    if check.l.0 == depth && check.r.0 < depth {
        Some((true, check.l.1, check.r))
    } else if check.r.0 == depth && check.l.0 < depth {
        Some((false, check.r.1, check.l))
    } else {
        None
    }
}

/// The partner's values that can make `d = l - f*r` lie in [dlo, dhi] (a range
/// list: one side unbounded; an equality list: one point) with the other side's value
/// `ov`, widened past the rounding of solving for the partner in doubles.
fn join_range(f: f64, partner_is_left: bool, ov: f64, (dlo, dhi): (f64, f64)) -> Option<(f64, f64)> {
    let end = |o: f64, down: bool| {
        let target = if partner_is_left { o + f * ov } else { (ov - o) / f };
        let slack = (target.abs() + o.abs() + ov.abs() + (f * ov).abs()) * (1.0 / (1u64 << 40) as f64) + 1e-300;
        widened(o, target, slack, down)
    };
    // the partner grows with d when it is the left side or the factor is negative
    let (from_lo, from_hi) = if partner_is_left || f < 0.0 { (dlo, dhi) } else { (dhi, dlo) };
    Some((end(from_lo, true)?, end(from_hi, false)?))
}

/// A retrieval of more than `ALONE` queries splits them into at most this many
/// MAXWINDOW slices, each checked on every entry visited (the windows of J come from
/// four values).
const SLICES: usize = 4;

/// Up to this many queries, a retrieval gives each query a sieve of its own (its own
/// MAXWINDOW, window constants and constants), where a MAXWINDOW slice's sieve holds
/// the loosest constant among the slice's queries in each list: at J n=1,000 the
/// partners per event fell from 227 to 66 and their list probes from 964 to 114 (62%
/// of the partners had failed the join lists). Beyond it, and for a scan of a short
/// time range, MAXWINDOW slices: every entry visited is checked against every sieve.
const ALONE: usize = 64;

/// At least this many queries registered at once go in bulk (`Operator::register_many`).
const BULK: usize = 64;

/// Below this many events in the time range, scanning it beats sizing index probes.
const PROBE_MIN: usize = 16;

/// A predicate list as `Operator::lists` describes it.
pub type ListDesc = (u8, (u32, usize), Option<(u32, usize)>, Option<f64>, usize);

/// One value-index probe of a JES retrieval: the index, the entries it visits (those
/// in its value range), and the predicate type its list is of (a join list, or an
/// attribute list of the partner's stream); the queries it serves are in `Probes`.
struct IndexProbe {
    index: usize,
    entries: std::ops::Range<usize>,
    /// The query it was chosen for, and where `Probes::bounds` holds the ranges of
    /// all that query's lists at its own constants: the sieve of a slice holding that
    /// query alone.
    own: (usize, std::ops::Range<usize>),
    phase: Phase,
}

/// The probes a cover chose, the queries each serves (`nw` words per probe) and
/// their own ranges.
#[derive(Default)]
struct Probes {
    chosen: Vec<IndexProbe>,
    covered: Vec<u64>,
    /// The probes' own ranges, then those of the retrieval's other sieves: each
    /// sieve's bounds are a run in it.
    bounds: Vec<Bound>,
    uncovered: Vec<u64>,
    /// Per range of the query being covered (in `bounds`, from the end of the last
    /// chosen probe's run on): its step in the query's plan (with its list and its own
    /// predicate there: the queries at least as tight are served with it), and the
    /// list's predicate type.
    steps: Vec<(u32, Phase)>,
}

/// The sieves of a retrieval and the queries of each (`nw` words per sieve).
#[derive(Default)]
struct Sieves {
    list: Vec<Sieve>,
    of: Vec<u64>,
    /// `Operator::slices`' output: the queries of each slice (`nw` words each) and
    /// its widest window.
    slices: Vec<u64>,
    widest: Vec<i64>,
}

impl Sieves {
    fn clear(&mut self) {
        self.list.clear();
        self.of.clear();
    }
}

/// What a retrieval fills: its partners and, `nw` words each, the queries each may
/// serve; and the buffers it works in.
#[derive(Default)]
struct Retrieval {
    candidates: Vec<usize>,
    only: Vec<u64>,
    found: Vec<(usize, usize)>,
    rest: Vec<u64>,
    probes: Probes,
    sieves: Sieves,
}

/// The buffers of one plan depth's expansion, kept from event to event: a retrieval
/// and its partners' filters made about fifteen small allocations each.
#[derive(Default)]
struct Scratch {
    group: Vec<u64>,
    survivors: Vec<u64>,
    fail: Vec<u64>,
    sets: Vec<u64>,
    retrieval: Retrieval,
}

/// The words from the first to the last nonzero one of `mask`.
fn words(mask: &[u64]) -> Words {
    let first = mask.iter().position(|&w| w != 0).unwrap_or(0);
    let last = mask.iter().rposition(|&w| w != 0).map_or(first, |i| i + 1);
    first..last.max(first)
}

/// The lowest bit set in `mask`.
fn first_bit(mask: &[u64]) -> Option<usize> {
    mask.iter().position(|&w| w != 0).map(|w| w * 64 + mask[w].trailing_zeros() as usize)
}

fn mask_intersects(a: &[u64], b: &[u64]) -> bool {
    a.iter().zip(b).any(|(x, y)| x & y != 0)
}

impl Operator {
    pub fn new(retention: i64, lateness: i64) -> Self {
        Operator { retention, lateness, horizon: retention, nw: 1, alone: ALONE, windows: Blocked::new(true, 1),
                   ..Default::default() }
    }

    fn stream_mut(&mut self, s: u32) -> &mut StreamInfo {
        let s = s as usize;
        if self.streams.len() <= s {
            self.streams.resize(s + 1, StreamInfo::default());
        }
        &mut self.streams[s]
    }

    /// Make `stream` have at least `width` slots in every store.
    pub fn widen(&mut self, stream: u32, width: usize) {
        let s = stream as usize;
        if self.widths.len() <= s {
            self.widths.resize(s + 1, 1);
        }
        if width > self.widths[s] {
            self.widths[s] = width;
            for ks in self.keys.values_mut() {
                if let Some(store) = ks.stores.get_mut(s) {
                    store.widen(width);
                }
            }
        }
    }

    //
    // No registration's cost grows with what is registered (semantics section 7): lists
    // add an entry or a bit in `Blocked` storage, a node appends a check, a query's
    // plans are its own, and masks widen by doubling.
}
