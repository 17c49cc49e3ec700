//! Predicate lists (DESIGN section 6): similar predicates share a list, and one probe
//! per list yields, as a query mask, every query whose predicate in it fails.
//!
//! Every list answers exactly what the predicates say (DESIGN section 2). Python
//! computes, once per predicate, the thresholds that make a comparison of a double or
//! a 64-bit int exact (`juggler.engine.native_engine`); a pair difference
//! `d = l - f*r` is exact in i128 when both values are ints and `f` an integer, and is
//! otherwise computed in doubles with an error bound; whatever the bound cannot decide
//! (a difference within rounding of a constant, an int beyond 64 bits) goes to
//! `Exact`, which Python answers with rational arithmetic.

use std::collections::HashMap;

use crate::value::{NumKey, V, num_key};

/// The exact fallback: whether predicate `pred` holds on these values.
pub trait Exact {
    fn attr(&mut self, pred: u32, v: &V) -> bool;
    fn pair(&mut self, pred: u32, l: &V, r: &V) -> bool;
}

/// Relative error allowed for `x - f*y` computed in doubles (`exact._BAND`), doubled
/// to cover the rounding of the constant it is compared with.
const BAND: f64 = 1.0 / (1u64 << 47) as f64;

/// The words of the masks an operation needs: those where the queries still in
/// play have bits (a group of a few queries among thousands spans a word or two).
pub type Words = std::ops::Range<usize>;

/// `or_into` over the words `r` only.
pub fn or_in(out: &mut [u64], r: &Words, src: &[u64]) {
    or_into(&mut out[r.clone()], &src[r.clone()]);
}

pub fn or_into(out: &mut [u64], src: &[u64]) {
    for (o, s) in out.iter_mut().zip(src) {
        *o |= s;
    }
}

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

/// The bits set in `mask`, lowest first.
pub fn bits(mask: &[u64]) -> Bits<'_> {
    Bits { mask, w: 0, word: mask.first().copied().unwrap_or(0) }
}

/// `bits`' iterator: a word and what is left of it, where a flat map of successors
/// over the words cost a partner's list phases a few percent at J n=1,000.
pub struct Bits<'a> {
    mask: &'a [u64],
    w: usize,
    word: u64,
}

impl Iterator for Bits<'_> {
    type Item = usize;

    fn next(&mut self) -> Option<usize> {
        while self.word == 0 {
            self.w += 1;
            self.word = *self.mask.get(self.w)?;
        }
        let bit = self.w * 64 + self.word.trailing_zeros() as usize;
        self.word &= self.word - 1;
        Some(bit)
    }
}

/// The first p in 0..n for which `pred` holds (n if none), `pred` being false and
/// then true.
fn first(n: usize, pred: impl Fn(usize) -> bool) -> usize {
    let (mut a, mut b) = (0, n);
    while a < b {
        let mid = (a + b) / 2;
        if pred(mid) { b = mid } else { a = mid + 1 }
    }
    a
}

/// Rows 0..=n of unions of entries' masks (stride nw): row p is entries[..p] or, with
/// `suffix`, entries[p..].
fn unions(entries: &[RangeEntry], nw: usize, suffix: bool) -> Vec<u64> {
    let n = entries.len();
    let mut table = vec![0; (n + 1) * nw];
    if suffix {
        for p in (0..n).rev() {
            let (head, tail) = table.split_at_mut((p + 1) * nw);
            let row = &mut head[p * nw..];
            row.copy_from_slice(&tail[..nw]);
            or_into(row, &entries[p].mask);
        }
    } else {
        for p in 1..=n {
            let (head, tail) = table.split_at_mut(p * nw);
            let row = &mut tail[..nw];
            row.copy_from_slice(&head[(p - 1) * nw..]);
            or_into(row, &entries[p - 1].mask);
        }
    }
    table
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
    pub mask: Vec<u64>,
}

