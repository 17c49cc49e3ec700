//! Where `d = x - factor*y` falls in a pair predicate list, decided exactly or not at all.
//!
//! This is the fast part of `PairRangeList.position` (services/juggler/engine/
//! predicate_lists.py), operation for operation, so it returns the very position the
//! Python code returns, or `None` where the Python code would need exact rational
//! arithmetic (a value within rounding error of a constant) or a value it cannot
//! represent (an int beyond 64 bits, a bool, anything not an int or a float): the
//! caller then asks Python. The two paths, as in Python:
//!
//! - both values ints and the factor an integer: `d` is exact (i128 holds it: |x| and
//!   |y| are below 2^63 and |factor| below 2^63, so |d| < 2^126 + 2^63), compared with
//!   the lists's integer thresholds (`floor`/`ceil` of the constants, clamped to i128,
//!   which changes no comparison with such a `d`);
//! - otherwise `d` and a bound on its rounding error in doubles, with the same IEEE
//!   operations in the same order as `exact.float_difference` (ints converted to the
//!   nearest double, as CPython converts them), and the position is decided when no
//!   constant lies within the error band.

use crate::bisect::{bisect_left, bisect_right};

/// Relative error allowed for `x - m*y` computed in floats: `exact._BAND`.
const BAND: f64 = 1.0 / (1u64 << 48) as f64;

/// An event value the native path can compute with.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Value {
    /// A Python `int` (exactly `int`, not `bool`) that fits 64 bits.
    Int(i64),
    /// A Python `float`.
    Float(f64),
}

impl Value {
    fn as_f64(self) -> f64 {
        match self {
            // Rounds to nearest, ties to even: what CPython's int-to-float conversion does.
            Value::Int(i) => i as f64,
            Value::Float(f) => f,
        }
    }
}

/// The list's factor, when it is an integer (the exact int path needs it in i64).
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum IntFactor {
    /// Not an integer: ints take the float path too.
    None,
    Small(i64),
    /// An integer beyond 64 bits: pairs of ints go to Python.
    Huge,
}

/// One `PairRangeList`'s sorted constants, as its Python `_rebuild` computes them, and
/// the query mask that fails at each position.
#[derive(Clone, Debug)]
pub struct PairRange {
    /// LOWER (`>`, `>=`: satisfied above the constants) or UPPER (`<`, `<=`).
    pub lower: bool,
    pub int_factor: IntFactor,
    pub float_factor: f64,
    pub float_constants: Vec<f64>,
    /// The integer thresholds, clamped to the i128 range.
    pub int_thresholds: Vec<i128>,
    /// `fail_at[position]`: the queries failing when `d` falls at that position.
    pub fail_at: Vec<Vec<u64>>,
}

impl PairRange {
    /// How many entries lie on the low side of `d = x - factor*y`, as
    /// `PairRangeList.position` computes it, or `None` when only exact arithmetic
    /// (or Python) can tell.
    pub fn position(&self, x: Value, y: Value) -> Option<usize> {
        if let (Value::Int(a), Value::Int(b)) = (x, y) {
            match self.int_factor {
                IntFactor::Small(f) => {
                    let d = a as i128 - f as i128 * b as i128;
                    let th = &self.int_thresholds;
                    return Some(if self.lower { bisect_right(th, &d, 0) } else { bisect_left(th, &d, 0) });
                }
                IntFactor::Huge => return None,
                IntFactor::None => {}
            }
        }
        let (x, y) = (x.as_f64(), y.as_f64());
        let product = self.float_factor * y;
        let diff = x - product;
        let err = (x.abs() + 2.0 * product.abs() + diff.abs()) * BAND + 1e-300;
        let lo = bisect_left(&self.float_constants, &(diff - err), 0);
        let hi = bisect_right(&self.float_constants, &(diff + err), lo);
        (lo == hi).then_some(lo)
    }

