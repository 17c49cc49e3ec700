//! The `juggler_native` Python module: the pure core bound to `juggler.engine`.
//!
//! Python keeps the definitions. Every object here is built from what a Python
//! structure already computed exactly (a `PairRangeList`'s constants and failing
//! masks, the MAXWINDOW table), and wherever the core cannot decide exactly (see
//! `pair_range`) or meets a list it does not have natively (`=`/`!=` pair lists), it
//! calls the Python list's own `failing`. So a native answer is the Python answer.
//!
//! Query masks cross the boundary as Python ints of any size, read and written
//! through CPython's byte-array conversions (no per-word Python arithmetic).

use pyo3::exceptions::PyTypeError;
use pyo3::ffi;
use pyo3::intern;
use pyo3::prelude::*;
use pyo3::types::{PyFloat, PyInt, PyList, PyString, PyTuple};

use crate::mask;
use crate::pair_range::{IntFactor, PairRange, Value};
use crate::window::{WindowTable, span};

// ------------------------------------------------------------------ masks <-> ints

#[cfg(not(Py_3_13))]
unsafe extern "C" {
    /// Bits in |v| (CPython's private helper, exported up to 3.12 as 3.13's
    /// `PyLong_AsNativeBytes` replaces it); `(size_t)-1` with an exception on error.
    fn _PyLong_NumBits(v: *mut ffi::PyObject) -> usize;
}

/// Read the non-negative Python int `ob` into `words` (resized to fit it).
fn read_mask(ob: &Bound<'_, PyAny>, words: &mut Vec<u64>) -> PyResult<()> {
    let py = ob.py();
    let int = ob.cast::<PyInt>()?;
    let ptr = int.as_ptr();
    words.clear();
    #[cfg(not(Py_3_13))]
    unsafe {
        let bits = _PyLong_NumBits(ptr);
        if bits == usize::MAX {
            return Err(PyErr::fetch(py));
        }
        let n = bits.div_ceil(64);
        words.resize(n, 0);
        if n > 0 && ffi::_PyLong_AsByteArray(ptr.cast(), words.as_mut_ptr().cast(), n * 8, 1, 0) < 0 {
            return Err(PyErr::fetch(py));
        }
    }
    #[cfg(Py_3_13)]
    unsafe {
        let flags = ffi::Py_ASNATIVEBYTES_LITTLE_ENDIAN
            | ffi::Py_ASNATIVEBYTES_UNSIGNED_BUFFER
            | ffi::Py_ASNATIVEBYTES_REJECT_NEGATIVE;
        let need = ffi::PyLong_AsNativeBytes(ptr, std::ptr::null_mut(), 0, flags);
        if need < 0 {
            return Err(PyErr::fetch(py));
        }
        let n = (need as usize).div_ceil(8);
        words.resize(n, 0);
        if n > 0 && ffi::PyLong_AsNativeBytes(ptr, words.as_mut_ptr().cast(), (n * 8) as isize, flags) < 0 {
            return Err(PyErr::fetch(py));
        }
    }
    for word in words.iter_mut() {
        *word = u64::from_le(*word);
    }
    Ok(())
}

fn to_mask(ob: &Bound<'_, PyAny>) -> PyResult<Vec<u64>> {
    let mut words = Vec::new();
    read_mask(ob, &mut words)?;
    Ok(words)
}

/// The Python int holding the queries of `words`.
fn mask_to_int<'py>(py: Python<'py>, words: &[u64]) -> PyResult<Bound<'py, PyAny>> {
    let bytes: Vec<u8> = mask::trimmed(words).iter().flat_map(|w| w.to_le_bytes()).collect();
    unsafe {
        #[cfg(not(Py_3_13))]
        let ptr = ffi::_PyLong_FromByteArray(bytes.as_ptr(), bytes.len(), 1, 0);
        #[cfg(Py_3_13)]
        let ptr = ffi::PyLong_FromUnsignedNativeBytes(
            bytes.as_ptr().cast(),
            bytes.len(),
            ffi::Py_ASNATIVEBYTES_LITTLE_ENDIAN,
        );
        Bound::from_owned_ptr_or_err(py, ptr)
    }
}

// ------------------------------------------------------------------ values

/// An `int` (exactly, not `bool`) within 64 bits, or a `float`; `None` for anything
/// else, which Python then handles.
fn classify(ob: &Bound<'_, PyAny>) -> Option<Value> {
    if let Ok(float) = ob.cast_exact::<PyFloat>() {
        return Some(Value::Float(float.value()));
    }
    crate::py_operator::exact_int(ob)?.map(Value::Int)
}

/// An int within 64 bits or a TypeError/OverflowError, for event times and counters.
fn long(ob: &Bound<'_, PyAny>, what: &str) -> PyResult<i64> {
    ob.extract::<i64>()
        .map_err(|_| PyTypeError::new_err(format!("{what} must be an int within 64 bits, got {ob}")))
}