/// `>`/`>=` (lower: satisfied above the constants) or `<`/`<=` predicates on one
/// column (attribute) or on one difference `l - f*r` (pair), sorted by threshold.
#[derive(Clone, Debug)]
pub struct RangeList {
    pub lower: bool,
    pub factor: Option<Factor>,
    pub entries: Vec<RangeEntry>,
    tf: Vec<f64>,
    ti: Vec<i128>,
    /// Row p (stride nw): the queries failing when the value sits at position p:
    /// entries[p..] for a lower list, entries[..p] for an upper one.
    table: Vec<u64>,
    /// The other way round, row p: entries[..p] for a lower list, entries[p..] for an
    /// upper one, so the loosest entry of a group of queries is a binary search.
    loose: Vec<u64>,
    /// A query's own thresholds: the query bits of the entries (each entry once per
    /// query of its mask), sorted, and the entries' positions alongside. Two
    /// vectors of u32 rather than one of (usize, usize): the binary search for a
    /// query's bit, run for every query a retrieval plans, reads a quarter of the
    /// memory (at n=1,000 these are cache misses).
    own_bits: Vec<u32>,
    own_at: Vec<u32>,
    nw: usize,
}

impl RangeList {
    pub fn new(lower: bool, factor: Option<Factor>) -> Self {
        RangeList { lower, factor, entries: Vec::new(), tf: Vec::new(), ti: Vec::new(), table: Vec::new(), loose: Vec::new(),
                    own_bits: Vec::new(), own_at: Vec::new(), nw: 0 }
    }

    pub fn rebuild(&mut self, nw: usize) {
        self.entries.sort_by(|a, b| a.tf.total_cmp(&b.tf).then(a.ti.cmp(&b.ti)));
        self.tf = self.entries.iter().map(|e| e.tf).collect();
        self.ti = self.entries.iter().map(|e| e.ti).collect();
        self.nw = nw;
        let (prefix, suffix) = (unions(&self.entries, nw, false), unions(&self.entries, nw, true));
        (self.table, self.loose) = if self.lower { (suffix, prefix) } else { (prefix, suffix) };
        let mut positions: Vec<(u32, u32)> =
            self.entries.iter().enumerate().flat_map(|(p, e)| bits(&e.mask).map(move |b| (b as u32, p as u32))).collect();
        positions.sort_unstable();
        (self.own_bits, self.own_at) = positions.into_iter().unzip();
    }

    /// The loosest threshold (tf, ti) among those of `group`'s queries (the lowest of
    /// a lower list, the highest of an upper one), looking at words `r`: for a few
    /// queries, the loosest of their own entries; else a binary search over the
    /// unions of the entries' masks.
    pub fn loosest(&self, group: &[u64], r: &Words) -> Option<(f64, i128)> {
        self.loosest_at(group, r).map(|p| (self.tf[p], self.ti[p]))
    }

    /// `loosest`'s entry position. Thresholds are read from `tf` and `ti`, not from
    /// the entries (64 bytes each, spread over the list).
    fn loosest_at(&self, group: &[u64], r: &Words) -> Option<usize> {
        if group[r.clone()].iter().map(|w| w.count_ones()).sum::<u32>() <= FEW_QUERIES {
            let own = bits(&group[r.clone()]).flat_map(|b| self.own(r.start * 64 + b)).map(|&p| p as usize);
            return if self.lower { own.min() } else { own.max() };
        }
        let nw = self.nw;
        let hits = |p: usize| {
            self.loose[p * nw + r.start..p * nw + r.end].iter().zip(&group[r.clone()]).any(|(a, b)| a & b != 0)
        };
        let n = self.entries.len();
        if self.lower {
            // the first p whose prefix entries[..=p] holds one of the group's
            Some(first(n, |p| hits(p + 1))).filter(|&p| p < n)
        } else {
            // the last p whose suffix entries[p..] holds one of the group's
            first(n, |p| !hits(p)).checked_sub(1)
        }
    }

    /// Every query with a predicate in the list.
    pub fn users(&self) -> &[u64] {
        self.row(if self.lower { 0 } else { self.entries.len() })
    }

