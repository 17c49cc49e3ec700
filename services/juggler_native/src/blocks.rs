//! Sets of query bits, and sorted sequences of entries holding them, in memory linear
//! in what is registered and changed in time independent of it (semantics section 7: no
//! command's cost grows with what is already registered).
//!
//! A predicate list answers a probe with the union of the query sets of the entries on
//! one side of a position (those above a value, or below it). Keeping that union
//! ready for every position is a row of `nw` words per entry: quadratic memory, and
//! rebuilding the rows after each registration cost a registration the cube of the
//! queries sharing a list. Here the sorted entries are cut into blocks whose weight
//! (the cost of ORing their sets) is about `nw / ROW_SHARE`, and only block
//! boundaries carry union rows, so the rows take `ROW_SHARE` words per unit of
//! weight: a probe ORs one row and at most a block's entries, a new query bit sets
//! one bit in each row past its block, and a deleted one recomputes its bit in the
//! rows from its own remaining entries. A set is sorted bits while few, a dense mask
//! once ORing the bits would cost more than the mask (`QSet`).

use std::cmp::Ordering;

use crate::masks::{Words, bits, or_in};

/// A block's weight aims at `nw / ROW_SHARE` (at least 1): rows cost `2 * ROW_SHARE`
/// words per set bit, a probe at most that fraction of a row in bits. With masks of up
/// to 8 words (512 queries) every block holds one entry and a probe is one row, as
/// when every position had its row.
pub const ROW_SHARE: usize = 8;

/// Query bits: sorted while few, a mask of the operator's `nw` words once half of its
/// words would be needed anyway (the mask then takes at most 16 bytes per bit).
#[derive(Clone, Debug)]
pub enum QSet {
    Sparse(Vec<u32>),
    /// The mask and how many bits it holds.
    Dense(Vec<u64>, u32),
}

impl Default for QSet {
    fn default() -> Self {
        QSet::Sparse(Vec::new())
    }
}

fn dense_for(count: usize, nw: usize) -> bool {
    count > 0 && 2 * count >= nw
}

impl QSet {
    pub fn one(bit: u32, nw: usize) -> Self {
        let mut set = QSet::default();
        set.insert(bit, nw);
        set
    }

    pub fn len(&self) -> usize {
        match self {
            QSet::Sparse(v) => v.len(),
            QSet::Dense(_, n) => *n as usize,
        }
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// What ORing it costs: its bits, or its words.
    pub fn weight(&self) -> usize {
        match self {
            QSet::Sparse(v) => v.len(),
            QSet::Dense(w, _) => w.len(),
        }
    }

    pub fn contains(&self, bit: u32) -> bool {
        match self {
            QSet::Sparse(v) => v.binary_search(&bit).is_ok(),
            QSet::Dense(w, _) => w.get(bit as usize / 64).is_some_and(|x| x >> (bit % 64) & 1 != 0),
        }
    }

    /// Add `bit` (below `nw * 64`); whether it was new.
    pub fn insert(&mut self, bit: u32, nw: usize) -> bool {
        match self {
            QSet::Sparse(v) => match v.binary_search(&bit) {
                Ok(_) => false,
                Err(at) => {
                    v.insert(at, bit);
                    if dense_for(v.len(), nw) {
                        self.refit(nw);
                    }
                    true
                }
            },
            QSet::Dense(w, n) => {
                let (i, m) = (bit as usize / 64, 1u64 << (bit % 64));
                let new = w[i] & m == 0;
                w[i] |= m;
                *n += new as u32;
                new
            }
        }
    }

    /// Remove `bit`; whether it was there. A mask left with a quarter of what made it
    /// one becomes sorted bits again (not half: a bit coming and going at the edge
    /// would convert each time).
    pub fn remove(&mut self, bit: u32, nw: usize) -> bool {
        match self {
            QSet::Sparse(v) => match v.binary_search(&bit) {
                Ok(at) => {
                    v.remove(at);
                    true
                }
                Err(_) => false,
            },
            QSet::Dense(w, n) => {
                let (i, m) = (bit as usize / 64, 1u64 << (bit % 64));
                let was = w.get(i).is_some_and(|x| x & m != 0);
                if was {
                    w[i] &= !m;
                    *n -= 1;
                    if 8 * (*n as usize) < nw {
                        *self = QSet::Sparse(bits(w).map(|b| b as u32).collect());
                    }
                }
                was
            }
        }
    }

    /// The form that suits masks of `nw` words.
    pub fn refit(&mut self, nw: usize) {
        let count = self.len();
        match self {
            QSet::Sparse(v) if dense_for(count, nw) => {
                let mut w = vec![0; nw];
                v.iter().for_each(|&b| w[b as usize / 64] |= 1 << (b % 64));
                *self = QSet::Dense(w, count as u32);
            }
            QSet::Dense(w, _) if !dense_for(count, nw) => *self = QSet::Sparse(bits(w).map(|b| b as u32).collect()),
            QSet::Dense(w, _) => w.resize(nw, 0),
            QSet::Sparse(_) => {}
        }
    }

    /// Every bit of `other` added.
    pub fn union_with(&mut self, other: &QSet, nw: usize) {
        match other {
            QSet::Sparse(v) => v.iter().for_each(|&b| {
                self.insert(b, nw);
            }),
            QSet::Dense(w, _) => bits(w).for_each(|b| {
                self.insert(b as u32, nw);
            }),
        }
    }

    pub fn iter(&self) -> impl Iterator<Item = u32> + '_ {
        let (sparse, dense) = match self {
            QSet::Sparse(v) => (Some(v.iter().copied()), None),
            QSet::Dense(w, _) => (None, Some(bits(w).map(|b| b as u32))),
        };
        sparse.into_iter().flatten().chain(dense.into_iter().flatten())
    }

