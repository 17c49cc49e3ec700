//! Predicate lists (semantics section 6): similar predicates share a list, and one probe
//! per list yields, as a query mask, every query whose predicate in it fails.
//!
//! Every list answers exactly what the predicates say (semantics section 2). Python
//! computes, once per predicate, the thresholds that make a comparison of a double or
//! a 64-bit int exact (`juggler.engine.native_engine`); a pair difference
//! `d = l - f*r` is exact in i128 when both values are ints and `f` an integer, and is
//! otherwise computed in doubles with an error bound; whatever the bound cannot decide
//! (a difference within rounding of a constant, an int beyond 64 bits) goes to
//! `Exact`, which Python answers with rational arithmetic.

use std::cmp::Ordering;
use std::sync::atomic::AtomicU64;
use std::sync::atomic::Ordering::Relaxed;

use rustc_hash::FxHashMap;

use crate::blocks::{At, Blocked, Few, QSet, first};
use crate::masks::{Words, bits};
use crate::value::{NumKey, V, num_key};

/// The exact fallback: whether predicate `pred` holds on these values.
pub trait Exact {
    fn attr(&mut self, pred: u32, v: &V) -> bool;
    fn pair(&mut self, pred: u32, l: &V, r: &V) -> bool;
}

/// Relative error allowed for `x - f*y` computed in doubles (`exact._BAND`), doubled
/// to cover the rounding of the constant it is compared with.
const BAND: f64 = 1.0 / (1u64 << 47) as f64;

/// The factor of a pair list `l op f*r + o`.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Factor {
    pub f: f64,
    /// `f` when it is an integer that fits 64 bits: pairs of ints are then exact in i128.
    pub int: Option<i64>,
}

/// A difference `l - f*r`: exact, or a double with a bound on its error.
enum Diff {
    Int(i128),
    Float(f64, f64),
    /// An int beyond 64 bits or a value of another type: only `Exact` can tell.
    Unknown,
    /// A value that satisfies nothing (a missing column).
    Fails,
    /// Two strings or booleans: equal or not.
    Equal(bool),
}

/// `l - f*r` (see `Diff`). Inlined, as `RangeList::at_int` is: every list probe of a
/// partner computes it, and their calls were 1% of the instructions of J n=100 with
/// `Operator::narrowed`'s.
#[inline(always)]
fn diff(factor: Factor, l: &V, r: &V) -> Diff {
    match (l, r) {
        (V::Missing, _) | (_, V::Missing) => Diff::Fails,
        (V::X(_), _) | (_, V::X(_)) => Diff::Unknown,
        (V::I(a), V::I(b)) if factor.int.is_some() => {
            Diff::Int(*a as i128 - factor.int.unwrap() as i128 * *b as i128)
        }
        (V::I(_) | V::F(_), V::I(_) | V::F(_)) => {
            let (x, y) = (l.as_f64().unwrap(), r.as_f64().unwrap());
            let product = factor.f * y;
            let d = x - product;
            let err = (x.abs() + 2.0 * product.abs() + d.abs()) * BAND + 1e-300;
            if d.is_finite() && err.is_finite() { Diff::Float(d, err) } else { Diff::Unknown }
        }
        _ => match l.py_eq(r) {
            Some(eq) => Diff::Equal(eq),
            None => Diff::Unknown,
        },
    }
}

fn count_le<T: PartialOrd>(v: &[T], x: &T) -> usize {
    v.partition_point(|t| t <= x)
}

fn count_lt<T: PartialOrd>(v: &[T], x: &T) -> usize {
    v.partition_point(|t| t < x)
}

/// Up to this many queries, the loosest entry among theirs is sought entry by entry.
const FEW_QUERIES: u32 = 4;

/// A threshold as a range list orders its entries: (tf, ti, predicate).
pub type Threshold = (f64, i128, u32);

fn cmp2(a: (f64, i128), b: (f64, i128)) -> Ordering {
    a.0.total_cmp(&b.0).then(a.1.cmp(&b.1))
}

#[derive(Clone, Debug)]
pub struct RangeEntry {
    pub pred: u32,
    /// Attribute list: the double threshold (`v >= tf` or `v <= tf` decides exactly for
    /// doubles). Pair list: the constant `o` rounded to the nearest double.
    pub tf: f64,
    /// The integer threshold: an int (or an exact int difference) satisfies the
    /// predicate iff it is `>= ti` (lower) or `<= ti` (upper).
    pub ti: i128,
    pub set: QSet,
}

crate::member!(RangeEntry);

fn range_order(a: &RangeEntry, b: &RangeEntry) -> Ordering {
    cmp2((a.tf, a.ti), (b.tf, b.ti)).then(a.pred.cmp(&b.pred))
}

/// `>`/`>=` (lower: satisfied above the constants) or `<`/`<=` predicates on one
/// column (attribute) or on one difference `l - f*r` (pair), sorted by threshold in
/// `Blocked` storage: the queries failing at a value are the entries past it (a lower
/// list) or before it (an upper one), one union row and at most a block's entries.
#[derive(Clone, Debug)]
pub struct RangeList {
    pub lower: bool,
    pub factor: Option<Factor>,
    sorted: Blocked<RangeEntry>,
    /// Each block's first thresholds, contiguous: a probe's first binary search reads
    /// these, not the entries (64 bytes each, spread over the blocks).
    heads_tf: Vec<f64>,
    heads_ti: Vec<i128>,
    /// Per predicate in the list, its thresholds.
    preds: FxHashMap<u32, Pred>,
    /// Per query bit, its predicates in the list: its own thresholds, for a group of a
    /// few queries' loosest, a query's tightest, and where a deleted query's remaining
    /// entries are.
    own: FxHashMap<u32, Few>,
    nw: usize,
    /// Counts changes to the entries' positions (see `or_tighter`), from 1.
    version: u64,
}