    /// The positions of query `bit`'s entries, in threshold order.
    fn own(&self, bit: usize) -> &[u32] {
        let bit = bit as u32;
        let a = self.own_bits.partition_point(|&b| b < bit);
        let n = self.own_bits[a..].iter().take_while(|&&b| b == bit).count();
        &self.own_at[a..a + n]
    }

    /// The threshold of query `bit`'s predicate, and the `row` of every query whose
    /// threshold is at least as tight (the entry's and those above it in a lower list,
    /// below it in an upper one): whatever satisfies one of them satisfies the entry.
    pub fn tighter(&self, bit: usize) -> Option<(f64, usize)> {
        let p = self.tightest_at(bit)?;
        Some((self.tf[p], if self.lower { p } else { p + 1 }))
    }

    /// Query `bit`'s tightest threshold (tf, ti) in the list: what every event it
    /// can use satisfies.
    pub fn tightest(&self, bit: usize) -> Option<(f64, i128)> {
        self.tightest_at(bit).map(|p| (self.tf[p], self.ti[p]))
    }

    fn tightest_at(&self, bit: usize) -> Option<usize> {
        let own = self.own(bit);
        if self.lower { own.last() } else { own.first() }.map(|&p| p as usize)
    }

    /// The queries failing at position `p` (see `table`).
    pub fn row(&self, p: usize) -> &[u64] {
        &self.table[p * self.nw..(p + 1) * self.nw]
    }

    fn fail_all(&self, out: &mut [u64], r: &Words) {
        or_in(out, r, self.row(if self.lower { 0 } else { self.entries.len() }));
    }

    /// The queries failing at an exact difference `d` (inlined: see `diff`).
    #[inline(always)]
    fn at_int(&self, d: i128, out: &mut [u64], r: &Words) {
        let p = if self.lower { count_le(&self.ti, &d) } else { count_lt(&self.ti, &d) };
        or_in(out, r, self.row(p));
    }

    fn ask(&self, out: &mut [u64], r: &Words, range: std::ops::Range<usize>, mut holds: impl FnMut(u32) -> bool) {
        for e in &self.entries[range] {
            if !holds(e.pred) {
                or_in(out, r, &e.mask);
            }
        }
    }

    /// OR into `out` the queries whose predicate in this attribute list `v` fails.
    pub fn attr_fail(&self, v: &V, out: &mut [u64], r: &Words, exact: &mut dyn Exact) {
        match v {
            V::I(i) => self.at_int(*i as i128, out, r),
            V::F(f) => {
                let p = if self.lower { count_le(&self.tf, f) } else { count_lt(&self.tf, f) };
                or_in(out, r, self.row(p));
            }
            V::X(_) => self.ask(out, r, 0..self.entries.len(), |pred| exact.attr(pred, v)),
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
                // entries[..lo]: o < d; entries[hi..]: o > d; between: too close to tell.
                let lo = count_lt(&self.tf, &(d - margin));
                let hi = count_le(&self.tf, &(d + margin));
                or_in(out, r, self.row(if self.lower { hi } else { lo }));
                self.ask(out, r, lo..hi, |pred| exact.pair(pred, l, rv));
            }
            Diff::Unknown => self.ask(out, r, 0..self.entries.len(), |pred| exact.pair(pred, l, rv)),
            Diff::Fails | Diff::Equal(_) => self.fail_all(out, r),
        }
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

#[derive(Clone, Debug)]
pub struct EqEntry {
    pub pred: u32,
    pub eq: bool,
    pub constant: EqConst,
    pub mask: Vec<u64>,
}

/// `=` and `!=` predicates on one column (attribute) or one difference (pair): a hash
/// lookup of the value gives the failing queries (CACQ's grouped filter).
#[derive(Clone, Debug, Default)]
pub struct EqList {
    pub factor: Option<Factor>,
    pub entries: Vec<EqEntry>,
    /// Queries failing when the value equals no constant (every `=` predicate).
    eq_all: Vec<u64>,
    /// Every query of the list (a missing column fails them all).
    all: Vec<u64>,
    /// Per constant: (queries failing when the value equals it).
    nums: HashMap<NumKey, Vec<u64>>,
    strs: HashMap<Box<str>, Vec<u64>>,
    bools: [Option<Vec<u64>>; 2],
    ints: HashMap<i128, Vec<u64>>,
    /// Pair lists, doubles: entries in order of `o`, with the `=` queries failing on
    /// either side of a position (prefix and suffix rows, stride nw).
    order: Vec<usize>,
    tf: Vec<f64>,
    eq_prefix: Vec<u64>,
    eq_suffix: Vec<u64>,
    nw: usize,
}

impl EqList {
    pub fn new(factor: Option<Factor>) -> Self {
        EqList { factor, ..Default::default() }
    }

