//! Predicate specs from Python: `juggler.engine.predicate_specs`' named tuples, which
//! `juggler.engine.native_engine` compiles a query's predicates into (exact
//! thresholds, column slots), read by field name into the `PredSpec`s the core
//! registers.

use pyo3::exceptions::PyValueError;
use pyo3::intern;
use pyo3::prelude::*;
use pyo3::types::{PyString, PyTuple};

use crate::lists::{EqConst, Factor};
use crate::operator::PredSpec;
use crate::py_convert::clamped;
use crate::value::{NumKey, float_key};

/// `RangeSpec`: `stream.slot >= threshold` (`lower`) or `<= threshold`.
#[derive(FromPyObject)]
struct RangeSpec {
    id: u32,
    stream: u32,
    slot: usize,
    lower: bool,
    threshold: f64,
    #[pyo3(from_py_with = clamped)]
    int_threshold: i128,
}

/// `EqSpec`: `stream.slot = constant` (`eq`) or `!= constant`.
#[derive(FromPyObject)]
struct EqSpec {
    id: u32,
    stream: u32,
    slot: usize,
    eq: bool,
    #[pyo3(from_py_with = constant)]
    constant: EqConst,
}

/// `PairRangeSpec`: `left - factor * right >= threshold` (`lower`) or `<= threshold`.
#[derive(FromPyObject)]
struct PairRangeSpec {
    id: u32,
    left: (u32, usize),
    right: (u32, usize),
    lower: bool,
    factor: f64,
    int_factor: Option<i64>,
    threshold: f64,
    #[pyo3(from_py_with = clamped)]
    int_threshold: i128,
}

/// `PairEqSpec`: `left - factor * right = constant` (`eq`) or `!= constant`.
#[derive(FromPyObject)]
struct PairEqSpec {
    id: u32,
    left: (u32, usize),
    right: (u32, usize),
    eq: bool,
    factor: f64,
    int_factor: Option<i64>,
    #[pyo3(from_py_with = constant)]
    constant: EqConst,
}

/// An `=`/`!=` constant: a tagged tuple (`("i", int)`, `("d", float, int | None)`, ...).
fn constant(ob: &Bound<'_, PyAny>) -> PyResult<EqConst> {
    let t = ob.cast::<PyTuple>()?;
    let tag: String = t.get_item(0)?.extract()?;
    Ok(match tag.as_str() {
        "i" => EqConst::Num(NumKey::I(t.get_item(1)?.extract()?)),
        "f" => EqConst::Num(float_key(t.get_item(1)?.extract()?)),
        "s" => EqConst::Str(t.get_item(1)?.extract::<String>()?.into()),
        "b" => EqConst::Bool(t.get_item(1)?.extract()?),
        "never" => EqConst::Never,
        "d" => {
            let int = t.get_item(2)?;
            EqConst::Diff(t.get_item(1)?.extract()?, if int.is_none() { None } else { Some(clamped(&int)?) })
        }
        _ => return Err(PyValueError::new_err(format!("unknown constant {ob}"))),
    })
}

/// A predicate spec, by its `kind`.
pub(crate) fn pred(ob: &Bound<'_, PyAny>) -> PyResult<PredSpec> {
    let py = ob.py();
    let kind = ob.getattr(intern!(py, "kind"))?;
    Ok(match kind.cast::<PyString>()?.to_str()? {
        "range" => {
            let RangeSpec { id, stream, slot, lower, threshold, int_threshold } = ob.extract()?;
            PredSpec::Range { id, stream, slot, lower, tf: threshold, ti: int_threshold }
        }
        "eq" => {
            let EqSpec { id, stream, slot, eq, constant } = ob.extract()?;
            PredSpec::Eq { id, stream, slot, eq, constant }
        }
        "pair_range" => {
            let PairRangeSpec { id, left, right, lower, factor, int_factor, threshold, int_threshold } = ob.extract()?;
            PredSpec::PairRange {
                id,
                l: left,
                r: right,
                lower,
                factor: Factor { f: factor, int: int_factor },
                tf: threshold,
                ti: int_threshold,
            }
        }
        "pair_eq" => {
            let PairEqSpec { id, left, right, eq, factor, int_factor, constant } = ob.extract()?;
            PredSpec::PairEq { id, l: left, r: right, eq, factor: Factor { f: factor, int: int_factor }, constant }
        }
        _ => return Err(PyValueError::new_err(format!("unknown predicate {ob}"))),
    })
}