/// `PairRange(lower, int_factor, float_factor, float_constants, int_thresholds,
/// fail_at)`: a `PairRangeList`'s sorted constants as its `_rebuild` computed them.
#[pyclass(frozen, name = "PairRange", module = "juggler_native")]
struct PyPairRange {
    core: PairRange,
    args: Py<PyTuple>,
}

#[pymethods]
impl PyPairRange {
    #[new]
    fn new(
        lower: bool,
        int_factor: &Bound<'_, PyAny>,
        float_factor: f64,
        float_constants: Vec<f64>,
        int_thresholds: Vec<Bound<'_, PyAny>>,
        fail_at: Vec<Bound<'_, PyAny>>,
    ) -> PyResult<Self> {
        let py = int_factor.py();
        let factor = if int_factor.is_none() {
            IntFactor::None
        } else {
            match int_factor.extract::<i64>() {
                Ok(f) => IntFactor::Small(f),
                Err(_) if int_factor.cast::<PyInt>().is_ok() => IntFactor::Huge,
                Err(e) => return Err(e),
            }
        };
        if fail_at.len() != float_constants.len() + 1 || int_thresholds.len() != float_constants.len() {
            return Err(PyTypeError::new_err("a list of n constants has n thresholds and n + 1 masks"));
        }
        let core = PairRange {
            lower,
            int_factor: factor,
            float_factor,
            float_constants: float_constants.clone(),
            int_thresholds: int_thresholds.iter().map(saturating_i128).collect::<PyResult<_>>()?,
            fail_at: fail_at.iter().map(to_mask).collect::<PyResult<_>>()?,
        };
        let args = (lower, int_factor, float_factor, float_constants, int_thresholds, fail_at);
        Ok(PyPairRange { core, args: args.into_pyobject(py)?.unbind() })
    }

    /// `PairRangeList.position(x, y)` where it needs no exact arithmetic, else None.
    fn position(&self, x: &Bound<'_, PyAny>, y: &Bound<'_, PyAny>) -> Option<usize> {
        self.core.position(classify(x)?, classify(y)?)
    }

    fn __reduce__<'py>(slf: &Bound<'py, Self>) -> (Bound<'py, PyAny>, Bound<'py, PyTuple>) {
        (slf.get_type().into_any(), slf.get().args.bind(slf.py()).clone())
    }
}

/// A Python int as i128, clamped at the ends (see `pair_range`: no `d` reaches them).
fn saturating_i128(ob: &Bound<'_, PyAny>) -> PyResult<i128> {
    match ob.extract::<i128>() {
        Ok(v) => Ok(v),
        Err(_) if ob.cast::<PyInt>().is_ok() => Ok(if ob.gt(0)? { i128::MAX } else { i128::MIN }),
        Err(e) => Err(e),
    }
}

/// `WindowTable(bounds, narrower_than)`: `SharedPredicates.window_bounds` and
/// `.narrower_than`.
#[pyclass(frozen, name = "WindowTable", module = "juggler_native")]
struct PyWindowTable {
    core: WindowTable,
    args: Py<PyTuple>,
}

#[pymethods]
impl PyWindowTable {
    #[new]
    fn new(bounds: Vec<i64>, narrower_than: Vec<Bound<'_, PyAny>>, py: Python<'_>) -> PyResult<Self> {
        if narrower_than.len() != bounds.len() + 1 {
            return Err(PyTypeError::new_err("n bounds have n + 1 masks"));
        }
        let core = WindowTable {
            bounds: bounds.iter().map(|&b| b as i128).collect(),
            narrower_than: narrower_than.iter().map(to_mask).collect::<PyResult<_>>()?,
        };
        Ok(PyWindowTable { core, args: (bounds, narrower_than).into_pyobject(py)?.unbind() })
    }

    /// Queries whose MAXWINDOW is smaller than `span`.
    fn too_narrow<'py>(&self, span: i128, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        mask_to_int(py, self.core.too_narrow(span))
    }

    fn __reduce__<'py>(slf: &Bound<'py, Self>) -> (Bound<'py, PyAny>, Bound<'py, PyTuple>) {
        (slf.get_type().into_any(), slf.get().args.bind(slf.py()).clone())
    }
}

// ------------------------------------------------------------------ the filter

/// Where a check reads a value: `Held.value(column)`.
enum Column {
    Ts,
    Data(Py<PyString>),
}

impl Column {
    fn new(name: &Bound<'_, PyString>) -> PyResult<Self> {
        Ok(if name.to_str()? == "ts" { Column::Ts } else { Column::Data(name.clone().unbind()) })
    }

