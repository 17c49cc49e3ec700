//! Query bitmasks as little-endian arrays of 64-bit words: bit `i` is the query with
//! bit index `i`, as in the Python ints the engine uses, with no limit on the number of
//! queries. Masks of different lengths combine as if the shorter were padded with zero
//! words.

/// `survivors &= ~fail`, the thesis's test that removes the queries a tuple fails.
pub fn and_not(survivors: &mut [u64], fail: &[u64]) {
    for (s, f) in survivors.iter_mut().zip(fail) {
        *s &= !f;
    }
}

/// Whether the two masks share a query.
pub fn intersects(a: &[u64], b: &[u64]) -> bool {
    a.iter().zip(b).any(|(x, y)| x & y != 0)
}

pub fn is_empty(mask: &[u64]) -> bool {
    mask.iter().all(|&w| w == 0)
}

/// The mask without its high zero words (the shortest array holding the same queries).
pub fn trimmed(mask: &[u64]) -> &[u64] {
    let len = mask.iter().rposition(|&w| w != 0).map_or(0, |i| i + 1);
    &mask[..len]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn and_not_removes_failing_queries_across_words() {
        let mut s = [0b1011, 1 << 63, 0b1];
        and_not(&mut s, &[0b0010, 1 << 63]);
        assert_eq!(s, [0b1001, 0, 0b1]);
        and_not(&mut s, &[]);
        assert_eq!(s, [0b1001, 0, 0b1]);
        and_not(&mut s, &[u64::MAX, u64::MAX, u64::MAX, u64::MAX]);
        assert!(is_empty(&s));
    }

    #[test]
    fn masks_of_different_lengths_compare_as_if_zero_padded() {
        assert!(intersects(&[0, 4], &[1, 4, 9]));
        assert!(!intersects(&[1], &[0, 1]));
        assert!(!intersects(&[], &[1]));
        assert!(is_empty(&[]));
        assert!(is_empty(&[0, 0]));
        assert_eq!(trimmed(&[5, 0, 7, 0, 0]), &[5, 0, 7]);
        assert_eq!(trimmed(&[0, 0]), &[] as &[u64]);
    }
}