    pub fn rebuild(&mut self, nw: usize) {
        self.nw = nw;
        self.eq_all = vec![0; nw];
        self.all = vec![0; nw];
        for e in &self.entries {
            or_into(&mut self.all, &e.mask);
            if e.eq {
                or_into(&mut self.eq_all, &e.mask);
            }
        }
        self.nums.clear();
        self.strs.clear();
        self.bools = [None, None];
        self.ints.clear();
        for e in &self.entries {
            let key = e.constant.clone();
            let fail = self.failing_at(&key);
            match key {
                EqConst::Num(k) => {
                    self.nums.insert(k, fail);
                }
                EqConst::Str(s) => {
                    self.strs.insert(s, fail);
                }
                EqConst::Bool(b) => self.bools[b as usize] = Some(fail),
                EqConst::Diff(_, Some(i)) => {
                    self.ints.insert(i, fail);
                }
                EqConst::Never | EqConst::Diff(_, None) => {}
            }
        }
        let mut order: Vec<usize> = (0..self.entries.len()).collect();
        let tf = |e: &EqEntry| if let EqConst::Diff(f, _) = e.constant { f } else { 0.0 };
        order.sort_by(|&a, &b| tf(&self.entries[a]).total_cmp(&tf(&self.entries[b])));
        self.tf = order.iter().map(|&i| tf(&self.entries[i])).collect();
        let n = order.len();
        self.eq_prefix = vec![0; (n + 1) * nw];
        self.eq_suffix = vec![0; (n + 1) * nw];
        for p in 1..=n {
            let e = &self.entries[order[p - 1]];
            let (head, tail) = self.eq_prefix.split_at_mut(p * nw);
            tail[..nw].copy_from_slice(&head[(p - 1) * nw..]);
            if e.eq {
                or_into(&mut tail[..nw], &e.mask);
            }
        }
        for p in (0..n).rev() {
            let e = &self.entries[order[p]];
            let (head, tail) = self.eq_suffix.split_at_mut((p + 1) * nw);
            head[p * nw..].copy_from_slice(&tail[..nw]);
            if e.eq {
                or_into(&mut head[p * nw..], &e.mask);
            }
        }
        self.order = order;
    }

    /// Every query with a predicate in the list.
    pub fn users(&self) -> &[u64] {
        &self.all
    }

    /// The queries failing when the value equals `key`: `=` entries with another
    /// constant, `!=` entries with this one.
    fn failing_at(&self, key: &EqConst) -> Vec<u64> {
        let mut fail = vec![0; self.nw];
        for e in &self.entries {
            if (e.constant == *key) != e.eq {
                or_into(&mut fail, &e.mask);
            }
        }
        fail
    }

    fn ask(&self, out: &mut [u64], r: &Words, entries: impl Iterator<Item = usize>, mut holds: impl FnMut(u32) -> bool) {
        for i in entries {
            let e = &self.entries[i];
            if !holds(e.pred) {
                or_in(out, r, &e.mask);
            }
        }
    }