    /// `f(word, bit mask)` for each of a sparse set's bits in words `r`.
    #[inline(always)]
    fn each_in(bits: &[u32], r: &Words, mut f: impl FnMut(usize, u64)) {
        for &b in bits {
            let w = b as usize / 64;
            if r.contains(&w) {
                f(w, 1 << (b % 64));
            }
        }
    }

    /// OR its bits in words `r` into `out`.
    #[inline(always)]
    pub fn or_into(&self, out: &mut [u64], r: &Words) {
        match self {
            QSet::Sparse(v) => Self::each_in(v, r, |w, m| out[w] |= m),
            QSet::Dense(w, _) => or_in(out, r, w),
        }
    }

    /// Clear its bits in words `r` of `out`.
    #[inline(always)]
    pub fn clear_in(&self, out: &mut [u64], r: &Words) {
        match self {
            QSet::Sparse(v) => Self::each_in(v, r, |w, m| out[w] &= !m),
            QSet::Dense(w, _) => out[r.clone()].iter_mut().zip(&w[r.clone()]).for_each(|(o, m)| *o &= !m),
        }
    }

    /// Whether it shares a bit with words `r` of `mask`.
    #[inline(always)]
    pub fn intersects(&self, mask: &[u64], r: &Words) -> bool {
        match self {
            QSet::Sparse(v) => v.iter().any(|&b| {
                let w = b as usize / 64;
                r.contains(&w) && mask[w] >> (b % 64) & 1 != 0
            }),
            QSet::Dense(w, _) => w[r.clone()].iter().zip(&mask[r.clone()]).any(|(a, b)| a & b != 0),
        }
    }

    /// Bytes it holds besides itself.
    pub fn heap_bytes(&self) -> usize {
        match self {
            QSet::Sparse(v) => v.capacity() * 4,
            QSet::Dense(w, _) => w.capacity() * 8,
        }
    }
}

/// A few u32s (a query's predicates in one list: almost always one), inline up to
/// three.
#[derive(Clone, Debug)]
pub enum Few {
    Inline(u8, [u32; 3]),
    Heap(Vec<u32>),
}

impl Default for Few {
    fn default() -> Self {
        Few::Inline(0, [0; 3])
    }
}

impl Few {
    pub fn as_slice(&self) -> &[u32] {
        match self {
            Few::Inline(n, a) => &a[..*n as usize],
            Few::Heap(v) => v,
        }
    }

    /// Add `x` if absent.
    pub fn add(&mut self, x: u32) {
        if self.as_slice().contains(&x) {
            return;
        }
        match self {
            Few::Inline(n, a) if (*n as usize) < a.len() => {
                a[*n as usize] = x;
                *n += 1;
            }
            Few::Inline(..) => *self = Few::Heap([self.as_slice(), &[x]].concat()),
            Few::Heap(v) => v.push(x),
        }
    }

    pub fn remove(&mut self, x: u32) {
        let rest: Vec<u32> = self.as_slice().iter().copied().filter(|&y| y != x).collect();
        *self = if rest.len() <= 3 {
            let mut a = [0; 3];
            a[..rest.len()].copy_from_slice(&rest);
            Few::Inline(rest.len() as u8, a)
        } else {
            Few::Heap(rest)
        };
    }

    pub fn is_empty(&self) -> bool {
        self.as_slice().is_empty()
    }
}