/// A predicate of a range list: its thresholds.
#[derive(Clone, Copy, Debug)]
struct Pred {
    tf: f64,
    ti: i128,
}

/// A position in a range list remembered with the list's version then (see
/// `RangeList::or_tighter`). Atomics only to be shareable as the Python class must
/// be; the operator runs under the GIL.
#[derive(Debug, Default)]
pub struct AtCache([AtomicU64; 2]);

impl AtCache {
    fn get(&self, version: u64) -> Option<At> {
        (self.0[0].load(Relaxed) == version).then(|| {
            let at = self.0[1].load(Relaxed);
            ((at >> 32) as usize, at as u32 as usize)
        })
    }

    fn set(&self, version: u64, (k, j): At) {
        self.0[1].store(((k as u64) << 32) | j as u64, Relaxed);
        self.0[0].store(version, Relaxed);
    }
}

impl Clone for AtCache {
    fn clone(&self) -> Self {
        AtCache::default()
    }
}

impl RangeList {
    pub fn new(lower: bool, factor: Option<Factor>, nw: usize) -> Self {
        RangeList { lower, factor, sorted: Blocked::new(true, nw), heads_tf: Vec::new(), heads_ti: Vec::new(),
                    preds: FxHashMap::default(), own: FxHashMap::default(), nw, version: 1 }
    }

    /// Entries (predicates) in the list.
    pub fn len(&self) -> usize {
        self.sorted.len()
    }

    pub fn is_empty(&self) -> bool {
        self.sorted.is_empty()
    }

    fn heads(&mut self) {
        self.heads_tf = self.sorted.blocks().iter().map(|b| b.entries[0].tf).collect();
        self.heads_ti = self.sorted.blocks().iter().map(|b| b.entries[0].ti).collect();
    }

    /// The first position whose thresholds are not `below`, searched in the heads,
    /// then in one block.
    #[inline(always)]
    fn position(&self, below: impl Fn(f64, i128) -> bool) -> At {
        let k0 = first(self.heads_tf.len(), |k| !below(self.heads_tf[k], self.heads_ti[k]));
        self.sorted.locate(k0, |e| below(e.tf, e.ti))
    }

    /// Where predicate `pred` with thresholds (tf, ti) is, or would go; whether it is
    /// there.
    fn find(&self, tf: f64, ti: i128, pred: u32) -> (At, bool) {
        let mut at = self.position(|a, b| cmp2((a, b), (tf, ti)) == Ordering::Less);
        while at.0 < self.sorted.blocks().len() {
            let e = self.sorted.entry(at);
            if cmp2((e.tf, e.ti), (tf, ti)) != Ordering::Equal || e.pred >= pred {
                return (at, e.pred == pred && cmp2((e.tf, e.ti), (tf, ti)) == Ordering::Equal);
            }
            at = self.sorted.next(at);
        }
        (at, false)
    }

    /// Add query `bit`'s predicate `pred` with thresholds (tf, ti). `bulk`: it waits
    /// for `settle`, which sorts every waiting entry in at once.
    pub fn add(&mut self, pred: u32, tf: f64, ti: i128, bit: u32, bulk: bool) {
        self.own.entry(bit).or_default().add(pred);
        self.preds.entry(pred).or_insert(Pred { tf, ti });
        self.version += 1;
        if bulk {
            self.sorted.push(RangeEntry { pred, tf, ti, set: QSet::one(bit, self.nw) });
            return;
        }
        let (at, found) = self.find(tf, ti, pred);
        let before = self.sorted.blocks().len();
        let k = if found {
            self.sorted.add_bit(at, bit);
            at.0
        } else {
            self.sorted.insert(at, RangeEntry { pred, tf, ti, set: QSet::one(bit, self.nw) })
        };
        self.heads_after(k, before);
    }

    /// The heads once an entry went into block `k` of the `before` there were: only
    /// that block's head can have changed, and a block cut from it (blocks split in
    /// two) adds the one after it. Taking every block's head again instead cost each
    /// registration at a list's end (where rising thresholds go) as many steps as the
    /// list has blocks, a quarter of a burst's registration in the operator.
    fn heads_after(&mut self, k: usize, before: usize) {
        let blocks = self.sorted.blocks();
        let grown = blocks.len().checked_sub(before).filter(|&g| g <= 1);
        let Some(grown) = grown.filter(|_| k < before && self.heads_tf.len() == before) else {
            self.heads();
            return;
        };
        let e = &blocks[k].entries[0];
        (self.heads_tf[k], self.heads_ti[k]) = (e.tf, e.ti);
        if grown == 1 {
            let e = &blocks[k + 1].entries[0];
            self.heads_tf.insert(k + 1, e.tf);
            self.heads_ti.insert(k + 1, e.ti);
        }
    }

    /// Remove query `bit` from predicate `pred`'s entry (the entry goes with its last
    /// query).
    pub fn remove(&mut self, pred: u32, bit: u32) {
        debug_assert!(!self.sorted.unsettled());
        let Some(&Pred { tf, ti, .. }) = self.preds.get(&pred) else { return };
        self.version += 1;
        if let Some(own) = self.own.get_mut(&bit) {
            own.remove(pred);
            if own.is_empty() {
                self.own.remove(&bit);
            }
        }
        let (at, found) = self.find(tf, ti, pred);
        if !found {
            return;
        }
        if self.sorted.take_bit(at, bit).is_some() {
            self.preds.remove(&pred);
        }
        self.heads();
        let blocks: Vec<usize> = self.own_keys(bit as usize).map(|(tf, ti, p)| self.find(tf, ti, p).0.0).collect();
        let span = blocks.iter().min().map(|&a| (a, *blocks.iter().max().unwrap()));
        self.sorted.fix_rows(bit, span);
        self.heads();
    }