    fn read<'py>(&self, held: &Bound<'py, PyAny>) -> PyResult<Bound<'py, PyAny>> {
        let py = held.py();
        match self {
            Column::Ts => held.getattr(intern!(py, "ts")),
            Column::Data(name) => held.getattr(intern!(py, "data"))?.get_item(name.bind(py)),
        }
    }
}

/// One pair list to evaluate when the partner is bound (`plan.Check`), with the
/// list's native core when it has one.
struct Check {
    plist: Py<PyAny>,
    native: Option<Py<PyPairRange>>,
    users: Vec<u64>,
    partner_is_left: bool,
    other: usize,
    partner_column: Column,
    other_column: Column,
}

/// `native.candidate_filter`'s form of a check: (plist, native core or None, users,
/// partner_is_left, other, partner_column, other_column).
type CheckSpec<'py> = (
    Bound<'py, PyAny>,
    Option<Py<PyPairRange>>,
    Bound<'py, PyAny>,
    bool,
    usize,
    Bound<'py, PyString>,
    Bound<'py, PyString>,
);

impl Check {
    fn new(item: &Bound<'_, PyAny>) -> PyResult<Self> {
        let (plist, native, users, partner_is_left, other, partner_column, other_column): CheckSpec<'_> =
            item.extract()?;
        Ok(Check {
            plist: plist.unbind(),
            native,
            users: to_mask(&users)?,
            partner_is_left,
            other,
            partner_column: Column::new(&partner_column)?,
            other_column: Column::new(&other_column)?,
        })
    }
}

/// A value of the partial combination, read once per batch.
struct Operand<'py> {
    object: Bound<'py, PyAny>,
    value: Option<Value>,
}

/// What one call of `survivors` shares between its candidates.
struct Batch<'a, 'py> {
    partial: &'a Bound<'py, PyList>,
    theirs: Vec<Option<Operand<'py>>>, // by check: joins, then windows
    scratch: Vec<u64>,
    counts: [u64; 3], // comparisons A, J, W
}

/// `CandidateFilter(joins, windows, table)`: the filter phases of one `GroupPlan`.
/// A check is `(plist, native core or None, users, partner_is_left, other,
/// partner_column, other_column)`.
#[pyclass(frozen, name = "CandidateFilter", module = "juggler_native")]
struct CandidateFilter {
    joins: Vec<Check>,
    windows: Vec<Check>,
    table: Py<PyWindowTable>,
    args: Py<PyTuple>,
}

#[pymethods]
impl CandidateFilter {
    #[new]
    fn new(
        joins: Vec<Bound<'_, PyAny>>,
        windows: Vec<Bound<'_, PyAny>>,
        table: Py<PyWindowTable>,
        py: Python<'_>,
    ) -> PyResult<Self> {
        Ok(CandidateFilter {
            joins: joins.iter().map(Check::new).collect::<PyResult<_>>()?,
            windows: windows.iter().map(Check::new).collect::<PyResult<_>>()?,
            args: (joins, windows, table.clone_ref(py)).into_pyobject(py)?.unbind(),
            table,
        })
    }