/// What a `Blocked` holds: an entry with a query set, in an order the owner keeps.
pub trait Member {
    fn set(&self) -> &QSet;
    fn set_mut(&mut self) -> &mut QSet;
}

/// `Member` for a struct whose query set is its field `set`.
#[macro_export]
macro_rules! member {
    ($t:ty) => {
        impl $crate::blocks::Member for $t {
            fn set(&self) -> &$crate::blocks::QSet {
                &self.set
            }
            fn set_mut(&mut self) -> &mut $crate::blocks::QSet {
                &mut self.set
            }
        }
    };
}

/// (block, offset) of an entry, or (blocks, 0) for the end.
pub type At = (usize, usize);

#[derive(Clone, Debug)]
pub struct Block<E> {
    pub entries: Vec<E>,
    weight: usize,
    /// The union of the sets of the entries before this block (empty for the first).
    before: Vec<u64>,
    /// The union of the sets of this block's entries and those after it.
    from: Vec<u64>,
}

impl<E> Block<E> {
    fn new(entries: Vec<E>) -> Self {
        Block { entries, weight: 0, before: Vec::new(), from: Vec::new() }
    }
}

/// Entries in an order their owner keeps (it finds positions: `locate`, `search`), cut
/// into blocks by weight, with union rows at the blocks' boundaries when there are
/// two blocks or more (see the module). Entries added in bulk (`push`) wait unsorted
/// until `settle` sorts and cuts everything once.
#[derive(Clone, Debug)]
pub struct Blocked<E> {
    blocks: Vec<Block<E>>,
    pending: Vec<E>,
    nw: usize,
    /// The weight past which a block of two entries or more is split.
    cap: usize,
    weight: usize,
    len: usize,
    /// Whether union rows are kept (a container only ever scanned keeps none).
    rows: bool,
}

impl<E> Default for Blocked<E> {
    fn default() -> Self {
        Blocked { blocks: Vec::new(), pending: Vec::new(), nw: 1, cap: 1, weight: 0, len: 0, rows: true }
    }
}

impl<E: Member> Blocked<E> {
    /// For masks of `nw` words; `rows`: whether to keep union rows.
    pub fn new(rows: bool, nw: usize) -> Self {
        Blocked { blocks: Vec::new(), pending: Vec::new(), nw, cap: Self::cap_for(nw), weight: 0, len: 0, rows }
    }

    pub fn len(&self) -> usize {
        self.len + self.pending.len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    pub fn blocks(&self) -> &[Block<E>] {
        &self.blocks
    }

    /// Whether union rows are in use (a row is never empty: masks have a word).
    #[inline(always)]
    fn rowed(&self) -> bool {
        self.blocks.first().is_some_and(|b| !b.from.is_empty())
    }

    /// Whether union rows should be: with two blocks or more, or with one when
    /// blocks hold an entry each (masks of up to `ROW_SHARE` words: a row is then no
    /// larger than the entry's own set, and a probe is one row whatever the list).
    fn wants_rows(&self) -> bool {
        self.rows && (self.blocks.len() >= 2 || (self.cap == 1 && !self.blocks.is_empty()))
    }

    /// Rows made or dropped as `wants_rows` says.
    fn sync_rows(&mut self) {
        if self.wants_rows() != self.rowed() {
            self.make_rows();
        }
    }

    /// OR the sets of `entries` into words `r` of `out`.
    #[inline(always)]
    fn or_entries(entries: &[E], out: &mut [u64], r: &Words) {
        entries.iter().for_each(|e| e.set().or_into(out, r));
    }

    pub fn entry(&self, (k, j): At) -> &E {
        &self.blocks[k].entries[j]
    }

    /// Every entry, in order.
    pub fn iter(&self) -> impl Iterator<Item = &E> + '_ {
        self.blocks.iter().flat_map(|b| &b.entries)
    }