    /// The queries of this list that `x` and `y` fail, or `None` as for `position`.
    pub fn failing(&self, x: Value, y: Value) -> Option<&[u64]> {
        self.position(x, y).map(|p| self.fail_at[p].as_slice())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use Value::{Float, Int};

    // Lists and expected positions come from the Python definition
    // (PairRangeList._rebuild and .position in predicate_lists.py).

    /// `left > 2*right + k` for k in {-1/2 (strict), 3 (>=)}: thresholds [0, 3].
    fn lower_int() -> PairRange {
        PairRange {
            lower: true,
            int_factor: IntFactor::Small(2),
            float_factor: 2.0,
            float_constants: vec![-0.5, 3.0],
            int_thresholds: vec![0, 3],
            fail_at: vec![vec![0b11], vec![0b10], vec![]],
        }
    }

    #[test]
    fn ints_take_the_exact_integer_path() {
        let list = lower_int();
        assert_eq!(list.position(Int(0), Int(0)), Some(1)); // d = 0 satisfies d > -1/2
        assert_eq!(list.position(Int(-1), Int(0)), Some(0));
        assert_eq!(list.position(Int(3), Int(0)), Some(2)); // d = 3 satisfies d >= 3
        assert_eq!(list.position(Int(i64::MAX), Int(i64::MIN)), Some(2)); // no overflow
        assert_eq!(list.position(Int(i64::MIN), Int(i64::MAX)), Some(0));
        assert_eq!(list.failing(Int(0), Int(0)), Some(&[0b10u64][..]));
    }

    #[test]
    fn upper_lists_count_the_unsatisfied_prefix() {
        // `left < right + k` for k in {0 (strict), 5 (<=)}: int thresholds [-1, 5]
        let list = PairRange {
            lower: false,
            int_factor: IntFactor::Small(1),
            float_factor: 1.0,
            float_constants: vec![0.0, 5.0],
            int_thresholds: vec![-1, 5],
            fail_at: vec![vec![], vec![1], vec![3]],
        };
        assert_eq!(list.position(Int(-1), Int(0)), Some(0));
        assert_eq!(list.position(Int(0), Int(0)), Some(1));
        assert_eq!(list.position(Int(5), Int(0)), Some(1));
        assert_eq!(list.position(Int(6), Int(0)), Some(2));
    }

    #[test]
    fn clamped_thresholds_keep_every_comparison() {
        let list = PairRange {
            lower: true,
            int_factor: IntFactor::Small(i64::MAX),
            float_factor: i64::MAX as f64,
            float_constants: vec![f64::NEG_INFINITY, f64::INFINITY],
            int_thresholds: vec![i128::MIN, i128::MAX],
            fail_at: vec![vec![3], vec![2], vec![]],
        };
        assert_eq!(list.position(Int(i64::MAX), Int(i64::MIN)), Some(1));
        assert_eq!(list.position(Int(i64::MIN), Int(i64::MAX)), Some(1));
    }

    #[test]
    fn a_huge_integer_factor_leaves_int_pairs_to_python() {
        let list = PairRange { int_factor: IntFactor::Huge, ..lower_int() };
        assert_eq!(list.position(Int(1), Int(1)), None);
        assert!(list.position(Float(1.0), Int(1)).is_some());
    }

    #[test]
    fn floats_are_decided_outside_the_error_band_only() {
        let list = lower_int();
        assert_eq!(list.position(Float(10.0), Float(1.0)), Some(2));
        assert_eq!(list.position(Float(-10.0), Int(1)), Some(0));
        assert_eq!(list.position(Float(2.5), Float(0.0)), Some(1));
        assert_eq!(list.position(Float(-0.5), Float(0.0)), None); // d == k: exact decides
        assert_eq!(list.position(Float(-0.0), Float(0.0)), Some(1));
        assert_eq!(list.position(Float(f64::NAN), Float(0.0)), None);
        assert_eq!(list.position(Float(f64::MAX), Float(-f64::MAX)), None); // d overflows
    }

    #[test]
    fn non_integer_factors_send_ints_down_the_float_path() {
        // `left >= right/3 + 0`: float constants [0.0]
        let list = PairRange {
            lower: true,
            int_factor: IntFactor::None,
            float_factor: 1.0 / 3.0,
            float_constants: vec![0.0],
            int_thresholds: vec![0],
            fail_at: vec![vec![1], vec![]],
        };
        assert_eq!(list.position(Int(2), Int(3)), Some(1));
        assert_eq!(list.position(Int(-1), Int(3)), Some(0));
        assert_eq!(list.position(Int(1), Int(3)), None); // 1 - 3/3 == 0: exact decides
        assert_eq!(list.position(Int(0), Int(0)), None);
        // 2^60 + 1 rounds to 2^60 as a double, as in Python
        assert_eq!(list.position(Int((1 << 60) + 1), Int(0)), Some(1));
    }
}