    /// Sort in what `add` left waiting, for masks of `nw` words (also after the mask
    /// size changed: the blocks are cut for it).
    pub fn settle(&mut self, nw: usize) {
        self.nw = nw;
        self.version += 1;
        self.sorted.settle(nw, range_order);
        self.heads();
    }

    pub fn unsettled(&self) -> bool {
        self.sorted.unsettled()
    }

    /// Query `bit`'s thresholds in the list.
    fn own_keys(&self, bit: usize) -> impl Iterator<Item = Threshold> + '_ {
        let preds = self.own.get(&(bit as u32)).map_or(&[][..], |few| few.as_slice());
        preds.iter().map(|p| {
            let Pred { tf, ti, .. } = self.preds[p];
            (tf, ti, *p)
        })
    }

    fn loosest_of(&self, keys: impl Iterator<Item = Threshold>) -> Option<Threshold> {
        let order = |a: &Threshold, b: &Threshold| cmp2((a.0, a.1), (b.0, b.1)).then(a.2.cmp(&b.2));
        if self.lower { keys.min_by(order) } else { keys.max_by(order) }
    }

    /// The loosest threshold (tf, ti) among those of `group`'s queries (the lowest of
    /// a lower list, the highest of an upper one), looking at words `r`: for a few
    /// queries, the loosest of their own entries; else the first (last) entry holding
    /// one of them, found by the blocks' union rows.
    pub fn loosest(&self, group: &[u64], r: &Words) -> Option<(f64, i128)> {
        if group[r.clone()].iter().map(|w| w.count_ones()).sum::<u32>() <= FEW_QUERIES {
            let keys = bits(&group[r.clone()]).flat_map(|b| self.own_keys(r.start * 64 + b));
            return self.loosest_of(keys).map(|(tf, ti, _)| (tf, ti));
        }
        let at = if self.lower { self.sorted.first_hit(group, r) } else { self.sorted.last_hit(group, r) }?;
        let e = self.sorted.entry(at);
        Some((e.tf, e.ti))
    }

    /// Whether a query of `mask`'s words `r` has a predicate in the list.
    #[inline(always)]
    pub fn touches(&self, mask: &[u64], r: &Words) -> bool {
        self.sorted.touches(mask, r)
    }

    /// Whether every query of `group`'s words `r` has a predicate in the list.
    #[inline(always)]
    pub fn covers(&self, group: &[u64], r: &Words) -> bool {
        self.sorted.covers(group, r).unwrap_or_else(|| {
            group[r.clone()].iter().map(|w| w.count_ones() as usize).sum::<usize>() <= self.own.len()
                && bits(&group[r.clone()]).all(|b| self.own.contains_key(&((r.start * 64 + b) as u32)))
        })
    }

    fn tightest_key(&self, bit: usize) -> Option<Threshold> {
        let keys = self.own_keys(bit);
        let order = |a: &Threshold, b: &Threshold| cmp2((a.0, a.1), (b.0, b.1)).then(a.2.cmp(&b.2));
        if self.lower { keys.max_by(order) } else { keys.min_by(order) }
    }

    /// Query `bit`'s tightest threshold (what every event it can use satisfies) as its
    /// tf and the predicate holding it, what `or_tighter` takes.
    pub fn tighter(&self, bit: usize) -> Option<(f64, u32)> {
        self.tightest_key(bit).map(|(tf, _, pred)| (tf, pred))
    }

    /// Query `bit`'s tightest (tf, ti).
    pub fn tightest(&self, bit: usize) -> Option<(f64, i128)> {
        self.tightest_key(bit).map(|(tf, ti, _)| (tf, ti))
    }

    /// OR into words `r` of `out` every query with a threshold at least as tight as
    /// predicate `pred`'s (at or above it in a lower list, at or below it in an upper
    /// one): whatever satisfies one of them satisfies `pred`. `at` remembers where
    /// they start (end) until the list changes: this runs for every value-index probe
    /// a retrieval chooses, and finding the position anew each time was a twentieth
    /// of J n=100's instructions.
    #[inline(always)]
    pub fn or_tighter(&self, pred: u32, at: &AtCache, out: &mut [u64], r: &Words) {
        let found = at.get(self.version).or_else(|| {
            let p = self.preds.get(&pred)?;
            let t = (p.tf, p.ti);
            let found = if self.lower {
                self.position(|a, b| cmp2((a, b), t) == Ordering::Less)
            } else {
                self.position(|a, b| cmp2((a, b), t) != Ordering::Greater)
            };
            at.set(self.version, found);
            Some(found)
        });
        let Some(found) = found else { return };
        if self.lower { self.sorted.or_from(found, out, r) } else { self.sorted.or_before(found, out, r) }
    }

    /// The queries failing at position `at`: the entries from it on (a lower list) or
    /// before it (an upper one).
    #[inline(always)]
    fn failing(&self, at: At, out: &mut [u64], r: &Words) {
        if self.lower { self.sorted.or_from(at, out, r) } else { self.sorted.or_before(at, out, r) }
    }

    fn fail_all(&self, out: &mut [u64], r: &Words) {
        self.sorted.or_all(out, r);
    }

    /// The queries failing at an exact difference `d` (inlined: see `diff`).
    #[inline(always)]
    fn at_int(&self, d: i128, out: &mut [u64], r: &Words) {
        let at = if self.lower {
            self.sorted.locate(count_le(&self.heads_ti, &d), |e| e.ti <= d)
        } else {
            self.sorted.locate(count_lt(&self.heads_ti, &d), |e| e.ti < d)
        };
        self.failing(at, out, r);
    }

    fn ask<'a>(out: &mut [u64], r: &Words, entries: impl Iterator<Item = &'a RangeEntry>, mut holds: impl FnMut(u32) -> bool) {
        for e in entries {
            if !holds(e.pred) {
                e.set.or_into(out, r);
            }
        }
    }

    /// OR into `out` the queries whose predicate in this attribute list `v` fails.
    pub fn attr_fail(&self, v: &V, out: &mut [u64], r: &Words, exact: &mut dyn Exact) {
        match v {
            V::I(i) => self.at_int(*i as i128, out, r),
            V::F(f) => {
                let at = if self.lower {
                    self.sorted.locate(count_le(&self.heads_tf, f), |e| e.tf <= *f)
                } else {
                    self.sorted.locate(count_lt(&self.heads_tf, f), |e| e.tf < *f)
                };
                self.failing(at, out, r);
            }
            V::X(_) => Self::ask(out, r, self.sorted.iter(), |pred| exact.attr(pred, v)),
            _ => self.fail_all(out, r),
        }
    }

    /// OR into `out` the queries whose predicate `l - f*r op o` fails. Inlined into a
    /// partner's list probes, as the union of its queries' lists and its cached
    /// attribute mask are (`Operator::expand`): their calls were 0.7% of the
    /// instructions of J n=100.
    #[inline(always)]
    pub fn pair_fail(&self, l: &V, rv: &V, out: &mut [u64], r: &Words, exact: &mut dyn Exact) {
        match diff(self.factor.expect("a pair list"), l, rv) {
            Diff::Int(d) => self.at_int(d, out, r),
            Diff::Float(d, err) => {
                let margin = err + d.abs() * BAND;
                let (below, above) = (d - margin, d + margin);
                // before lo: o < d; from hi: o > d; between: too close to tell.
                let lo = self.sorted.locate(count_lt(&self.heads_tf, &below), |e| e.tf < below);
                let hi = self.sorted.locate(count_le(&self.heads_tf, &above), |e| e.tf <= above);
                self.failing(if self.lower { hi } else { lo }, out, r);
                if lo != hi {
                    Self::ask(out, r, self.sorted.between(lo, hi), |pred| exact.pair(pred, l, rv));
                }
            }
            Diff::Unknown => Self::ask(out, r, self.sorted.iter(), |pred| exact.pair(pred, l, rv)),
            Diff::Fails | Diff::Equal(_) => self.fail_all(out, r),
        }
    }

    /// Bytes held besides the struct itself.
    pub fn heap_bytes(&self) -> usize {
        self.sorted.heap_bytes()
            + self.heads_tf.capacity() * 8
            + self.heads_ti.capacity() * 16
            + self.preds.capacity() * (1 + std::mem::size_of::<(u32, Pred)>())
            + self.own.capacity() * (1 + std::mem::size_of::<(u32, Few)>())
    }
}

