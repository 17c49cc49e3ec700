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
use crate::lists::{AtCache, EqConst, EqList, Exact, Factor, RangeList, Words, bits, or_into};
use crate::ordering::{ALL, Expansion, Order, PRUNED, Phase, TypeManager, join_first};
use crate::store::{AHEAD, Bound, Pos, Sieve, Store};
use crate::value::V;

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

    // registration ---------------------------------------------------------------
    //
    // No registration's cost grows with what is registered (semantics section 7): lists
    // add an entry or a bit in `Blocked` storage, a node appends a check, a query's
    // plans are its own, and masks widen by doubling.

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

    fn free_bit(&mut self) -> usize {
        self.free_bits.pop().unwrap_or_else(|| {
            self.next_bit += 1;
            self.next_bit - 1
        })
    }

    fn add_query(&mut self, spec: QuerySpec, bit: usize, bulk: bool) {
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
    fn settle(&mut self) {
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
    fn drop_list(&mut self, list: ListRef) {
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

    fn grow(&mut self, nw: usize) {
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
    fn list(&mut self, key: ListKey, factor: Option<Factor>) -> ListRef {
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

    fn add_pred(&mut self, pred: &PredSpec, bit: usize, bulk: bool) -> (ListRef, u32) {
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

    /// Plan paths: from each of the query's streams, the others in FROM order; each
    /// node checks the join and window lists whose two streams it has just bound.
    fn add_paths(&mut self, spec: &QuerySpec, bit: usize, lists: &[(ListRef, u32)]) {
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
    fn path(spec: &QuerySpec, root: u32) -> Vec<u32> {
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

    fn new_node(&self, stream: u32, depth: usize) -> Node {
        Node { stream, depth, mask: vec![0; self.nw], ends: vec![0; self.nw], widest: 0, children: Vec::new(),
               checks: Vec::new(), check_at: FxHashMap::default(), windowed: Vec::new(), checks_of: PerBit::default(),
               check_sets: CheckSets::default(), attrs_of: PerBit::default(), own: OwnPlans::default() }
    }

    /// Query `bit`'s own plan at node `c` (see `OwnPlans`): its window lists in the
    /// node's order, then its join lists to bound streams, its attribute lists, and
    /// its join lists to streams bound after the node's (`ahead`: each list, the
    /// partner's slot, whether the partner is its left side, and the other side).
    fn own_plan(&self, c: &Node, bit: usize, ahead: &[(ListRef, usize, bool, (u32, usize))])
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
    fn own_constant(&self, list: ListRef, bit: usize) -> Option<(f64, u32)> {
        match list {
            ListRef::Range(j) => self.ranges[j].tighter(bit),
            ListRef::Eq(j) => self.eqs[j].pinned(bit).and_then(|(c, pred)| c.number().map(|t| (t, pred))),
        }
    }

    /// The interval of `d` (an attribute's value, or a pair's `l - f*r`) that `list`
    /// allows at constant `t`: from it up (a lower list), up to it (an upper one), or
    /// it alone (an equality list).
    fn allowed(&self, list: ListRef, t: f64) -> (f64, f64) {
        match list {
            ListRef::Range(j) if self.ranges[j].lower => (t, f64::INFINITY),
            ListRef::Range(_) => (f64::NEG_INFINITY, t),
            ListRef::Eq(_) => (t, t),
        }
    }

    /// The interval of `d` every query of `group` (words `r`) allows in `list`, when
    /// each has a constant there: a range list's loosest, or the hull of a few
    /// queries' equality constants; None otherwise (the list then bounds nothing).
    fn allowed_all(&self, list: ListRef, group: &[u64], r: &Words) -> Option<(f64, f64)> {
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
    fn window_interval(&self, list: ListRef, bit: usize, shared: Option<(&[u64], &Words)>) -> Option<(i128, i128)> {
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
    fn or_served(&self, list: ListRef, pred: u32, at: &AtCache, out: &mut [u64], r: &Words) {
        match list {
            ListRef::Range(j) => self.ranges[j].or_tighter(pred, at, out, r),
            ListRef::Eq(j) => self.eqs[j].or_same(pred, out, r),
        }
    }

    fn add_window(&mut self, window: i64, bit: usize, bulk: bool) {
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

    fn window_heads(&mut self) {
        self.window_heads = self.windows.blocks().iter().map(|b| b.entries[0].window).collect();
    }

    /// The largest MAXWINDOW among `group`'s queries (State-Slice: a group of narrow
    /// queries does not retrieve what only a wider one could use).
    fn widest(&self, group: &[u64]) -> i64 {
        self.windows.last_hit(group, &(0..group.len())).map_or(0, |at| self.windows.entry(at).window)
    }

    /// Clear in words `r` of `mask` the queries whose MAXWINDOW is below `span`;
    /// whether any query is left there.
    #[inline(always)]
    fn clear_narrow(&self, span: i128, mask: &mut [u64], r: &Words) -> bool {
        let k0 = self.window_heads.partition_point(|&w| (w as i128) < span);
        let at = self.windows.locate(k0, |c| (c.window as i128) < span);
        self.windows.clear_before(at, mask, r)
    }

    // events ---------------------------------------------------------------------

    /// The queries an event's own values fail: its attribute and in-event lists.
    fn attr_fail(&self, stream: u32, row: &[V], out: &mut [u64], exact: &mut dyn Exact) {
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
    fn cached_fail<'a>(&self, store: &'a mut Store, stream: u32, i: usize, exact: &mut dyn Exact) -> &'a [u64] {
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

    fn insert(&mut self, ks: &mut KeyState, ev: Incoming) -> usize {
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
    fn evaluate(&mut self, ks: &mut KeyState, stream: u32, i: usize, mask: &mut [u64], before: u64, live: bool,
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
    fn emit(&self, ks: &KeyState, node: usize, mask: &[u64], partial: &[(u32, usize)], ts: i64, out: &mut Vec<Hit>) {
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
    fn factor(&self, list: ListRef) -> f64 {
        let factor = match list {
            ListRef::Range(j) => self.ranges[j].factor,
            ListRef::Eq(j) => self.eqs[j].factor,
        };
        factor.expect("a pair list").f
    }

    /// Whether a query of `mask`'s words `r` has a predicate in `check`'s list.
    #[inline(always)]
    fn touches(&self, check: &Check, mask: &[u64], r: &Words) -> bool {
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
    fn probe_lists<'a>(&self, ks: &KeyState, checks: impl Iterator<Item = &'a Check>, phase: Phase,
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
    fn expand(&self, ks: &mut KeyState, node: usize, partial: &mut Vec<(u32, usize)>, mask: &[u64],
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
    fn measure(&self, ks: &mut KeyState, root: usize, tuple: (u32, usize), mask: &[u64], fail: &[u64],
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

    /// The node's time range narrowed by each window list (a `ts` against a bound
    /// stream's `ts`) in which every query of `group` has a predicate: the WES probe of
    /// the window type. Times are ints, so the bounds are exact. Inlined: it runs per
    /// child of every bound tuple (see `lists::diff`).
    #[inline(always)]
    fn narrowed(&self, ks: &KeyState, c: &Node, partial: &[(u32, usize)], group: &[u64], lo: i128,
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
    fn narrowed_for(&self, ks: &KeyState, c: &Node, partial: &[(u32, usize)], bit: usize,
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
    fn partner_ranges(&self, ks: &KeyState, c: &Node, partial: &[(u32, usize)], bit: usize,
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
    fn sieves(&self, ks: &KeyState, c: &Node, partial: &[(u32, usize)], q: &[u64],
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
    fn sieve(&self, ks: &KeyState, c: &Node, partial: &[(u32, usize)], bit: usize, shared: Option<(&[u64], &Words)>,
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
    fn slices(&self, q: &[u64], r: &Words, slices: &mut Vec<u64>, widest: &mut Vec<i64>) {
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
    fn retrieve(&self, ks: &mut KeyState, c: &Node, partial: &[(u32, usize)], group: &[u64], (lo, hi): (i128, i128),
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
    fn cover(&self, ks: &mut KeyState, c: &Node, partial: &[(u32, usize)], group: &[u64], limit: usize,
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::lists::NoExact;
    use crate::ordering::STATIC_ORDERS;

    /// A small deterministic generator (the tests draw without a dependency).
    struct Lcg(u64);

    impl Lcg {
        fn below(&mut self, n: u64) -> u64 {
            self.0 = self.0.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
            (self.0 >> 33) % n
        }
    }

    /// Int predicates a brute force can evaluate: `stream.slot >= or <= t`, or
    /// `l - r >= or <= t` on two streams' slots (slot 0 is `ts`).
    #[derive(Clone, Copy)]
    enum Cond {
        Attr(u32, usize, bool, i64),
        Pair((u32, usize), (u32, usize), bool, i64),
    }

    fn holds(cond: Cond, value: impl Fn(u32, usize) -> i64) -> bool {
        let (v, lower, t) = match cond {
            Cond::Attr(s, slot, lower, t) => (value(s, slot), lower, t),
            Cond::Pair(l, r, lower, t) => (value(l.0, l.1) - value(r.0, r.1), lower, t),
        };
        if lower { v >= t } else { v <= t }
    }

    #[test]
    fn sieved_retrieval_finds_what_brute_force_finds_with_many_windows_and_orders() {
        let mut rng = Lcg(7);
        let one = Factor { f: 1.0, int: Some(1) };
        // more distinct MAXWINDOWs than SLICES, so slices merge adjacent windows
        let windows = [20, 45, 75, 120, 200, 325, 500];
        let mut queries: Vec<(Vec<u32>, i64, Vec<Cond>)> = Vec::new();
        for _ in 0..60 {
            let streams: Vec<u32> = if rng.below(3) == 0 { vec![0, 1, 2] } else { vec![0, 1] };
            let window = windows[rng.below(windows.len() as u64) as usize];
            let mut conds = vec![Cond::Pair((0, 1), (1, 1), rng.below(2) == 0, rng.below(80) as i64 - 40)];
            if rng.below(2) == 0 {
                conds.push(Cond::Attr(1, 2, rng.below(2) == 0, rng.below(100) as i64));
            }
            if rng.below(3) == 0 {
                conds.push(Cond::Pair((1, 0), (0, 0), rng.below(2) == 0, rng.below(400) as i64 - 200));
            }
            if streams.len() == 3 {
                // the third stream joined by value, or linked by time only
                conds.push(if rng.below(2) == 0 {
                    Cond::Pair((2, 2), (1, 2), rng.below(2) == 0, rng.below(60) as i64 - 30)
                } else {
                    Cond::Pair((2, 0), (0, 0), rng.below(2) == 0, rng.below(600) as i64 - 300)
                });
            }
            queries.push((streams, window, conds));
        }
        let mut events = Vec::new();
        let mut ts = 0;
        for seq in 0..600u64 {
            ts += rng.below(20) as i64;
            let stream = rng.below(3) as u32;
            events.push((seq, stream, ts, rng.below(100) as i64, rng.below(100) as i64));
        }
        let value = |e: &(u64, u32, i64, i64, i64), slot: usize| [e.2, e.3, e.4][slot];
        let mut expected = Vec::new();
        for (q, (streams, window, conds)) in queries.iter().enumerate() {
            // every combination of the query's streams within its window
            let mut combos: Vec<Vec<&(u64, u32, i64, i64, i64)>> = vec![vec![]];
            for &s in streams {
                combos = combos
                    .iter()
                    .flat_map(|combo| {
                        events.iter().filter(move |e| e.1 == s).filter_map(move |e| {
                            let ts = combo.iter().map(|c| c.2).chain([e.2]);
                            (ts.clone().max().unwrap() - ts.min().unwrap() <= *window).then(|| [&combo[..], &[e]].concat())
                        })
                    })
                    .collect();
            }
            for combo in combos {
                if conds.iter().all(|&c| holds(c, |s, slot| value(combo[s as usize], slot))) {
                    expected.push((q, combo.iter().map(|e| e.0).collect::<Vec<_>>()));
                }
            }
        }
        expected.sort();
        assert!(expected.len() > 100, "a test with results: {}", expected.len());
        // each query's own sieve, and MAXWINDOW slices only
        for (order, alone) in [(STATIC_ORDERS[0], ALONE), (STATIC_ORDERS[2], ALONE), (STATIC_ORDERS[5], ALONE),
                               (STATIC_ORDERS[0], 0), (STATIC_ORDERS[5], 0)] {
            let mut op = Operator::new(0, 0);
            op.alone = alone;
            op.types = TypeManager::new(Some(order), 128);
            for s in 0..3 {
                op.widen(s, 3);
            }
            let mut bits = Vec::new();
            for (k, (streams, window, conds)) in queries.iter().enumerate() {
                let preds = conds.iter().enumerate().map(|(i, &c)| {
                    let id = (k * 8 + i) as u32;
                    match c {
                        Cond::Attr(stream, slot, lower, t) => {
                            PredSpec::Range { id, stream, slot, lower, tf: t as f64, ti: t as i128 }
                        }
                        Cond::Pair(l, r, lower, t) => {
                            PredSpec::PairRange { id, l, r, lower, factor: one, tf: t as f64, ti: t as i128 }
                        }
                    }
                });
                bits.push(op.register(QuerySpec { streams: streams.clone(), window: *window, preds: preds.collect() }));
            }
            let mut got = Vec::new();
            for &(seq, stream, ts, x, y) in &events {
                let incoming = Incoming { stream, key: "k", ts, shape: 0, row: vec![V::I(ts), V::I(x), V::I(y)], pos: (0, 0) };
                for hit in op.process(incoming, &mut NoExact).ok().unwrap() {
                    got.push((bits.iter().position(|&b| b == hit.bit).unwrap(), hit.seqs));
                }
                assert_eq!(op.seq, seq + 1);
            }
            got.sort();
            assert_eq!(got, expected, "order {order:?} alone {alone}");
        }
    }

    #[test]
    fn per_bit_runs_survive_rewrites_and_compaction() {
        let mut per = PerBit::default();
        let mut expected: Vec<Vec<u32>> = vec![Vec::new(); 40];
        let mut rng = Lcg(3);
        // enough rewrites that the arena is compacted many times
        for round in 0..2000 {
            let bit = rng.below(40) as usize;
            match round % 4 {
                0 => {
                    let ks: Vec<u32> = (0..rng.below(5)).map(|_| rng.below(30) as u32).collect();
                    per.put(bit, &ks);
                    expected[bit] = ks;
                }
                1 | 2 => {
                    let k = rng.below(30) as u32;
                    per.add(bit, k as usize);
                    if !expected[bit].contains(&k) {
                        expected[bit].push(k);
                    }
                }
                _ => {
                    per.put(bit, &[]);
                    expected[bit].clear();
                }
            }
            assert!(per.items.len() <= 2 * per.live + 64);
        }
        for (bit, ks) in expected.iter().enumerate() {
            assert_eq!(per.of(bit), &ks[..], "bit {bit}");
        }
        assert_eq!(per.of(99), &[] as &[u32]);
    }

    /// Every node's list sets hold exactly each query's list indices, and each phase
    /// finds its own lists among them.
    fn assert_list_sets_agree(op: &Operator) {
        for node in &op.nodes {
            for bit in 0..op.next_bit {
                let mut of: Vec<usize> = node.checks_of.of(bit).iter().map(|&k| k as usize).collect();
                of.sort();
                let mut mask = vec![0; op.nw];
                set(&mut mask, bit, true);
                let mut sets = vec![0; node.check_sets.words];
                node.check_sets.union(&mask, &(0..op.nw), &node.checks_of, &mut sets);
                assert_eq!(bits(&sets).collect::<Vec<_>>(), of, "bit {bit}");
                for (phase, window) in [(Phase::W, true), (Phase::J, false)] {
                    let listed: Vec<Check> = node.phase_checks(&sets, phase).copied().collect();
                    let expected: Vec<Check> = of.iter().map(|&k| node.checks[k]).filter(|c| c.window == window).collect();
                    assert_eq!(listed, expected, "bit {bit}");
                }
            }
        }
    }

    #[test]
    fn list_sets_follow_lists_inserted_before_others_and_deregistration() {
        let mut op = Operator::new(0, 0);
        op.widen(0, 2);
        op.widen(1, 2);
        let one = Factor { f: 1.0, int: Some(1) };
        let pair = |id, l, r, t| PredSpec::PairRange { id, l, r, lower: true, factor: one, tf: t as f64, ti: t };
        // a window list first, then join lists inserted before it (its index moves)
        let specs = [vec![pair(0, (1, 0), (0, 0), -5)], vec![pair(1, (1, 1), (0, 1), 0), pair(2, (1, 0), (0, 0), -5)],
                     vec![pair(3, (0, 1), (1, 1), 2)]];
        let mut bits = Vec::new();
        for preds in specs {
            bits.push(op.register(QuerySpec { streams: vec![0, 1], window: 10, preds }));
            assert_list_sets_agree(&op);
        }
        op.deregister(bits[1]);
        assert_list_sets_agree(&op);
        assert!(op.process(event(0, 0, 1), &mut NoExact).ok().unwrap().is_empty());
        // B.ts - A.ts >= -5 holds; B.x - A.x >= 0 would too, but its query is gone;
        // A.x - B.x >= 2 fails
        let hits = op.process(event(1, 3, 4), &mut NoExact).ok().unwrap();
        assert_eq!(hits.iter().map(|h| h.bit).collect::<Vec<_>>(), vec![bits[0]]);
    }

    /// Hundreds of join queries sharing join, attribute and window lists (many
    /// distinct constants and a few repeated by many queries) and hundreds of distinct
    /// MAXWINDOWs, so masks are wide enough for blocks of several entries: queries
    /// come (one at a time and in bulk) and go between events, and every result is
    /// the brute force's: each combination within the query's window whose last event
    /// arrived while it was registered.
    #[test]
    fn many_join_queries_coming_and_going_find_what_brute_force_finds() {
        let mut rng = Lcg(11);
        let one = Factor { f: 1.0, int: Some(1) };
        // the horizon covers every window from the start: no partner is dropped before
        // a wider query comes
        let mut op = Operator::new(3000, 0);
        op.types = TypeManager::new(Some(STATIC_ORDERS[0]), 128);
        for s in 0..2 {
            op.widen(s, 3);
        }
        let query = |rng: &mut Lcg| {
            let window = 10 + rng.below(300) as i64 * 10;
            let t = |rng: &mut Lcg, spread: u64| if rng.below(3) == 0 { 0 } else { rng.below(2 * spread) as i64 - spread as i64 };
            let mut conds = vec![Cond::Pair((0, 1), (1, 1), rng.below(2) == 0, t(rng, 40))];
            if rng.below(2) == 0 {
                conds.push(Cond::Attr(1, 2, rng.below(2) == 0, t(rng, 50) + 50));
            }
            if rng.below(3) == 0 {
                conds.push(Cond::Pair((1, 0), (0, 0), rng.below(2) == 0, t(rng, 200)));
            }
            // the same constant in the same list is one predicate, as Python ids them
            let preds = conds
                .iter()
                .map(|&c| match c {
                    Cond::Attr(stream, slot, lower, t) => {
                        let id = 1_000_000 + (lower as u32) * 1000 + (t + 500) as u32;
                        PredSpec::Range { id, stream, slot, lower, tf: t as f64, ti: t as i128 }
                    }
                    Cond::Pair(l, r, lower, t) => {
                        let id = 2_000_000 + l.0 * 100_000 + (lower as u32) * 10_000 + (t + 5000) as u32;
                        PredSpec::PairRange { id, l, r, lower, factor: one, tf: t as f64, ti: t as i128 }
                    }
                })
                .collect();
            (QuerySpec { streams: vec![0, 1], window, preds }, (window, conds))
        };
        // per query (in creation order): its window and conditions, and the arrival
        // numbers its results may end at
        let mut queries: Vec<((i64, Vec<Cond>), std::ops::Range<u64>)> = Vec::new();
        let mut live: Vec<(usize, usize)> = Vec::new(); // (bit, query)
        let mut events: Vec<(u64, u32, i64, i64, i64)> = Vec::new();
        let mut got: Vec<(usize, Vec<u64>)> = Vec::new();
        let (mut ts, mut seq) = (0, 0u64);
        for round in 0..300 {
            match rng.below(10) {
                0 | 1 => {
                    // in bulk (hundreds at once every few rounds), or a few
                    let n = if round % 10 == 0 { 300 } else { 1 + rng.below(3) as usize };
                    let made: Vec<_> = (0..n).map(|_| query(&mut rng)).collect();
                    let bits = if n == 1 {
                        vec![op.register(made[0].0.clone())]
                    } else {
                        op.register_many(made.iter().map(|m| m.0.clone()).collect())
                    };
                    for (bit, (_, q)) in bits.into_iter().zip(made) {
                        live.push((bit, queries.len()));
                        queries.push((q, seq..u64::MAX));
                    }
                }
                2 if !live.is_empty() => {
                    // a query, or a third of them
                    let gone: Vec<usize> = if rng.below(3) == 0 {
                        (0..live.len()).filter(|i| i % 3 == 0).collect()
                    } else {
                        vec![rng.below(live.len() as u64) as usize]
                    };
                    for i in gone.into_iter().rev() {
                        let (bit, q) = live.remove(i);
                        op.deregister(bit);
                        queries[q].1.end = seq;
                    }
                }
                _ => {
                    ts += rng.below(25) as i64;
                    let stream = rng.below(2) as u32;
                    let (x, y) = (rng.below(100) as i64, rng.below(100) as i64);
                    let incoming = Incoming { stream, key: "k", ts, shape: 0, row: vec![V::I(ts), V::I(x), V::I(y)], pos: (0, 0) };
                    for hit in op.process(incoming, &mut NoExact).ok().unwrap() {
                        let q = live.iter().find(|(bit, _)| *bit == hit.bit).expect("a live query's result").1;
                        got.push((q, hit.seqs));
                    }
                    events.push((seq, stream, ts, x, y));
                    seq += 1;
                }
            }
        }
        assert!(op.nw >= 16, "wide masks: {} words", op.nw);
        let value = |e: &(u64, u32, i64, i64, i64), slot: usize| [e.2, e.3, e.4][slot];
        let mut expected = Vec::new();
        for (q, ((window, conds), alive)) in queries.iter().enumerate() {
            for a in events.iter().filter(|e| e.1 == 0) {
                for b in events.iter().filter(|e| e.1 == 1) {
                    let last = a.0.max(b.0);
                    let fits = (a.2 - b.2).abs() <= *window && alive.contains(&last);
                    let row = |s: u32| if s == 0 { a } else { b };
                    if fits && conds.iter().all(|&c| holds(c, |s, slot| value(row(s), slot))) {
                        expected.push((q, vec![a.0, b.0]));
                    }
                }
            }
        }
        got.sort();
        expected.sort();
        assert!(expected.len() > 1000, "a test with results: {}", expected.len());
        assert_eq!(got.len(), expected.len());
        assert!(got == expected);
    }

    fn event(stream: u32, ts: i64, x: i64) -> Incoming<'static> {
        Incoming { stream, key: "k", ts, shape: 0, row: vec![V::I(ts), V::I(x)], pos: (0, ts) }
    }

    #[test]
    fn a_join_query_pairs_events_within_its_window_and_predicates() {
        let mut op = Operator::new(0, 0);
        op.widen(0, 2);
        op.widen(1, 2);
        // q: FROM A, B MAXWINDOW 10 WHERE A.x > 5 AND A.x < B.x  (A.x - B.x < 0)
        let q = QuerySpec {
            streams: vec![0, 1],
            window: 10,
            preds: vec![
                PredSpec::Range { id: 0, stream: 0, slot: 1, lower: true, tf: 5.000000000000001, ti: 6 },
                PredSpec::PairRange { id: 1, l: (0, 1), r: (1, 1), lower: false, factor: Factor { f: 1.0, int: Some(1) }, tf: 0.0, ti: -1 },
            ],
        };
        let bit = op.register(q);
        assert!(op.process(event(0, 0, 6), &mut NoExact).ok().unwrap().is_empty());
        assert!(op.process(event(0, 1, 4), &mut NoExact).ok().unwrap().is_empty());
        let hits = op.process(event(1, 5, 7), &mut NoExact).ok().unwrap();
        assert_eq!(hits.len(), 1);
        assert_eq!((hits[0].bit, hits[0].seqs.clone()), (bit, vec![0, 2]));
        // too far from the A events
        assert!(op.process(event(1, 11, 9), &mut NoExact).ok().unwrap().is_empty());
        assert!(op.process(event(1, 0, 9), &mut NoExact).is_err());
        op.deregister(bit);
        assert!(op.process(event(0, 12, 8), &mut NoExact).ok().unwrap().is_empty());
    }
}