    /// The entries from `a` to `b`, in order.
    pub fn between(&self, a: At, b: At) -> impl Iterator<Item = &E> + '_ {
        let (ka, kb) = (a.0, b.0.min(self.blocks.len().saturating_sub(1)));
        (ka..=kb).filter(move |&k| k < self.blocks.len()).flat_map(move |k| {
            let entries = &self.blocks[k].entries;
            let start = if k == a.0 { a.1 } else { 0 };
            let end = if k == b.0 { b.1 } else { entries.len() };
            &entries[start.min(end)..end]
        })
    }

    /// The position after `at`.
    pub fn next(&self, (k, j): At) -> At {
        self.norm((k, j + 1))
    }

    fn norm(&self, (k, j): At) -> At {
        if k < self.blocks.len() && j >= self.blocks[k].entries.len() { (k + 1, 0) } else { (k, j) }
    }

    /// The position of the first entry for which `before` is false, given `k0`, the
    /// number of blocks whose first entry it holds for (the owner's heads answer that
    /// from contiguous keys on the probe path).
    #[inline(always)]
    pub fn locate(&self, k0: usize, before: impl Fn(&E) -> bool) -> At {
        // a block per entry (masks of up to `ROW_SHARE` words), or a block of one entry
        // (a heavy one: many queries share its constant): the heads said it all
        if k0 == 0 || self.cap == 1 {
            return (k0, 0);
        }
        let entries = &self.blocks[k0 - 1].entries;
        if entries.len() == 1 {
            return (k0, 0);
        }
        let j = entries.partition_point(before);
        if j == entries.len() { (k0, 0) } else { (k0 - 1, j) }
    }

    /// `locate` with the blocks found by their first entries.
    pub fn search(&self, before: impl Fn(&E) -> bool) -> At {
        let k0 = self.blocks.partition_point(|b| before(&b.entries[0]));
        self.locate(k0, before)
    }

    /// OR into words `r` of `out` the sets of the entries at `at` and after it.
    #[inline(always)]
    pub fn or_from(&self, (k, j): At, out: &mut [u64], r: &Words) {
        let Some(block) = self.blocks.get(k) else { return };
        // the common case first: a block boundary, with rows (a row is empty without)
        if j == 0 && !block.from.is_empty() {
            return or_in(out, r, &block.from);
        }
        Self::or_entries(&block.entries[j..], out, r);
        match self.blocks.get(k + 1) {
            Some(next) if !next.from.is_empty() => or_in(out, r, &next.from),
            _ => self.blocks[k + 1..].iter().for_each(|b| Self::or_entries(&b.entries, out, r)),
        }
    }

    /// OR into words `r` of `out` the sets of the entries before `at`.
    #[inline(always)]
    pub fn or_before(&self, (k, j): At, out: &mut [u64], r: &Words) {
        let n = self.blocks.len();
        if j == 0 && k > 0 {
            // the common case first, as in `or_from`
            let row = if k < n { &self.blocks[k].before } else { &self.blocks[0].from };
            if !row.is_empty() {
                return or_in(out, r, row);
            }
        }
        if k >= n {
            return self.blocks.iter().for_each(|b| Self::or_entries(&b.entries, out, r));
        }
        if k > 0 && !self.blocks[k].before.is_empty() {
            or_in(out, r, &self.blocks[k].before);
        } else {
            self.blocks[..k].iter().for_each(|b| Self::or_entries(&b.entries, out, r));
        }
        Self::or_entries(&self.blocks[k].entries[..j], out, r);
    }

    /// Clear in words `r` of `out` the sets of the entries before `at`; whether any
    /// bit of `out`'s words `r` is left.
    #[inline(always)]
    pub fn clear_before(&self, (k, j): At, out: &mut [u64], r: &Words) -> bool {
        let n = self.blocks.len();
        if j == 0 && k > 0 {
            // the common case first, as in `or_from`
            let row = if k < n { &self.blocks[k].before } else { &self.blocks[0].from };
            if !row.is_empty() {
                let mut any = 0;
                for (o, m) in out[r.clone()].iter_mut().zip(&row[r.clone()]) {
                    *o &= !m;
                    any |= *o;
                }
                return any != 0;
            }
        }
        let clear = |out: &mut [u64], entries: &[E]| entries.iter().for_each(|e| e.set().clear_in(out, r));
        if k >= n {
            self.blocks.iter().for_each(|b| clear(out, &b.entries));
        } else {
            if k > 0 && !self.blocks[k].before.is_empty() {
                let row = &self.blocks[k].before;
                out[r.clone()].iter_mut().zip(&row[r.clone()]).for_each(|(o, m)| *o &= !m);
            } else {
                self.blocks[..k].iter().for_each(|b| clear(out, &b.entries));
            }
            clear(out, &self.blocks[k].entries[..j]);
        }
        out[r.clone()].iter().any(|&w| w != 0)
    }

    /// OR every set into words `r` of `out`.
    #[inline(always)]
    pub fn or_all(&self, out: &mut [u64], r: &Words) {
        self.or_before((self.blocks.len(), 0), out, r)
    }

    /// Whether some entry's set shares a bit with words `r` of `mask`.
    #[inline(always)]
    pub fn touches(&self, mask: &[u64], r: &Words) -> bool {
        if self.rowed() {
            let all = &self.blocks[0].from;
            all[r.clone()].iter().zip(&mask[r.clone()]).any(|(a, b)| a & b != 0)
        } else {
            self.iter().any(|e| e.set().intersects(mask, r))
        }
    }

    /// Whether every bit of `mask`'s words `r` is in the rows' union (None without
    /// rows: the owner answers from its own index).
    #[inline(always)]
    pub fn covers(&self, mask: &[u64], r: &Words) -> Option<bool> {
        self.rowed().then(|| {
            let all = &self.blocks[0].from;
            all[r.clone()].iter().zip(&mask[r.clone()]).all(|(a, g)| g & !a == 0)
        })
    }

    /// The first entry whose set shares a bit with words `r` of `mask`.
    pub fn first_hit(&self, mask: &[u64], r: &Words) -> Option<At> {
        let n = self.blocks.len();
        let k = if self.rowed() {
            let hits = |row: &[u64]| row[r.clone()].iter().zip(&mask[r.clone()]).any(|(a, b)| a & b != 0);
            // the entries up to block k's end: the next block's `before`, or all
            let through = |k: usize| hits(if k + 1 < n { &self.blocks[k + 1].before } else { &self.blocks[0].from });
            if !through(n - 1) {
                return None;
            }
            first(n, through)
        } else {
            0
        };
        let mut at = (k, 0);
        while at.0 < n {
            if self.entry(at).set().intersects(mask, r) {
                return Some(at);
            }
            at = self.norm((at.0, at.1 + 1));
        }
        None
    }

    /// The last entry whose set shares a bit with words `r` of `mask`.
    pub fn last_hit(&self, mask: &[u64], r: &Words) -> Option<At> {
        let n = self.blocks.len();
        // the last block first: a MAXWINDOW class's widest is usually there
        let last = self.blocks.last()?;
        if let Some(j) = last.entries.iter().rposition(|e| e.set().intersects(mask, r)) {
            return Some((n - 1, j));
        }
        let hits = |row: &[u64]| row[r.clone()].iter().zip(&mask[r.clone()]).any(|(a, b)| a & b != 0);
        let top = if self.rowed() {
            if !hits(&self.blocks[0].from) {
                return None;
            }
            first(n, |k| !hits(&self.blocks[k].from)) - 1
        } else {
            n.checked_sub(1)?
        };
        for k in (0..=top).rev() {
            if let Some(j) = self.blocks[k].entries.iter().rposition(|e| e.set().intersects(mask, r)) {
                return Some((k, j));
            }
        }
        None
    }

    fn cap_for(nw: usize) -> usize {
        (nw / ROW_SHARE).max(1)
    }

    /// Set `bit` in the rows that cover block `k`.
    fn row_bit(&mut self, k: usize, bit: u32) {
        if !self.rowed() {
            return;
        }
        let (w, m) = (bit as usize / 64, 1u64 << (bit % 64));
        for (i, b) in self.blocks.iter_mut().enumerate() {
            if i <= k {
                b.from[w] |= m;
            } else {
                b.before[w] |= m;
            }
        }
    }

    /// Insert `e` at `at` (its place in the owner's order); returns the block it went
    /// into. With masks of `nw` words.
    pub fn insert(&mut self, at: At, e: E) -> usize {
        let (mut k, mut j) = at;
        if self.blocks.is_empty() {
            self.blocks.push(Block::new(Vec::new()));
        }
        if k >= self.blocks.len() {
            k = self.blocks.len() - 1;
            j = self.blocks[k].entries.len();
        }
        let w = e.set().weight();
        if self.rowed() {
            let set: Vec<u32> = e.set().iter().collect();
            set.into_iter().for_each(|b| self.row_bit(k, b));
        }
        self.blocks[k].entries.insert(j, e);
        self.blocks[k].weight += w;
        self.weight += w;
        self.len += 1;
        self.split(k);
        self.sync_rows();
        k
    }

    /// Add `bit` to the set of the entry at `at` (see `insert`); whether it was new.
    pub fn add_bit(&mut self, at: At, bit: u32) -> bool {
        let nw = self.nw;
        let (k, j) = at;
        let set = self.blocks[k].entries[j].set_mut();
        let before = set.weight();
        if !set.insert(bit, nw) {
            return false;
        }
        let grown = set.weight() - before;
        self.blocks[k].weight += grown;
        self.weight += grown;
        self.row_bit(k, bit);
        self.split(k);
        true
    }

    /// Remove `bit` from the set of the entry at `at`, and the entry if its set is left
    /// empty (returned). The rows still hold `bit`: the owner calls `fix_rows` once it
    /// knows where the bit's remaining entries are.
    pub fn take_bit(&mut self, at: At, bit: u32) -> Option<E> {
        let nw = self.nw;
        let (k, j) = at;
        let block = &mut self.blocks[k];
        let set = block.entries[j].set_mut();
        let before = set.weight();
        set.remove(bit, nw);
        let (after, empty) = (set.weight(), set.is_empty());
        block.weight = block.weight + after - before;
        self.weight = self.weight + after - before;
        if !empty {
            return None;
        }
        let gone = block.entries.remove(j);
        self.len -= 1;
        if block.entries.is_empty() {
            self.blocks.remove(k);
            if !self.wants_rows() {
                self.blocks.iter_mut().for_each(|b| (b.before, b.from) = (Vec::new(), Vec::new()));
            } else if k == 0 {
                self.blocks[0].before = Vec::new();
            }
        }
        Some(gone)
    }

    /// Make `bit` in the rows say where its entries are: `span`, the first and last
    /// blocks holding an entry with it (None: no entry).
    pub fn fix_rows(&mut self, bit: u32, span: Option<(usize, usize)>) {
        if !self.rowed() {
            return;
        }
        let (w, m) = (bit as usize / 64, 1u64 << (bit % 64));
        for (i, b) in self.blocks.iter_mut().enumerate() {
            let from = span.is_some_and(|(_, last)| last >= i);
            b.from[w] = if from { b.from[w] | m } else { b.from[w] & !m };
            if i > 0 {
                let before = span.is_some_and(|(first, _)| first < i);
                b.before[w] = if before { b.before[w] | m } else { b.before[w] & !m };
            }
        }
        // blocks far lighter than they could be (deletions) cost rows: cut them again
        if self.blocks.len() > 2 + 4 * self.weight / self.cap {
            let entries: Vec<E> = std::mem::take(&mut self.blocks).into_iter().flat_map(|b| b.entries).collect();
            self.cut(entries);
        }
    }

    /// Split block `k` while it is heavier than `cap` and holds two entries or more.
    fn split(&mut self, k: usize) {
        let b = &self.blocks[k];
        if b.weight <= self.cap || b.entries.len() < 2 {
            return;
        }
        // at the middle of its weight, leaving an entry on each side
        let half = b.weight / 2;
        let mut acc = 0;
        let mut h = b.entries.len() - 1;
        for i in 1..b.entries.len() {
            acc += b.entries[i - 1].set().weight();
            if acc >= half {
                h = i;
                break;
            }
        }
        let tail = self.blocks[k].entries.split_off(h);
        let tail_weight: usize = tail.iter().map(|e| e.set().weight()).sum();
        self.blocks[k].weight -= tail_weight;
        let mut next = Block::new(tail);
        next.weight = tail_weight;
        let had_rows = self.rowed();
        self.blocks.insert(k + 1, next);
        if !had_rows {
            self.sync_rows();
        } else {
            let nw = self.nw;
            let r = 0..nw;
            let mut before = if k == 0 { vec![0; nw] } else { self.blocks[k].before.clone() };
            self.blocks[k].entries.iter().for_each(|e| e.set().or_into(&mut before, &r));
            let mut from = self.blocks.get(k + 2).map_or_else(|| vec![0; nw], |b| b.from.clone());
            self.blocks[k + 1].entries.iter().for_each(|e| e.set().or_into(&mut from, &r));
            let b = &mut self.blocks[k + 1];
            (b.before, b.from) = (before, from);
        }
        self.split(k);
        self.split(k + 1);
    }

    /// Every block's rows, from its entries.
    fn make_rows(&mut self) {
        let (nw, n) = (self.nw, self.blocks.len());
        let r = 0..nw;
        if !self.wants_rows() {
            self.blocks.iter_mut().for_each(|b| (b.before, b.from) = (Vec::new(), Vec::new()));
            return;
        }
        let mut acc = vec![0; nw];
        for b in &mut self.blocks {
            b.before = acc.clone();
            b.entries.iter().for_each(|e| e.set().or_into(&mut acc, &r));
        }
        self.blocks[0].before = Vec::new();
        let mut acc = vec![0; nw];
        for k in (0..n).rev() {
            let b = &mut self.blocks[k];
            b.entries.iter().for_each(|e| e.set().or_into(&mut acc, &r));
            b.from = acc.clone();
        }
    }

    /// Blocks cut from `entries` (in order) for masks of `self.nw` words.
    fn cut(&mut self, entries: Vec<E>) {
        self.cap = Self::cap_for(self.nw);
        self.len = entries.len();
        self.weight = 0;
        self.blocks.clear();
        let mut block = Block::new(Vec::new());
        for e in entries {
            let w = e.set().weight();
            if !block.entries.is_empty() && block.weight + w > self.cap {
                self.blocks.push(std::mem::replace(&mut block, Block::new(Vec::new())));
            }
            block.weight += w;
            self.weight += w;
            block.entries.push(e);
        }
        if !block.entries.is_empty() {
            self.blocks.push(block);
        }
        self.make_rows();
    }

    /// Add `e` in bulk: it is in no probe's answer until `settle`.
    pub fn push(&mut self, e: E) {
        self.pending.push(e);
    }

    pub fn unsettled(&self) -> bool {
        !self.pending.is_empty()
    }

    /// Sort everything in (`cmp`: the owner's order; entries it calls equal are one,
    /// their sets merged) and cut the blocks again, for masks of `nw` words. The way
    /// back to a compact layout after bulk additions or a change of mask size.
    pub fn settle(&mut self, nw: usize, cmp: impl Fn(&E, &E) -> Ordering) {
        self.nw = nw;
        let mut all: Vec<E> = std::mem::take(&mut self.blocks).into_iter().flat_map(|b| b.entries).collect();
        all.append(&mut self.pending);
        all.sort_by(&cmp);
        let mut merged: Vec<E> = Vec::with_capacity(all.len());
        for mut e in all {
            e.set_mut().refit(nw);
            match merged.last_mut() {
                Some(last) if cmp(last, &e) == Ordering::Equal => {
                    let set = std::mem::take(e.set_mut());
                    last.set_mut().union_with(&set, nw);
                }
                _ => merged.push(e),
            }
        }
        self.cut(merged);
    }

    /// Bytes held besides the struct itself.
    pub fn heap_bytes(&self) -> usize {
        let entry = std::mem::size_of::<E>();
        self.blocks.capacity() * std::mem::size_of::<Block<E>>()
            + self.pending.capacity() * entry
            + self
                .blocks
                .iter()
                .map(|b| {
                    (b.before.capacity() + b.from.capacity()) * 8
                        + b.entries.capacity() * entry
                        + b.entries.iter().map(|e| e.set().heap_bytes()).sum::<usize>()
                })
                .sum::<usize>()
            + self.pending.iter().map(|e| e.set().heap_bytes()).sum::<usize>()
    }
}