/// What an `=` or `!=` predicate compares with.
#[derive(Clone, Debug, PartialEq)]
pub enum EqConst {
    Num(NumKey),
    Str(Box<str>),
    Bool(bool),
    /// A rational that is neither an int nor a double: no value equals it.
    Never,
    /// A pair list's constant `o`: its nearest double, and the int it is if integral.
    Diff(f64, Option<i128>),
}

impl EqConst {
    /// The number every value equal to the constant is (as a double): None for a
    /// string or boolean, and for `Never` (no value equals it).
    pub fn number(&self) -> Option<f64> {
        match *self {
            EqConst::Num(NumKey::I(i)) => Some(i as f64),
            EqConst::Num(NumKey::F(bits)) => Some(f64::from_bits(bits)),
            EqConst::Diff(tf, _) => Some(tf),
            EqConst::Str(_) | EqConst::Bool(_) | EqConst::Never => None,
        }
    }
}

#[derive(Clone, Debug)]
pub struct EqEntry {
    pub eq: bool,
    pub constant: EqConst,
    pub set: QSet,
}

/// The queries with an `=` and those with a `!=` predicate against one constant.
#[derive(Clone, Debug, Default)]
struct ConstSets {
    eq: QSet,
    ne: QSet,
}

/// A pair list's entry by the double nearest its constant `o`.
#[derive(Clone, Debug)]
struct DiffEntry {
    tf: f64,
    pred: u32,
    set: QSet,
}

crate::member!(DiffEntry);

fn diff_order(a: &DiffEntry, b: &DiffEntry) -> Ordering {
    a.tf.total_cmp(&b.tf).then(a.pred.cmp(&b.pred))
}

/// `=` and `!=` predicates on one column (attribute) or one difference (pair): a hash
/// lookup of the value gives the failing queries (CACQ's grouped filter). At a value
/// `v`, the `=` queries fail but those whose `=` predicates all compare with `v` (a
/// query comparing with two constants fails whatever the value), and the `!=` queries
/// against `v` fail: so a constant keeps only its own queries, not a mask of all the
/// others (which made memory quadratic).
#[derive(Clone, Debug)]
pub struct EqList {
    pub factor: Option<Factor>,
    entries: FxHashMap<u32, EqEntry>,
    nums: FxHashMap<NumKey, ConstSets>,
    strs: FxHashMap<Box<str>, ConstSets>,
    bools: [ConstSets; 2],
    ints: FxHashMap<i128, ConstSets>,
    /// Every query with an `=` predicate in the list.
    eq_all: QSet,
    /// Every query of the list (a missing column fails them all).
    all: QSet,
    /// The queries whose `=` predicates compare with two constants or more.
    multi: QSet,
    own: FxHashMap<u32, Few>,
    /// Pair lists, doubles: the `=` entries (with union rows) and the `!=` entries in
    /// order of `o`.
    eqs: Blocked<DiffEntry>,
    nes: Blocked<DiffEntry>,
    nw: usize,
}

