//! Predicate specs from Python: `juggler.engine.native_engine` compiles a query's
//! predicates, with exact thresholds, into the `PredSpec`s the core registers.

use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;
use pyo3::types::PyTuple;

use crate::lists::{EqConst, Factor};
use crate::operator::PredSpec;
use crate::py_convert::clamped;
use crate::value::{NumKey, float_key};

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

fn factor(f: &Bound<'_, PyAny>, int: &Bound<'_, PyAny>) -> PyResult<Factor> {
    Ok(Factor { f: f.extract()?, int: if int.is_none() { None } else { int.extract().ok() } })
}

pub(crate) fn pred(t: &Bound<'_, PyTuple>) -> PyResult<PredSpec> {
    let tag: String = t.get_item(0)?.extract()?;
    let g = |i: usize| t.get_item(i);
    Ok(match tag.as_str() {
        "range" => PredSpec::Range {
            id: g(1)?.extract()?,
            stream: g(2)?.extract()?,
            slot: g(3)?.extract()?,
            lower: g(4)?.extract()?,
            tf: g(5)?.extract()?,
            ti: clamped(&g(6)?)?,
        },
        "eq" => PredSpec::Eq {
            id: g(1)?.extract()?,
            stream: g(2)?.extract()?,
            slot: g(3)?.extract()?,
            eq: g(4)?.extract()?,
            constant: constant(&g(5)?)?,
        },
        "prange" => PredSpec::PairRange {
            id: g(1)?.extract()?,
            l: (g(2)?.extract()?, g(3)?.extract()?),
            r: (g(4)?.extract()?, g(5)?.extract()?),
            lower: g(6)?.extract()?,
            factor: factor(&g(7)?, &g(8)?)?,
            tf: g(9)?.extract()?,
            ti: clamped(&g(10)?)?,
        },
        "peq" => PredSpec::PairEq {
            id: g(1)?.extract()?,
            l: (g(2)?.extract()?, g(3)?.extract()?),
            r: (g(4)?.extract()?, g(5)?.extract()?),
            eq: g(6)?.extract()?,
            factor: factor(&g(7)?, &g(8)?)?,
            constant: constant(&g(9)?)?,
        },
        _ => return Err(PyValueError::new_err(format!("unknown predicate {t}"))),
    })
}