/// The first p in 0..n for which `pred` holds (n if none), `pred` being false and
/// then true.
pub fn first(n: usize, pred: impl Fn(usize) -> bool) -> usize {
    let (mut a, mut b) = (0, n);
    while a < b {
        let mid = (a + b) / 2;
        if pred(mid) { b = mid } else { a = mid + 1 }
    }
    a
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Clone, Debug)]
    struct E(i64, QSet);

    impl Member for E {
        fn set(&self) -> &QSet {
            &self.1
        }
        fn set_mut(&mut self) -> &mut QSet {
            &mut self.1
        }
    }

    struct Lcg(u64);

    impl Lcg {
        fn below(&mut self, n: u64) -> u64 {
            self.0 = self.0.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
            (self.0 >> 33) % n
        }
    }

    fn union(model: &[(i64, Vec<u32>)], keep: impl Fn(i64) -> bool, nw: usize) -> Vec<u64> {
        let mut out = vec![0; nw];
        for (k, bits) in model {
            if keep(*k) {
                bits.iter().for_each(|&b| out[b as usize / 64] |= 1 << (b % 64));
            }
        }
        out
    }

    #[test]
    fn sets_change_form_with_their_count_and_keep_their_bits() {
        let nw = 16;
        let mut set = QSet::default();
        let all = [3u32, 70, 200, 500, 501, 640, 900, 1000];
        for b in all {
            assert!(set.insert(b, nw));
        }
        assert!(matches!(set, QSet::Dense(..)));
        assert!(!set.insert(70, nw));
        for b in all.into_iter().filter(|&b| b != 70) {
            assert!(set.remove(b, nw));
        }
        assert!(matches!(set, QSet::Sparse(_)));
        assert_eq!(set.iter().collect::<Vec<_>>(), vec![70]);
        assert!(!set.remove(3, nw));
        let mut out = vec![0; nw];
        set.or_into(&mut out, &(0..1));
        assert_eq!(out[1], 0, "outside the words asked");
        set.or_into(&mut out, &(1..2));
        assert_eq!(out[1], 1 << 6);
    }

    /// Random insertions, bit additions and removals against a model, for mask sizes
    /// that give one entry per block and several: every probe answers the model's
    /// union, and the rows' memory stays linear.
    #[test]
    fn blocked_unions_match_a_model_under_random_changes() {
        for nw in [1usize, 2, 8, 16, 64] {
            let mut rng = Lcg(nw as u64 + 1);
            let mut list: Blocked<E> = Blocked::new(true, nw);
            let mut model: Vec<(i64, Vec<u32>)> = Vec::new();
            let bitmax = (nw * 64) as u64;
            for round in 0..3000 {
                let key = rng.below(200) as i64;
                let bit = rng.below(bitmax.min(300)) as u32;
                let at = list.search(|e| e.0 < key);
                let found = at.0 < list.blocks().len() && list.entry(at).0 == key;
                match rng.below(3) {
                    0 | 1 => {
                        if found {
                            list.add_bit(at, bit);
                        } else {
                            list.insert(at, E(key, QSet::one(bit, nw)));
                        }
                        let i = model.partition_point(|m| m.0 < key);
                        if model.get(i).is_some_and(|m| m.0 == key) {
                            if !model[i].1.contains(&bit) {
                                model[i].1.push(bit);
                            }
                        } else {
                            model.insert(i, (key, vec![bit]));
                        }
                    }
                    _ => {
                        let Some(i) = model.iter().position(|m| m.0 == key) else { continue };
                        let bit = model[i].1[rng.below(model[i].1.len() as u64) as usize];
                        model[i].1.retain(|&b| b != bit);
                        if model[i].1.is_empty() {
                            model.remove(i);
                        }
                        list.take_bit(at, bit);
                        let blocks: Vec<usize> = model
                            .iter()
                            .filter(|m| m.1.contains(&bit))
                            .map(|m| list.search(|e| e.0 < m.0).0)
                            .collect();
                        let span = blocks.first().map(|&f| (f, *blocks.last().unwrap()));
                        list.fix_rows(bit, span);
                    }
                }
                if round % 7 == 0 {
                    let v = rng.below(210) as i64 - 5;
                    let at = list.search(|e| e.0 <= v);
                    let mut out = vec![0; nw];
                    list.or_from(at, &mut out, &(0..nw));
                    assert_eq!(out, union(&model, |k| k > v, nw), "from {v}, nw {nw}, round {round}");
                    let mut out = vec![0; nw];
                    list.or_before(at, &mut out, &(0..nw));
                    assert_eq!(out, union(&model, |k| k <= v, nw), "before {v}");
                    let mut out = vec![u64::MAX; nw];
                    list.clear_before(at, &mut out, &(0..nw));
                    assert_eq!(out, union(&model, |k| k <= v, nw).iter().map(|w| !w).collect::<Vec<_>>());
                    let mut group = vec![0; nw];
                    for _ in 0..rng.below(4) {
                        let b = rng.below(bitmax.min(300));
                        group[b as usize / 64] |= 1 << (b % 64);
                    }
                    let hit = |m: &(i64, Vec<u32>)| m.1.iter().any(|&b| group[b as usize / 64] >> (b % 64) & 1 != 0);
                    let r = 0..nw;
                    assert_eq!(list.first_hit(&group, &r).map(|a| list.entry(a).0), model.iter().find(|m| hit(m)).map(|m| m.0));
                    assert_eq!(list.last_hit(&group, &r).map(|a| list.entry(a).0), model.iter().rev().find(|m| hit(m)).map(|m| m.0));
                    assert_eq!(list.touches(&group, &r), model.iter().any(hit));
                    assert_eq!(list.len(), model.len());
                    let weight: usize = model.iter().map(|m| m.1.len().min(nw)).sum();
                    let rows = list.blocks().iter().map(|b| b.before.len() + b.from.len()).sum::<usize>();
                    assert!(rows <= 2 * nw * (3 + 8 * ROW_SHARE * weight / nw.max(1)), "rows {rows} for weight {weight}");
                }
            }
        }
    }

    #[test]
    fn settling_merges_equal_entries_and_sorts() {
        let nw = 2;
        let mut list: Blocked<E> = Blocked::new(true, nw);
        for (k, b) in [(5, 1), (3, 2), (5, 7), (1, 100)] {
            list.push(E(k, QSet::one(b, nw)));
        }
        assert!(list.unsettled());
        list.settle(nw, |a, b| a.0.cmp(&b.0));
        let keys: Vec<(i64, Vec<u32>)> = list.iter().map(|e| (e.0, e.1.iter().collect())).collect();
        assert_eq!(keys, vec![(1, vec![100]), (3, vec![2]), (5, vec![1, 7])]);
    }
}