impl EqList {
    pub fn new(factor: Option<Factor>, nw: usize) -> Self {
        EqList { factor, entries: FxHashMap::default(), nums: FxHashMap::default(), strs: FxHashMap::default(),
                 bools: Default::default(), ints: FxHashMap::default(), eq_all: QSet::default(), all: QSet::default(),
                 multi: QSet::default(), own: FxHashMap::default(), eqs: Blocked::new(true, nw),
                 nes: Blocked::new(false, nw), nw }
    }

    pub fn len(&self) -> usize {
        self.entries.len()
    }

    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    fn sets_of(&mut self, c: &EqConst) -> Option<&mut ConstSets> {
        match c {
            EqConst::Num(k) => Some(self.nums.entry(*k).or_default()),
            EqConst::Str(s) => Some(self.strs.entry(s.clone()).or_default()),
            EqConst::Bool(b) => Some(&mut self.bools[*b as usize]),
            EqConst::Diff(_, Some(i)) => Some(self.ints.entry(*i).or_default()),
            EqConst::Never | EqConst::Diff(_, None) => None,
        }
    }

    /// Drop constant `c`'s sets once empty.
    fn forget(&mut self, c: &EqConst) {
        let empty = |s: &ConstSets| s.eq.is_empty() && s.ne.is_empty();
        match c {
            EqConst::Num(k) if self.nums.get(k).is_some_and(empty) => {
                self.nums.remove(k);
            }
            EqConst::Str(s) if self.strs.get(s).is_some_and(empty) => {
                self.strs.remove(s);
            }
            EqConst::Diff(_, Some(i)) if self.ints.get(i).is_some_and(empty) => {
                self.ints.remove(i);
            }
            _ => {}
        }
    }

    /// Whether query `bit` has a predicate `pred` satisfies, other than `except`.
    fn has_other(&self, bit: u32, except: u32, like: impl Fn(&EqEntry) -> bool) -> bool {
        self.own.get(&bit).is_some_and(|few| few.as_slice().iter().any(|p| *p != except && like(&self.entries[p])))
    }

    fn update_multi(&mut self, bit: u32) {
        let mut constants: Vec<&EqConst> = Vec::new();
        if let Some(few) = self.own.get(&bit) {
            for p in few.as_slice() {
                let e = &self.entries[p];
                if e.eq && !constants.contains(&&e.constant) {
                    constants.push(&e.constant);
                }
            }
        }
        if constants.len() >= 2 {
            self.multi.insert(bit, self.nw);
        } else {
            self.multi.remove(bit, self.nw);
        }
    }

    /// Add query `bit`'s predicate `pred` (`=` if `eq`, else `!=`) against `constant`.
    /// `bulk`: a pair list's ordered entries wait for `settle`.
    pub fn add(&mut self, pred: u32, eq: bool, constant: &EqConst, bit: u32, bulk: bool) {
        let nw = self.nw;
        let entry = self.entries.entry(pred).or_insert_with(|| EqEntry { eq, constant: constant.clone(), set: QSet::default() });
        entry.set.insert(bit, nw);
        self.own.entry(bit).or_default().add(pred);
        if let Some(sets) = self.sets_of(constant) {
            if eq { sets.eq.insert(bit, nw) } else { sets.ne.insert(bit, nw) };
        }
        self.all.insert(bit, nw);
        if eq {
            self.eq_all.insert(bit, nw);
        }
        self.update_multi(bit);
        if let EqConst::Diff(tf, _) = *constant {
            let list = if eq { &mut self.eqs } else { &mut self.nes };
            if bulk {
                list.push(DiffEntry { tf, pred, set: QSet::one(bit, nw) });
            } else {
                let at = list.search(|e| diff_order(e, &DiffEntry { tf, pred, set: QSet::default() }) == Ordering::Less);
                if at.0 < list.blocks().len() && list.entry(at).pred == pred {
                    list.add_bit(at, bit);
                } else {
                    list.insert(at, DiffEntry { tf, pred, set: QSet::one(bit, nw) });
                }
            }
        }
    }

