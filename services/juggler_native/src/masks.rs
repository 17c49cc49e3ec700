//! Query masks: a set of queries as the bits of 64-bit words, the form in which every
//! predicate list answers and every block of held events keeps which queries want it.
//! Its own module because both the lists and the blocks work on masks, and neither is
//! the other's part.

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
