//! The Juggler operator's hot path in Rust (issue 10), first piece: filtering the
//! partners that retrieval found.
//!
//! For every candidate partner of a partial combination, the operator runs the three
//! predicate types in the order the predicate type manager keeps and removes, as a
//! query bitmask, every query the combination fails (thesis Figure 3.19). In Python
//! that loop cost about 1.5 µs per partner and predicate list; here it is one call per
//! batch of candidates. Python still owns everything else: the predicate lists and
//! their exact thresholds (DESIGN section 2), the attribute masks, retrieval, results.
//!
//! The pure core (Python's `bisect` on slices, query masks as word arrays, the position
//! of a value in a pair predicate list, the MAXWINDOW table) has no Python in it and is
//! what `cargo test` checks; `python` (the `python` feature, on in maturin builds) binds
//! it to `juggler.engine` as the `juggler_native` module.

pub mod bisect;
pub mod lists;
pub mod operator;
pub mod ordering;
pub mod store;
pub mod value;
pub mod mask;
pub mod pair_range;
pub mod window;

#[cfg(feature = "python")]
mod py_operator;
#[cfg(feature = "python")]
mod python;