    /// Remove query `bit` from predicate `pred`'s entry.
    pub fn remove(&mut self, pred: u32, bit: u32) {
        let nw = self.nw;
        let Some(entry) = self.entries.get_mut(&pred) else { return };
        let (eq, constant) = (entry.eq, entry.constant.clone());
        entry.set.remove(bit, nw);
        let gone = entry.set.is_empty();
        if let Some(own) = self.own.get_mut(&bit) {
            own.remove(pred);
            if own.is_empty() {
                self.own.remove(&bit);
            }
        }
        if !self.has_other(bit, pred, |e| e.eq == eq && e.constant == constant) {
            if let Some(sets) = self.sets_of(&constant) {
                if eq { sets.eq.remove(bit, nw) } else { sets.ne.remove(bit, nw) };
            }
            self.forget(&constant);
        }
        if !self.own.contains_key(&bit) {
            self.all.remove(bit, nw);
        }
        if !self.has_other(bit, pred, |e| e.eq) {
            self.eq_all.remove(bit, nw);
        }
        if gone {
            self.entries.remove(&pred);
        }
        self.update_multi(bit);
        if let EqConst::Diff(tf, _) = constant {
            let probe = DiffEntry { tf, pred, set: QSet::default() };
            let list = if eq { &mut self.eqs } else { &mut self.nes };
            let at = list.search(|e| diff_order(e, &probe) == Ordering::Less);
            if at.0 < list.blocks().len() && list.entry(at).pred == pred {
                list.take_bit(at, bit);
            }
            // where the bit's other entries of the same kind are
            let own: Vec<(f64, u32)> = self.own.get(&bit).map_or(Vec::new(), |few| {
                few.as_slice()
                    .iter()
                    .filter_map(|p| match self.entries[p] {
                        EqEntry { eq: e, constant: EqConst::Diff(tf, _), .. } if e == eq => Some((tf, *p)),
                        _ => None,
                    })
                    .collect()
            });
            let list = if eq { &mut self.eqs } else { &mut self.nes };
            let blocks: Vec<usize> = own
                .iter()
                .map(|&(tf, p)| list.search(|e| diff_order(e, &DiffEntry { tf, pred: p, set: QSet::default() }) == Ordering::Less).0)
                .collect();
            let span = blocks.iter().min().map(|&a| (a, *blocks.iter().max().unwrap()));
            list.fix_rows(bit, span);
        }
    }

    /// Sort in what `add` left waiting, for masks of `nw` words (also after the mask
    /// size changed).
    pub fn settle(&mut self, nw: usize) {
        let resized = nw != self.nw;
        self.nw = nw;
        if resized {
            let sets = self.entries.values_mut().map(|e| &mut e.set).chain([&mut self.eq_all, &mut self.all, &mut self.multi]);
            let consts = self.nums.values_mut().chain(self.strs.values_mut()).chain(self.ints.values_mut()).chain(self.bools.iter_mut());
            sets.chain(consts.flat_map(|c| [&mut c.eq, &mut c.ne])).for_each(|s| s.refit(nw));
        }
        if resized || self.eqs.unsettled() {
            self.eqs.settle(nw, diff_order);
        }
        if resized || self.nes.unsettled() {
            self.nes.settle(nw, diff_order);
        }
    }

    pub fn unsettled(&self) -> bool {
        self.eqs.unsettled() || self.nes.unsettled()
    }

    /// Whether a query of `mask`'s words `r` has a predicate in the list.
    #[inline(always)]
    pub fn touches(&self, mask: &[u64], r: &Words) -> bool {
        self.all.intersects(mask, r)
    }

    /// One of query `bit`'s `=` predicates and its constant: every value (or
    /// difference) the query can use equals it, so it bounds a retrieval as a range
    /// list's threshold does. None when the query has only `!=` here.
    pub fn pinned(&self, bit: usize) -> Option<(&EqConst, u32)> {
        let few = self.own.get(&(bit as u32))?;
        few.as_slice().iter().map(|p| (&self.entries[p], *p)).find(|(e, _)| e.eq).map(|(e, p)| (&e.constant, p))
    }