    /// Run the filter phases, in `order` (the manager's order, or one phase of it),
    /// on each candidate partner with `lo <= ts <= hi` (either bound may be None) for
    /// the queries `group`: A removes the queries whose attribute predicates the
    /// partner (and, with `pending`, the tuple `partial[0]`) fails, J probes every
    /// join list some survivor uses, W applies MAXWINDOW and every window list. A
    /// candidate stops at the first phase that leaves no query. Candidates with
    /// `seq >= before_seq` are skipped (history). Returns `([(partner, survivors)],
    /// A, J, W)`: the candidates some query survives, in order, and the comparisons
    /// made per type. `attr_fail(held)` is the operator's (cached) attribute mask,
    /// called only when a held event's cached mask is stale (`attr_version !=
    /// version`) and for `partial[0]` (once).
    #[pyo3(signature = (candidates, lo, hi, group, order, partial, pending, before_seq, mints, maxts, version, attr_fail))]
    #[allow(clippy::too_many_arguments)]
    fn survivors<'py>(
        &self,
        candidates: &Bound<'py, PyList>,
        lo: Option<i128>,
        hi: Option<i128>,
        group: &Bound<'py, PyAny>,
        order: &str,
        partial: &Bound<'py, PyList>,
        pending: bool,
        before_seq: Option<i64>,
        mints: i64,
        maxts: i64,
        version: i64,
        attr_fail: &Bound<'py, PyAny>,
    ) -> PyResult<(Bound<'py, PyList>, u64, u64, u64)> {
        let py = candidates.py();
        let group = to_mask(group)?;
        let mut batch = Batch {
            partial,
            theirs: (0..self.joins.len() + self.windows.len()).map(|_| None).collect(),
            scratch: Vec::new(),
            counts: [0; 3],
        };
        let mut root_fail: Option<Vec<u64>> = None;
        let table = &self.table.get().core;
        let out = PyList::empty(py);
        let mut survivors = group.clone();
        let (lo, hi) = (lo.unwrap_or(i128::MIN), hi.unwrap_or(i128::MAX));
        for partner in candidates.iter() {
            let ts = long(&partner.getattr(intern!(py, "ts"))?, "an event time")?;
            if (ts as i128) < lo || (ts as i128) > hi {
                continue;
            }
            if let Some(before) = before_seq {
                if long(&partner.getattr(intern!(py, "seq"))?, "seq")? >= before {
                    continue;
                }
            }
            survivors.copy_from_slice(&group);
            for phase in order.bytes() {
                match phase {
                    b'A' => {
                        batch.counts[0] += 1;
                        let fail = if long(&partner.getattr(intern!(py, "attr_version"))?, "attr_version")?
                            == version
                        {
                            partner.getattr(intern!(py, "attr_fail"))?
                        } else {
                            attr_fail.call1((&partner,))?
                        };
                        read_mask(&fail, &mut batch.scratch)?;
                        mask::and_not(&mut survivors, &batch.scratch);
                        if pending && !mask::is_empty(&survivors) {
                            batch.counts[0] += 1;
                            if root_fail.is_none() {
                                root_fail = Some(to_mask(&attr_fail.call1((partial.get_item(0)?,))?)?);
                            }
                            mask::and_not(&mut survivors, root_fail.as_deref().unwrap_or_default());
                        }
                    }
                    b'J' => {
                        batch.counts[1] +=
                            self.filter(&self.joins, 0, &mut batch, &partner, &mut survivors)?;
                    }
                    b'W' => {
                        batch.counts[2] += 1;
                        mask::and_not(&mut survivors, table.too_narrow(span(mints, maxts, ts)));
                        if !mask::is_empty(&survivors) && !self.windows.is_empty() {
                            let offset = self.joins.len();
                            batch.counts[2] +=
                                self.filter(&self.windows, offset, &mut batch, &partner, &mut survivors)?;
                        }
                    }
                    _ => return Err(PyTypeError::new_err(format!("unknown phase in order {order:?}"))),
                }
                if mask::is_empty(&survivors) {
                    break;
                }
            }
            if !mask::is_empty(&survivors) {
                out.append((&partner, mask_to_int(py, &survivors)?))?;
            }
        }
        let [a, j, w] = batch.counts;
        Ok((out, a, j, w))
    }

    fn __reduce__<'py>(slf: &Bound<'py, Self>) -> (Bound<'py, PyAny>, Bound<'py, PyTuple>) {
        (slf.get_type().into_any(), slf.get().args.bind(slf.py()).clone())
    }
}

impl CandidateFilter {
    /// `survivors &= ~failing` for each check some survivor uses, until none is left;
    /// returns the lists probed. `offset` is where these checks' operands start in
    /// `batch.theirs`.
    fn filter<'py>(
        &self,
        checks: &[Check],
        offset: usize,
        batch: &mut Batch<'_, 'py>,
        partner: &Bound<'py, PyAny>,
        survivors: &mut [u64],
    ) -> PyResult<u64> {
        let py = partner.py();
        let mut probes = 0;
        for (i, check) in checks.iter().enumerate() {
            if !mask::intersects(&check.users, survivors) {
                continue;
            }
            probes += 1;
            let mine = check.partner_column.read(partner)?;
            let theirs = match &mut batch.theirs[offset + i] {
                Some(operand) => operand,
                slot => {
                    let object = check.other_column.read(&batch.partial.get_item(check.other)?)?;
                    slot.insert(Operand { value: classify(&object), object })
                }
            };
            let native = match (&check.native, classify(&mine), theirs.value) {
                (Some(list), Some(m), Some(t)) => {
                    let (x, y) = if check.partner_is_left { (m, t) } else { (t, m) };
                    list.get().core.failing(x, y)
                }
                _ => None,
            };
            match native {
                Some(fail) => mask::and_not(survivors, fail),
                None => {
                    let (x, y) =
                        if check.partner_is_left { (&mine, &theirs.object) } else { (&theirs.object, &mine) };
                    let fail = check.plist.bind(py).call_method1(intern!(py, "failing"), (x, y))?;
                    read_mask(&fail, &mut batch.scratch)?;
                    mask::and_not(survivors, &batch.scratch);
                }
            }
            if mask::is_empty(survivors) {
                break;
            }
        }
        Ok(probes)
    }
}

#[pymodule]
fn juggler_native(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<crate::py_operator::PyOperator>()?;
    m.add_class::<PyPairRange>()?;
    m.add_class::<PyWindowTable>()?;
    m.add_class::<CandidateFilter>()?;
    Ok(())
}
