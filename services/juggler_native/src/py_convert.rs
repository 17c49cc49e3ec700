//! Python values to the core's and back: event values (`V`), and the names and
//! positions a result's Avro body carries, checked to be exactly what
//! `juggler.codec.result_body` would write. Shared by the operator's and the
//! decoder's bindings.

use pyo3::exceptions::PyTypeError;
use pyo3::ffi;
use pyo3::prelude::*;
use pyo3::types::{PyBool, PyFloat, PyInt, PyString, PyTuple};

use crate::avro;
use crate::value::V;

/// A value as the Python object `juggler` events and results hold.
pub(crate) fn to_py<'py>(py: Python<'py>, v: &V) -> PyResult<Bound<'py, PyAny>> {
    Ok(match v {
        V::I(i) => i.into_pyobject(py)?.into_any(),
        V::F(f) => PyFloat::new(py, *f).into_any(),
        V::B(b) => PyBool::new(py, *b).to_owned().into_any(),
        V::S(s) => PyString::new(py, s).into_any(),
        V::X(text) => py.get_type::<PyInt>().call1((text.as_str(),))?,
        V::Missing => py.None().into_bound(py),
    })
}

/// Take a new object out of the garbage collector's care: a result (its fields hold
/// strings, ints and dicts of values and positions, so it is in no reference cycle)
/// or a position tuple. Tracked, the twenty results per event at J n=1,000 were
/// traversed by every collection they lived through, and survived into the old
/// generation often enough to set off full collections of the whole heap: a tenth of
/// the time. Safe for any object: an untracked one only keeps what it refers to
/// alive, and a cycle a caller later builds through a result is leaked, not freed.
pub(crate) fn untrack(ob: &Bound<'_, PyAny>) {
    // SAFETY: the GC header exists whenever PyObject_IS_GC says so; untracking an
    // object that is not tracked does nothing.
    unsafe {
        if ffi::PyObject_IS_GC(ob.as_ptr()) != 0 {
            ffi::PyObject_GC_UnTrack(ob.as_ptr().cast());
        }
    }
}

pub(crate) fn from_py(ob: &Bound<'_, PyAny>) -> PyResult<V> {
    if let Ok(f) = ob.cast_exact::<PyFloat>() {
        return Ok(V::F(f.value()));
    }
    if let Some(int) = exact_int(ob) {
        return Ok(match int {
            Some(value) => V::I(value),
            None => V::X(Box::new(ob.str()?.to_str()?.to_owned())),
        });
    }
    if let Ok(s) = ob.cast_exact::<PyString>() {
        return Ok(V::S(Box::new(s.to_str()?.to_owned())));
    }
    if let Ok(b) = ob.cast_exact::<PyBool>() {
        return Ok(V::B(b.is_true()));
    }
    Err(PyTypeError::new_err(format!("unsupported event value {ob}")))
}

/// The `topic` and `partition` of a `Position` from a position's (topic, partition):
/// a `str` in UTF-8 and an `int` within 32 bits, exactly, or None (`result_body`
/// leaves anything else to fastavro, or `result_record` refuses it).
pub(crate) fn position_prefix(prefix: &Bound<'_, PyTuple>) -> Option<Vec<u8>> {
    let topic = prefix.get_item(0).ok()?;
    let mut out = exact_str(topic.cast_exact::<PyString>().ok()?)?;
    let partition = prefix.get_item(1).ok()?;
    avro::long(&mut out, i32::try_from(exact_int(&partition)??).ok()?.into());
    Some(out)
}

/// For an `int` (exactly, not `bool`): its value if it fits 64 bits, else None; None
/// for anything else.
pub(crate) fn exact_int(ob: &Bound<'_, PyAny>) -> Option<Option<i64>> {
    if !ob.is_exact_instance_of::<PyInt>() {
        return None;
    }
    let mut overflow = 0;
    // -1 without overflow may also mean an error, which an exact int cannot raise
    let value = unsafe { ffi::PyLong_AsLongLongAndOverflow(ob.as_ptr(), &mut overflow) };
    Some((overflow == 0).then_some(value))
}

/// A Python int as i128, clamped at the ends (no difference of 64-bit values reaches them).
pub(crate) fn clamped(ob: &Bound<'_, PyAny>) -> PyResult<i128> {
    match ob.extract::<i128>() {
        Ok(v) => Ok(v),
        Err(_) => Ok(if ob.gt(0)? { i128::MAX } else { i128::MIN }),
    }
}

/// A `str` (exactly) as an Avro string; None for a subclass or a string with lone
/// surrogates, which is not UTF-8.
pub(crate) fn exact_str(s: &Bound<'_, PyString>) -> Option<Vec<u8>> {
    if !s.is_exact_instance_of::<PyString>() {
        return None;
    }
    s.to_str().ok().map(avro::encoded)
}
