//! Event values as the operator holds them: no Python object per held event.
//!
//! Numbers keep their Python type (an `int` that fits 64 bits, or a double); an `int`
//! beyond 64 bits keeps its decimal text and every comparison with it is decided by
//! the exact fallback (`Exact`), as Python decides it.

use std::cmp::Ordering;

#[derive(Clone, Debug, PartialEq)]
pub enum V {
    /// A column the event does not have (never satisfies a predicate).
    Missing,
    I(i64),
    F(f64),
    B(bool),
    /// Boxed twice so a value is 16 bytes: strings are rare in predicates, and every
    /// held event stores a value per column.
    S(Box<String>),
    /// An int beyond 64 bits, as decimal text.
    X(Box<String>),
}

impl V {
    /// The value as a double the way CPython converts it (ints round to nearest).
    pub fn as_f64(&self) -> Option<f64> {
        match self {
            V::I(i) => Some(*i as f64),
            V::F(f) => Some(*f),
            _ => None,
        }
    }

    /// Equality as Python's `==` between two event values of comparable types (ints
    /// and doubles compare exactly); None when only the exact fallback can tell.
    pub fn py_eq(&self, other: &V) -> Option<bool> {
        Some(match (self, other) {
            (V::I(a), V::I(b)) => a == b,
            (V::F(a), V::F(b)) => a == b,
            (V::I(i), V::F(f)) | (V::F(f), V::I(i)) => int_cmp_float(*i as i128, *f) == Some(Ordering::Equal),
            (V::B(a), V::B(b)) => a == b,
            (V::S(a), V::S(b)) => a == b,
            (V::X(_), _) | (_, V::X(_)) => return None,
            _ => false,
        })
    }
}

/// `i` compared with `f` exactly (None for NaN).
pub fn int_cmp_float(i: i128, f: f64) -> Option<Ordering> {
    if f.is_nan() {
        return None;
    }
    if f >= 1.7e38 {
        return Some(Ordering::Less);
    }
    if f <= -1.7e38 {
        return Some(Ordering::Greater);
    }
    let fl = f.floor();
    let fi = fl as i128;
    Some(match i.cmp(&fi) {
        Ordering::Equal if fl != f => Ordering::Less,
        other => other,
    })
}

/// A hashable form of a number for equality lookups: integral doubles that fit 64
/// bits hash as the int they equal (Python's `1 == 1.0`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum NumKey {
    I(i64),
    F(u64),
}

pub fn num_key(v: &V) -> Option<NumKey> {
    match v {
        V::I(i) => Some(NumKey::I(*i)),
        V::F(f) => Some(float_key(*f)),
        _ => None,
    }
}

pub fn float_key(f: f64) -> NumKey {
    if f.fract() == 0.0 && (-9.223372036854775808e18..9.223372036854775808e18).contains(&f) {
        NumKey::I(f as i64)
    } else {
        NumKey::F(f.to_bits())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_value_is_two_words() {
        assert_eq!(std::mem::size_of::<V>(), 16);
    }

    #[test]
    fn ints_and_doubles_compare_exactly() {
        let big = (1i64 << 60) + 1;
        assert_eq!(int_cmp_float(big as i128, (1u64 << 60) as f64), Some(Ordering::Greater));
        assert_eq!(int_cmp_float(3, 3.0), Some(Ordering::Equal));
        assert_eq!(int_cmp_float(3, 3.5), Some(Ordering::Less));
        assert_eq!(int_cmp_float(-3, -3.5), Some(Ordering::Greater));
        assert_eq!(int_cmp_float(i64::MAX as i128, 1e300), Some(Ordering::Less));
        assert_eq!(V::I(1).py_eq(&V::F(1.0)), Some(true));
        assert_eq!(V::I(big).py_eq(&V::F(big as f64)), Some(false));
        assert_eq!(float_key(-0.0), NumKey::I(0));
        assert_eq!(num_key(&V::F(2.0)), num_key(&V::I(2)));
    }
}