    /// The constants `pinned` gives for each of `group`'s queries (words `r`), when
    /// they are a few and each has one: a value outside their hull is of use to none
    /// of them. None otherwise (the retrieval is then not bounded by this list).
    pub fn pinned_all<'a>(&'a self, group: &[u64], r: &Words) -> Option<impl Iterator<Item = &'a EqConst> + 'a> {
        let few = group[r.clone()].iter().map(|w| w.count_ones()).sum::<u32>() <= FEW_QUERIES;
        let bits: Vec<usize> = bits(&group[r.clone()]).map(|b| r.start * 64 + b).collect();
        (few && bits.iter().all(|&b| self.pinned(b).is_some()))
            .then(move || bits.into_iter().map(move |b| self.pinned(b).expect("checked").0))
    }

    /// OR into words `r` of `out` the queries with predicate `pred`: a value (or
    /// difference) equal to its constant is what each of them needs.
    pub fn or_same(&self, pred: u32, out: &mut [u64], r: &Words) {
        if let Some(e) = self.entries.get(&pred) {
            e.set.or_into(out, r);
        }
    }

    fn ask(&self, out: &mut [u64], r: &Words, mut holds: impl FnMut(u32) -> bool) {
        for (&pred, e) in &self.entries {
            if !holds(pred) {
                e.set.or_into(out, r);
            }
        }
    }

    /// OR into words `r` of `out` the queries failing at a value equal to the constant
    /// whose sets are `found` (None: a value equal to no constant).
    #[inline(always)]
    fn fail_at(&self, found: Option<&ConstSets>, out: &mut [u64], r: &Words) {
        let Some(sets) = found else { return self.eq_all.or_into(out, r) };
        let except = &sets.eq;
        match (&self.eq_all, except) {
            (all, _) if except.is_empty() => all.or_into(out, r),
            (QSet::Dense(all, _), QSet::Dense(ex, _)) => {
                for w in r.clone() {
                    out[w] |= all[w] & !ex[w];
                }
            }
            (QSet::Dense(all, _), QSet::Sparse(ex)) => {
                let mut i = ex.partition_point(|&b| (b as usize / 64) < r.start);
                for w in r.clone() {
                    let mut m = all[w];
                    while i < ex.len() && ex[i] as usize / 64 == w {
                        m &= !(1 << (ex[i] % 64));
                        i += 1;
                    }
                    out[w] |= m;
                }
            }
            (QSet::Sparse(all), _) => {
                for &b in all {
                    let w = b as usize / 64;
                    if r.contains(&w) && !except.contains(b) {
                        out[w] |= 1 << (b % 64);
                    }
                }
            }
        }
        if !self.multi.is_empty() && !except.is_empty() {
            for b in except.iter().filter(|&b| self.multi.contains(b)) {
                let w = b as usize / 64;
                if r.contains(&w) {
                    out[w] |= 1 << (b % 64);
                }
            }
        }
        sets.ne.or_into(out, r);
    }

    pub fn attr_fail(&self, v: &V, out: &mut [u64], r: &Words, exact: &mut dyn Exact) {
        let found = match v {
            V::I(_) | V::F(_) => self.nums.get(&num_key(v).unwrap()),
            V::S(s) => self.strs.get(s.as_str()),
            V::B(b) => Some(&self.bools[*b as usize]),
            V::X(_) => return self.ask(out, r, |pred| exact.attr(pred, v)),
            V::Missing => return self.all.or_into(out, r),
        };
        self.fail_at(found, out, r);
    }

    pub fn pair_fail(&self, l: &V, rv: &V, out: &mut [u64], r: &Words, exact: &mut dyn Exact) {
        match diff(self.factor.expect("a pair list"), l, rv) {
            Diff::Int(d) => self.fail_at(self.ints.get(&d), out, r),
            Diff::Equal(eq) => if eq { self.fail_at(self.ints.get(&0), out, r) } else { self.eq_all.or_into(out, r) },
            Diff::Float(d, err) => {
                let margin = err + d.abs() * BAND;
                let (below, above) = (d - margin, d + margin);
                // `=` entries before lo (o < d) or from hi (o > d) fail; between: too
                // close to tell, as `!=` entries there
                for (list, eq) in [(&self.eqs, true), (&self.nes, false)] {
                    let lo = list.search(|e| e.tf < below);
                    let hi = list.search(|e| e.tf <= above);
                    if eq {
                        list.or_before(lo, out, r);
                        list.or_from(hi, out, r);
                    }
                    if lo != hi {
                        for e in list.between(lo, hi) {
                            if !exact.pair(e.pred, l, rv) {
                                e.set.or_into(out, r);
                            }
                        }
                    }
                }
            }
            Diff::Unknown => self.ask(out, r, |pred| exact.pair(pred, l, rv)),
            Diff::Fails => self.all.or_into(out, r),
        }
    }

    /// Bytes held besides the struct itself.
    pub fn heap_bytes(&self) -> usize {
        let map = |cap: usize, item: usize| cap * (1 + item);
        let consts = |s: &ConstSets| s.eq.heap_bytes() + s.ne.heap_bytes();
        map(self.entries.capacity(), std::mem::size_of::<(u32, EqEntry)>())
            + self.entries.values().map(|e| e.set.heap_bytes()).sum::<usize>()
            + map(self.nums.capacity(), std::mem::size_of::<(NumKey, ConstSets)>())
            + map(self.strs.capacity(), std::mem::size_of::<(Box<str>, ConstSets)>())
            + map(self.ints.capacity(), std::mem::size_of::<(i128, ConstSets)>())
            + self.nums.values().chain(self.strs.values()).chain(self.ints.values()).chain(&self.bools).map(consts).sum::<usize>()
            + self.eq_all.heap_bytes() + self.all.heap_bytes() + self.multi.heap_bytes()
            + map(self.own.capacity(), std::mem::size_of::<(u32, Few)>())
            + self.eqs.heap_bytes() + self.nes.heap_bytes()
    }
}

/// For tests whose values never need the exact fallback.
#[cfg(test)]
pub struct NoExact;

