//! Python's `bisect.bisect_left` and `bisect.bisect_right`, comparison for comparison.
//!
//! The slice std offers (`partition_point`) asks for a predicate that is monotone over
//! the slice, which a NaN breaks; these run CPython's own loop, so a position computed
//! here is the one the Python code computed, whatever the floats are.

/// First index `i >= lo` such that `!(a[i] < x)`, found as CPython does.
pub fn bisect_left<T: PartialOrd>(a: &[T], x: &T, lo: usize) -> usize {
    let (mut lo, mut hi) = (lo, a.len());
    while lo < hi {
        let mid = lo + (hi - lo) / 2;
        if a[mid] < *x {
            lo = mid + 1;
        } else {
            hi = mid;
        }
    }
    lo
}

/// First index `i >= lo` such that `x < a[i]`, found as CPython does.
pub fn bisect_right<T: PartialOrd>(a: &[T], x: &T, lo: usize) -> usize {
    let (mut lo, mut hi) = (lo, a.len());
    while lo < hi {
        let mid = lo + (hi - lo) / 2;
        if *x < a[mid] {
            hi = mid;
        } else {
            lo = mid + 1;
        }
    }
    lo
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sorted_values_land_where_python_puts_them() {
        let a = [1.0, 2.0, 2.0, 3.0];
        assert_eq!(bisect_left(&a, &2.0, 0), 1);
        assert_eq!(bisect_right(&a, &2.0, 0), 3);
        assert_eq!(bisect_left(&a, &0.5, 0), 0);
        assert_eq!(bisect_right(&a, &9.0, 0), 4);
        assert_eq!(bisect_right(&a, &2.0, 3), 3);
        assert_eq!(bisect_left::<f64>(&[], &1.0, 0), 0);
    }

    #[test]
    fn nan_goes_where_cpythons_loop_sends_it() {
        // bisect.bisect_left([1.0, 2.0, 3.0], nan) == 0, bisect_right(...) == 3
        let a = [1.0, 2.0, 3.0];
        assert_eq!(bisect_left(&a, &f64::NAN, 0), 0);
        assert_eq!(bisect_right(&a, &f64::NAN, 0), 3);
    }

    #[test]
    fn negative_zero_equals_zero() {
        let a = [-1.0, 0.0, 1.0];
        assert_eq!(bisect_left(&a, &-0.0, 0), 1);
        assert_eq!(bisect_right(&a, &-0.0, 0), 2);
    }
}