    pub fn attr_fail(&self, v: &V, out: &mut [u64], r: &Words, exact: &mut dyn Exact) {
        let found = match v {
            V::I(_) | V::F(_) => self.nums.get(&num_key(v).unwrap()),
            V::S(s) => self.strs.get(s.as_str()),
            V::B(b) => self.bools[*b as usize].as_ref(),
            V::X(_) => return self.ask(out, r, 0..self.entries.len(), |pred| exact.attr(pred, v)),
            V::Missing => return or_in(out, r, &self.all),
        };
        or_in(out, r, found.unwrap_or(&self.eq_all));
    }

    pub fn pair_fail(&self, l: &V, rv: &V, out: &mut [u64], r: &Words, exact: &mut dyn Exact) {
        match diff(self.factor.expect("a pair list"), l, rv) {
            Diff::Int(d) => or_in(out, r, self.ints.get(&d).unwrap_or(&self.eq_all)),
            Diff::Equal(eq) => or_in(out, r, if eq { self.ints.get(&0).unwrap_or(&self.eq_all) } else { &self.eq_all }),
            Diff::Float(d, err) => {
                let margin = err + d.abs() * BAND;
                let lo = count_lt(&self.tf, &(d - margin));
                let hi = count_le(&self.tf, &(d + margin));
                let nw = self.nw;
                or_in(out, r, &self.eq_prefix[lo * nw..(lo + 1) * nw]);
                or_in(out, r, &self.eq_suffix[hi * nw..(hi + 1) * nw]);
                self.ask(out, r, self.order[lo..hi].iter().copied(), |pred| exact.pair(pred, l, rv));
            }
            Diff::Unknown => self.ask(out, r, 0..self.entries.len(), |pred| exact.pair(pred, l, rv)),
            Diff::Fails => or_in(out, r, &self.all),
        }
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
        let mut list = RangeList::new(lower, factor);
        for (i, &(tf, ti, bits)) in entries.iter().enumerate() {
            list.entries.push(RangeEntry { pred: i as u32, tf, ti, mask: vec![bits] });
        }
        list.rebuild(1);
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
        let twice = range(true, None, &[(1.0, 1, 0b01), (2.0, 2, 0b10), (4.0, 4, 0b01)]);
        assert_eq!(twice.tighter(0).map(|(tf, p)| (tf, twice.row(p)[0])), Some((4.0, 0b01)));
        let spec = [(1.0, 1, 0b0010), (2.0, 2, 0b0101), (3.0, 3, 0b1000)];
        let lower = range(true, None, &spec);
        assert_eq!(lower.tighter(0).map(|(tf, p)| (tf, lower.row(p)[0])), Some((2.0, 0b1101)));
        assert_eq!(lower.tighter(1).map(|(tf, p)| (tf, lower.row(p)[0])), Some((1.0, 0b1111)));
        let upper = range(false, None, &spec);
        assert_eq!(upper.tighter(0).map(|(tf, p)| (tf, upper.row(p)[0])), Some((2.0, 0b0111)));
        assert_eq!(upper.tighter(3).map(|(tf, p)| (tf, upper.row(p)[0])), Some((3.0, 0b1111)));
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
        let mut list = EqList::new(None);
        list.entries.push(EqEntry { pred: 0, eq: true, constant: EqConst::Num(NumKey::I(2)), mask: vec![0b01] });
        list.entries.push(EqEntry { pred: 1, eq: false, constant: EqConst::Num(NumKey::I(2)), mask: vec![0b10] });
        list.entries.push(EqEntry { pred: 2, eq: true, constant: EqConst::Never, mask: vec![0b100] });
        list.rebuild(1);
        let fail = |v: V| {
            let mut out = [0];
            list.attr_fail(&v, &mut out, &(0..1), &mut NoExact);
            out[0]
        };
        assert_eq!(fail(V::F(2.0)), 0b110);
        assert_eq!(fail(V::I(3)), 0b101);
        assert_eq!(fail(V::Missing), 0b111);
    }
}