#[cfg(test)]
impl Exact for NoExact {
    fn attr(&mut self, _: u32, _: &V) -> bool {
        panic!("asked")
    }
    fn pair(&mut self, _: u32, _: &V, _: &V) -> bool {
        panic!("asked")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bits_are_listed_lowest_first_across_words() {
        assert_eq!(bits(&[]).count(), 0);
        assert_eq!(bits(&[0, 0]).count(), 0);
        let mask = [1 << 63 | 0b101, 0, 0, 1, 1 << 63];
        assert_eq!(bits(&mask).collect::<Vec<_>>(), vec![0, 2, 63, 192, 319]);
    }

    fn range(lower: bool, factor: Option<Factor>, entries: &[(f64, i128, u64)]) -> RangeList {
        let mut list = RangeList::new(lower, factor, 1);
        for (i, &(tf, ti, mask)) in entries.iter().enumerate() {
            for b in bits(&[mask]) {
                list.add(i as u32, tf, ti, b as u32, false);
            }
        }
        list
    }

    fn fail(list: &RangeList, v: V) -> u64 {
        let mut out = [0];
        list.attr_fail(&v, &mut out, &(0..1), &mut NoExact);
        out[0]
    }

    #[test]
    fn the_loosest_entry_of_a_group_is_its_lowest_or_highest_threshold() {
        // entries' masks, in threshold order: queries 0 and 2 share an entry, query 1
        // has two; groups of up to 8 queries, sought entry by entry and by the unions
        let spec = [(1.0, 1, 0b0010), (2.0, 2, 0b0101), (3.0, 3, 0b1000), (4.0, 4, 0b0010), (5.0, 5, 0b11110000),
                    (6.0, 6, 0b10100000)];
        for lower in [true, false] {
            let list = range(lower, None, &spec);
            for group in 0u64..256 {
                let of_group: Vec<f64> = spec.iter().filter(|e| e.2 & group != 0).map(|e| e.0).collect();
                let expected = if lower { of_group.first() } else { of_group.last() };
                assert_eq!(list.loosest(&[group], &(0..1)).map(|(tf, _)| tf).as_ref(), expected, "group {group:b}");
            }
        }
    }

    #[test]
    fn the_queries_tighter_than_one_are_those_past_its_threshold() {
        // a query with two entries: its tightest counts
        let row = |list: &RangeList, (tf, pred): (f64, u32)| {
            let mut out = [0];
            list.or_tighter(pred, &AtCache::default(), &mut out, &(0..1));
            (tf, out[0])
        };
        let twice = range(true, None, &[(1.0, 1, 0b01), (2.0, 2, 0b10), (4.0, 4, 0b01)]);
        assert_eq!(twice.tighter(0).map(|t| row(&twice, t)), Some((4.0, 0b01)));
        let spec = [(1.0, 1, 0b0010), (2.0, 2, 0b0101), (3.0, 3, 0b1000)];
        let lower = range(true, None, &spec);
        assert_eq!(lower.tighter(0).map(|t| row(&lower, t)), Some((2.0, 0b1101)));
        assert_eq!(lower.tighter(1).map(|t| row(&lower, t)), Some((1.0, 0b1111)));
        let upper = range(false, None, &spec);
        assert_eq!(upper.tighter(0).map(|t| row(&upper, t)), Some((2.0, 0b0111)));
        assert_eq!(upper.tighter(3).map(|t| row(&upper, t)), Some((3.0, 0b1111)));
        assert!(upper.tighter(4).is_none());
        assert_eq!(twice.tightest(0), Some((4.0, 4)));
        assert_eq!(upper.tightest(2), Some((2.0, 2)));
        assert_eq!(upper.tightest(4), None);
    }

    #[test]
    fn a_lower_list_fails_the_thresholds_above_the_value() {
        // q0: x > 1 (x >= 1.0000000000000002, ints >= 2); q1: x >= 5
        let list = range(true, None, &[(5.0, 5, 0b10), (1.0000000000000002, 2, 0b01)]);
        assert_eq!(fail(&list, V::I(1)), 0b11);
        assert_eq!(fail(&list, V::F(1.0)), 0b11);
        assert_eq!(fail(&list, V::F(1.5)), 0b10);
        assert_eq!(fail(&list, V::I(5)), 0);
        assert_eq!(fail(&list, V::S(Box::new("a".into()))), 0b11);
    }

    #[test]
    fn an_upper_list_fails_the_thresholds_below_the_value() {
        // q0: x < 3 (<= 2.9999999999999996, ints <= 2); q1: x <= 10
        let list = range(false, None, &[(2.9999999999999996, 2, 0b01), (10.0, 10, 0b10)]);
        assert_eq!(fail(&list, V::I(3)), 0b01);
        assert_eq!(fail(&list, V::F(2.5)), 0);
        assert_eq!(fail(&list, V::I(11)), 0b11);
    }

    struct Counting(u32);
    impl Exact for Counting {
        fn attr(&mut self, _: u32, _: &V) -> bool {
            unreachable!()
        }
        fn pair(&mut self, _: u32, _: &V, _: &V) -> bool {
            self.0 += 1;
            true
        }
    }

    #[test]
    fn a_pair_difference_is_exact_for_ints_and_asks_only_near_a_constant() {
        // q0: l - 3*r > 0.1
        let third = Factor { f: 3.0, int: Some(3) };
        let list = range(true, Some(third), &[(0.1, 1, 0b1)]);
        let mut out = [0];
        list.pair_fail(&V::I(4), &V::I(1), &mut out, &(0..1), &mut NoExact);
        assert_eq!(out[0], 0);
        list.pair_fail(&V::I(3), &V::I(1), &mut out, &(0..1), &mut NoExact);
        assert_eq!(out[0], 1);
        let mut asked = Counting(0);
        let mut out = [0];
        list.pair_fail(&V::F(0.4), &V::F(0.1), &mut out, &(0..1), &mut asked); // 0.4 - 0.3 ~ 0.1
        assert_eq!((out[0], asked.0), (0, 1));
        list.pair_fail(&V::F(5.0), &V::F(0.1), &mut out, &(0..1), &mut asked);
        assert_eq!(asked.0, 1);
    }

    #[test]
    fn equality_lists_hash_ints_and_integral_doubles_alike() {
        let mut list = EqList::new(None, 1);
        list.add(0, true, &EqConst::Num(NumKey::I(2)), 0, false);
        list.add(1, false, &EqConst::Num(NumKey::I(2)), 1, false);
        list.add(2, true, &EqConst::Never, 2, false);
        let fail = |v: V| {
            let mut out = [0];
            list.attr_fail(&v, &mut out, &(0..1), &mut NoExact);
            out[0]
        };
        assert_eq!(fail(V::F(2.0)), 0b110);
        assert_eq!(fail(V::I(3)), 0b101);
        assert_eq!(fail(V::Missing), 0b111);
    }

    #[test]
    fn heads_kept_per_insert_are_those_of_the_blocks() {
        // blocks of up to 8 entries (64-word masks): entries added one at a time, in
        // an order that puts them before, between and after the others, split blocks
        // again and again; some share a threshold (a bit added to an entry)
        let mut list = RangeList::new(true, None, 64);
        let mut x: u64 = 7;
        for i in 0..3000u32 {
            x = x.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
            let t = if i % 3 == 0 { i64::from(i) } else { ((x >> 33) % 1000) as i64 };
            list.add(t as u32, t as f64, i128::from(t), i % 4096, false);
            let tf: Vec<f64> = list.sorted.blocks().iter().map(|b| b.entries[0].tf).collect();
            let ti: Vec<i128> = list.sorted.blocks().iter().map(|b| b.entries[0].ti).collect();
            assert_eq!((&list.heads_tf, &list.heads_ti), (&tf, &ti), "after {} entries", i + 1);
        }
        assert!(list.sorted.blocks().len() > 100);
    }
}
