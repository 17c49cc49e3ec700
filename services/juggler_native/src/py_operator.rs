//! `juggler_native.Operator`: the native operator bound to Python.
//!
//! One call per event (or per batch) crosses the boundary: the binding reads the
//! `Event`'s attributes, turns its data into slot values, runs the core and builds
//! `Result` objects directly, so no Python code runs per candidate or per held event.
//! For the worker, `process_batch_encoded` writes each result's Avro body instead
//! (`result_body`), with no Python object per result but its bytes, and the events it takes
//! are mostly `DecodedEvent`s (`py_decode`), whose values are copied into slots as
//! they are, with no Python object per column.
//! Python's `juggler.engine.native_engine` compiles queries into the predicate specs
//! `register` takes (`py_spec`) and answers the exact fallback (`exact(pred, left, right)`).

use std::collections::HashMap;
use std::sync::Arc;

use rustc_hash::FxHashMap;

use pyo3::exceptions::{PyTypeError, PyValueError};
use pyo3::intern;
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyDict, PyInt, PyList, PyString, PyTuple};

use crate::avro;
use crate::lists::Exact;
use crate::operator::{Hit, Incoming, Operator, QuerySpec};
use crate::ordering::{self, TypeManager};
use crate::py_convert::{exact_str, from_py, position_prefix, to_py, untrack};
use crate::py_decode::{DecodedEvent, EventDecoder, Stream};
use crate::py_spec::pred;
use crate::result_body::{self, Names};
use crate::store::Pos;
use crate::value::V;

/// A stream's names: its column slots (0 is `ts`), the data shapes seen (slots in
/// data order) and the `S.col` labels of each shape for `SELECT *`.
struct StreamNames {
    name: Py<PyString>,
    /// The name as an Avro string, the key of the stream's entry in a result's sources.
    name_avro: Vec<u8>,
    slots: FxHashMap<String, usize>,
    columns: Vec<Py<PyString>>,
    shapes: Vec<Vec<usize>>,
    shape_of: FxHashMap<Vec<usize>, u32>,
    labels: Vec<Vec<Py<PyString>>>,
    /// `labels` as Avro strings, for the rows of `SELECT *` results.
    labels_avro: Vec<Vec<Vec<u8>>>,
    /// The last event's column names (the objects, held so they cannot be freed and
    /// their addresses reused), slots and shape: events of a stream mostly share the
    /// same key objects, so a pointer comparison replaces a hash lookup per column.
    last: Vec<(Py<PyString>, usize)>,
    last_shape: u32,
}

struct QueryInfo {
    id: Py<PyString>,
    from: Vec<u32>,
    select: Option<Vec<(Py<PyString>, u32, usize)>>,
    /// What the native writer writes the query's results with, or None if it cannot
    /// write them as `juggler.codec.result_body` would (see `query_body`).
    body: Option<result_body::Query>,
}

impl QueryInfo {
    fn clone_ref(&self, py: Python<'_>) -> QueryInfo {
        let select = self.select.as_ref().map(|items| items.iter().map(|(label, s, slot)| (label.clone_ref(py), *s, *slot)).collect());
        QueryInfo { id: self.id.clone_ref(py), from: self.from.clone(), select, body: self.body.clone() }
    }
}

/// A query as its results' bodies name it; None when a result's record would not be
/// what the native writer writes: an id or label that is not exactly a `str` in UTF-8
/// (`result_body` leaves those to fastavro), or names a Python dict would merge (a
/// stream twice in FROM, a label twice in SELECT, or a stream name with a dot, whose
/// `SELECT *` labels could repeat another stream's): the dicts of `Result` keep one
/// entry for them.
fn query_body(py: Python<'_>, id: &Py<PyString>, streams: &[&str], select: Option<&[(Py<PyString>, u32, usize)]>)
              -> Option<result_body::Query> {
    let select = match select {
        None if streams.iter().any(|name| name.contains('.')) => return None,
        None => None,
        Some(items) => Some(
            items.iter().map(|(label, s, slot)| Some((exact_str(label.bind(py))?, *s, *slot))).collect::<Option<Vec<_>>>()?,
        ),
    };
    let labels = select.iter().flatten().map(|(label, _, _)| label.as_slice());
    if !distinct(streams.iter().map(|name| name.as_bytes())) || !distinct(labels) {
        return None;
    }
    Some(result_body::Query { id: exact_str(id.bind(py))?, select })
}

fn distinct<'a>(names: impl Iterator<Item = &'a [u8]>) -> bool {
    let mut seen = std::collections::HashSet::new();
    names.into_iter().all(|name| seen.insert(name))
}

/// A predicate list for Python: family, left column, right column, factor, size.
type ListRow = (&'static str, String, Option<String>, Option<f64>, usize);

/// Sendable: the worker's HTTP thread reads its counters for /metrics, under the
/// worker's round lock, never during a batch. `process_batch_encoded` evaluates
/// without the GIL; a call from another thread meanwhile would fail PyO3's borrow
/// check (a RuntimeError), never see the operator half-changed.
#[pyclass(name = "Operator", module = "juggler_native")]
pub struct PyOperator {
    core: Operator,
    streams: Vec<StreamNames>,
    stream_of: FxHashMap<String, u32>,
    /// The last event's stream name object and id (see `StreamNames::last`).
    last_stream: Option<(Py<PyString>, u32)>,
    queries: FxHashMap<usize, QueryInfo>,
    result_cls: Py<PyAny>,
    exact: Py<PyAny>,
    prefixes: Py<PyDict>,
    prefix_list: Vec<Py<PyAny>>,
    /// Per `prefix_list` entry, its topic and partition as a `Position` begins in Avro;
    /// None if `result_body` would not write them (see `position_prefix`).
    prefix_avro: Vec<Option<Vec<u8>>>,
    others: Vec<Py<PyAny>>,
    /// Per decoder stream (by its address, held so it cannot be reused): its stream
    /// id, the slots of its columns and their shape, worked out at its first event.
    decoded: FxHashMap<usize, (Arc<Stream>, u32, Vec<usize>, u32)>,
    /// The `prefix_list` tag of a decoded event's (topic, partition), by topic: its
    /// events carry no tuple to look up in `prefixes`.
    decoded_prefixes: FxHashMap<String, Vec<(i64, u32)>>,
}

/// The exact fallback, answered by the Python callable; the first error is kept and
/// raised once the core returns. It takes the GIL for each question (at once when the
/// thread holds it), so the core may evaluate without it (`process_batch_encoded`).
struct PyExact<'a> {
    f: &'a Py<PyAny>,
    error: Option<PyErr>,
}

impl PyExact<'_> {
    fn ask(&mut self, pred: u32, l: &V, r: Option<&V>) -> bool {
        if self.error.is_some() {
            return false;
        }
        let call = |py: Python<'_>| -> PyResult<bool> {
            let l = to_py(py, l)?;
            let r = match r {
                Some(r) => to_py(py, r)?,
                None => py.None().into_bound(py),
            };
            self.f.bind(py).call1((pred, l, r))?.is_truthy()
        };
        Python::attach(call).unwrap_or_else(|e| {
            self.error = Some(e);
            false
        })
    }
}

impl Exact for PyExact<'_> {
    fn attr(&mut self, pred: u32, v: &V) -> bool {
        self.ask(pred, v, None)
    }
    fn pair(&mut self, pred: u32, l: &V, r: &V) -> bool {
        self.ask(pred, l, Some(r))
    }
}

impl PyOperator {
    fn stream_id(&mut self, py: Python<'_>, name: &str) -> u32 {
        if let Some(&id) = self.stream_of.get(name) {
            return id;
        }
        let id = self.streams.len() as u32;
        self.stream_of.insert(name.to_owned(), id);
        let mut slots = FxHashMap::default();
        slots.insert("ts".to_owned(), 0);
        self.streams.push(StreamNames {
            name: PyString::new(py, name).unbind(),
            name_avro: avro::encoded(name),
            slots,
            columns: vec![PyString::new(py, "ts").unbind()],
            shapes: Vec::new(),
            shape_of: FxHashMap::default(),
            labels: Vec::new(),
            labels_avro: Vec::new(),
            last: Vec::new(),
            last_shape: u32::MAX,
        });
        self.core.widen(id, 1);
        id
    }

    fn slot_of(&mut self, py: Python<'_>, stream: u32, column: &str) -> usize {
        let names = &mut self.streams[stream as usize];
        if let Some(&slot) = names.slots.get(column) {
            return slot;
        }
        let slot = names.columns.len();
        names.slots.insert(column.to_owned(), slot);
        names.columns.push(PyString::new(py, column).unbind());
        self.core.widen(stream, slot + 1);
        slot
    }

    /// Whether `other` numbers every stream and column this operator has named the
    /// same (it may have named more): then this operator can take its numbers for
    /// them.
    fn names_agree(&self, py: Python<'_>, other: &PyOperator) -> bool {
        self.streams.len() <= other.streams.len()
            && self.streams.iter().zip(&other.streams).all(|(mine, theirs)| {
                let same = |a: &Py<PyString>, b: &Py<PyString>| a.bind(py).as_any().eq(b.bind(py)).unwrap_or(false);
                same(&mine.name, &theirs.name)
                    && mine.columns.len() <= theirs.columns.len()
                    && mine.columns.iter().zip(&theirs.columns).all(|(a, b)| same(a, b))
            })
    }

    fn encode_pos(&mut self, py: Python<'_>, pos: &Bound<'_, PyAny>) -> PyResult<Pos> {
        if pos.is_exact_instance_of::<PyInt>() {
            if let Ok(i) = pos.extract::<i64>() {
                return Ok((0, i));
            }
        }
        if let Ok(t) = pos.cast_exact::<PyTuple>() {
            if t.len() == 3 {
                let last = t.get_item(2)?;
                if last.is_exact_instance_of::<PyInt>() {
                    if let Ok(off) = last.extract::<i64>() {
                        return Ok((self.prefix_tag(py, &t.get_slice(0, 2))?, off));
                    }
                }
            }
        }
        self.others.push(pos.clone().unbind());
        Ok((u32::MAX, self.others.len() as i64 - 1))
    }

    /// The `prefix_list` tag of a position's (topic, partition), numbered from 1.
    fn prefix_tag(&mut self, py: Python<'_>, prefix: &Bound<'_, PyTuple>) -> PyResult<u32> {
        let prefixes = self.prefixes.bind(py);
        if let Some(tag) = prefixes.get_item(prefix)? {
            return tag.extract::<u32>();
        }
        self.prefix_avro.push(position_prefix(prefix));
        self.prefix_list.push(prefix.clone().into_any().unbind());
        let tag = self.prefix_list.len() as u32;
        prefixes.set_item(prefix, tag)?;
        Ok(tag)
    }

    /// A decoded event's position, encoded as `encode_pos` encodes the same
    /// (topic, partition, offset) tuple.
    fn decoded_pos(&mut self, py: Python<'_>, event: &DecodedEvent) -> PyResult<Pos> {
        let topic = event.topic.bind(py);
        let known = self.decoded_prefixes.get(topic.to_str()?).and_then(|tags| tags.iter().find(|(p, _)| *p == event.partition));
        if let Some(&(_, tag)) = known {
            return Ok((tag, event.offset));
        }
        let tag = self.prefix_tag(py, &(topic, event.partition).into_pyobject(py)?)?;
        self.decoded_prefixes.entry(topic.to_str()?.to_owned()).or_default().push((event.partition, tag));
        Ok((tag, event.offset))
    }

    fn decode_pos<'py>(&self, py: Python<'py>, pos: Pos) -> PyResult<Bound<'py, PyAny>> {
        Ok(match pos.0 {
            0 => pos.1.into_pyobject(py)?.into_any(),
            u32::MAX => self.others[pos.1 as usize].bind(py).clone(),
            tag => {
                let prefix = self.prefix_list[tag as usize - 1].bind(py).cast::<PyTuple>()?.clone();
                // (topic, partition, offset): untracked, it leaves the dict it goes in untracked too
                let tuple = PyTuple::new(py, [prefix.get_item(0)?, prefix.get_item(1)?, pos.1.into_pyobject(py)?.into_any()])?
                    .into_any();
                untrack(&tuple);
                tuple
            }
        })
    }

    /// The event's stream id, from its name object (the last one's, if it is the same).
    fn event_stream(&mut self, py: Python<'_>, event: &Bound<'_, PyAny>) -> PyResult<u32> {
        let name = event.getattr(intern!(py, "stream"))?;
        let name = name.cast::<PyString>()?;
        if let Some((last, id)) = &self.last_stream {
            if last.as_ptr() == name.as_ptr() {
                return Ok(*id);
            }
        }
        let id = self.stream_id(py, name.to_str()?);
        self.last_stream = Some((name.clone().unbind(), id));
        Ok(id)
    }

    /// The slot of the `j`th column `column` of an event of `stream`, and whether it is
    /// the same object as the last event's `j`th column.
    fn column_slot(&mut self, py: Python<'_>, stream: u32, j: usize, column: &Bound<'_, PyString>) -> PyResult<(usize, bool)> {
        let names = &self.streams[stream as usize];
        if let Some((last, slot)) = names.last.get(j) {
            if last.as_ptr() == column.as_ptr() {
                return Ok((*slot, true));
            }
        }
        let slot = match names.slots.get(column.to_str()?) {
            Some(0) => return Err(PyValueError::new_err("column 'ts' is reserved for the event time")),
            Some(&slot) => slot,
            None => self.slot_of(py, stream, column.to_str()?),
        };
        Ok((slot, false))
    }

    /// The event's stream, key, ts, slot values, shape and position.
    fn incoming<'a>(&mut self, py: Python<'_>, event: &Bound<'_, PyAny>, key: &'a str) -> PyResult<Incoming<'a>> {
        if let Ok(decoded) = event.cast::<DecodedEvent>() {
            return self.incoming_decoded(py, decoded.get(), key);
        }
        let stream = self.event_stream(py, event)?;
        let ts: i64 = event
            .getattr(intern!(py, "ts"))?
            .extract()
            .map_err(|_| PyTypeError::new_err("an event's ts must be an int within 64 bits"))?;
        let data = event.getattr(intern!(py, "data"))?;
        let data = data.cast::<PyDict>()?;
        let mut row = vec![V::Missing; self.core.widths[stream as usize]];
        row[0] = V::I(ts);
        // the first event of a stream has no last shape to share, even without columns
        let names = &self.streams[stream as usize];
        let mut same = names.last_shape != u32::MAX && data.len() == names.last.len();
        let mut shape = Vec::new();
        for (j, (k, v)) in data.iter().enumerate() {
            let column = k.cast::<PyString>()?;
            let (slot, hit) = self.column_slot(py, stream, j, column)?;
            if !hit && same {
                same = false;
                shape.extend(self.streams[stream as usize].last[..j].iter().map(|(_, s)| *s));
            }
            if !same {
                shape.push(slot);
            }
            if slot >= row.len() {
                row.resize(slot + 1, V::Missing);
            }
            row[slot] = from_py(&v)?;
        }
        row.resize(self.core.widths[stream as usize], V::Missing);
        let shape_id = if same {
            self.streams[stream as usize].last_shape
        } else {
            let id = self.shape_id(py, stream, &shape)?;
            let names = &mut self.streams[stream as usize];
            names.last = data.keys().iter().zip(&shape).map(|(k, &s)| Ok((k.cast_into::<PyString>()?.unbind(), s))).collect::<PyResult<_>>()?;
            names.last_shape = id;
            id
        };
        let pos = self.encode_pos(py, &event.getattr(intern!(py, "position"))?)?;
        Ok(Incoming { stream, key, ts, shape: shape_id, row, pos })
    }

    /// The id of a data shape (its columns' slots in data order) of `stream`, numbered
    /// at its first event.
    fn shape_id(&mut self, py: Python<'_>, stream: u32, shape: &[usize]) -> PyResult<u32> {
        let names = &mut self.streams[stream as usize];
        if let Some(&id) = names.shape_of.get(shape) {
            return Ok(id);
        }
        let id = names.shapes.len() as u32;
        let prefix = names.name.bind(py).to_str()?.to_owned();
        let labels: Vec<String> = shape.iter().map(|&s| format!("{prefix}.{}", names.columns[s].bind(py))).collect();
        names.labels_avro.push(labels.iter().map(|label| avro::encoded(label)).collect());
        names.labels.push(labels.iter().map(|label| PyString::new(py, label).unbind()).collect());
        names.shapes.push(shape.to_vec());
        names.shape_of.insert(shape.to_vec(), id);
        Ok(id)
    }

    /// `incoming` for a `DecodedEvent`: its values go to their slots as they are,
    /// with the shape its data dict would have (columns in schema order).
    fn incoming_decoded<'a>(&mut self, py: Python<'_>, event: &DecodedEvent, key: &'a str) -> PyResult<Incoming<'a>> {
        let address = Arc::as_ptr(&event.stream) as usize;
        if !self.decoded.contains_key(&address) {
            let id = self.stream_id(py, event.stream.name.bind(py).to_str()?);
            let mut slots = Vec::with_capacity(event.stream.columns.len());
            for column in &event.stream.columns {
                slots.push(self.slot_of(py, id, column.bind(py).to_str()?));
            }
            let shape = self.shape_id(py, id, &slots)?;
            self.decoded.insert(address, (event.stream.clone(), id, slots, shape));
        }
        let pos = self.decoded_pos(py, event)?;
        let (_, stream, slots, shape) = &self.decoded[&address];
        let mut row = vec![V::Missing; self.core.widths[*stream as usize]];
        row[0] = V::I(event.ts);
        for (&slot, value) in slots.iter().zip(&event.values) {
            row[slot] = value.clone();
        }
        Ok(Incoming { stream: *stream, key, ts: event.ts, shape: *shape, row, pos })
    }

    /// Results in the contract's order (see `in_order`).
    fn results<'py>(&self, py: Python<'py>, mut hits: Vec<(Box<str>, Hit)>) -> PyResult<Bound<'py, PyList>> {
        if hits.len() > 1 {
            hits.sort_by(|(_, a), (_, b)| in_order(a).cmp(&in_order(b)));
        }
        let out = PyList::empty(py);
        for (key, hit) in &hits {
            out.append(self.result(py, key, hit)?)?;
        }
        Ok(out)
    }

    fn result<'py>(&self, py: Python<'py>, key: &str, hit: &Hit) -> PyResult<Bound<'py, PyAny>> {
        let q = &self.queries[&hit.bit];
        let ks = &self.core.keys[key];
        let sources = PyDict::new(py);
        for &s in &q.from {
            let (store, i) = ks.event_of(hit, s);
            sources.set_item(self.streams[s as usize].name.bind(py), self.decode_pos(py, store.pos(i))?)?;
        }
        let row = PyDict::new(py);
        match &q.select {
            None => {
                for &s in &q.from {
                    let (store, i) = ks.event_of(hit, s);
                    let names = &self.streams[s as usize];
                    let shape = store.shape(i) as usize;
                    for (label, &slot) in names.labels[shape].iter().zip(&names.shapes[shape]) {
                        row.set_item(label.bind(py), to_py(py, store.value(i, slot))?)?;
                    }
                }
            }
            Some(select) => {
                for (label, s, slot) in select {
                    let (store, i) = ks.event_of(hit, *s);
                    row.set_item(label.bind(py), to_py(py, store.value(i, *slot))?)?;
                }
            }
        }
        let result = self.result_cls.bind(py).call1((q.id.bind(py), key, hit.ts, sources, row))?;
        untrack(&result);
        Ok(result)
    }

    /// The results of one event as `process_batch_encoded` gives them, in the
    /// contract's order.
    fn encoded_results<'py>(&self, py: Python<'py>, key: &str, mut hits: Vec<Hit>, budget: i64, body: &mut Vec<u8>) -> PyResult<Bound<'py, PyList>> {
        if hits.len() > 1 {
            hits.sort_by(|a, b| in_order(a).cmp(&in_order(b)));
        }
        let out = PyList::empty(py);
        for hit in &hits {
            let q = &self.queries[&hit.bit];
            body.clear();
            if self.write_body(q, key, hit, body) && (body.len() + key.len()) as i64 <= budget {
                let item = PyTuple::new(py, [q.id.bind(py).as_any(), PyBytes::new(py, body).as_any()])?;
                untrack(&item);
                out.append(item)?;
            } else {
                out.append(self.result(py, key, hit)?)?;
            }
        }
        Ok(out)
    }

    /// `result_body::write` for a result of the query with `hit.bit`; false for a
    /// query `query_body` refuses.
    fn write_body(&self, q: &QueryInfo, key: &str, hit: &Hit, out: &mut Vec<u8>) -> bool {
        let Some(body) = &q.body else { return false };
        result_body::write(out, self, body, &q.from, &self.core.keys[key], key, hit)
    }

    /// Evaluate one event: its key object and the core's outcome (the results it
    /// completes, or the key's maxts when it is late).
    fn evaluate<'py>(&mut self, py: Python<'py>, event: &Bound<'py, PyAny>, exact: &Py<PyAny>) -> PyResult<(Bound<'py, PyString>, Outcome)> {
        let key_ob = event_key(py, event)?;
        let key = key_ob.to_str()?;
        let incoming = self.incoming(py, event, key)?;
        let mut ex = PyExact { f: exact, error: None };
        let outcome = self.core.process(incoming, &mut ex);
        if let Some(e) = ex.error {
            return Err(e);
        }
        Ok((key_ob, outcome.map_err(|late| late.maxts)))
    }

    /// The event's results (None when there are none), or the key's maxts when late.
    fn process_one<'py>(&mut self, py: Python<'py>, event: &Bound<'py, PyAny>, exact: &Py<PyAny>) -> PyResult<Option<Bound<'py, PyAny>>> {
        let (key, outcome) = self.evaluate(py, event, exact)?;
        match outcome {
            Ok(hits) if hits.is_empty() => Ok(None),
            Ok(hits) => {
                let key: Box<str> = key.to_str()?.into();
                Ok(Some(self.results(py, hits.into_iter().map(|h| (key.clone(), h)).collect())?.into_any()))
            }
            Err(maxts) => Ok(Some(maxts.into_pyobject(py)?.into_any())),
        }
    }
}

/// An event's key object.
fn event_key<'py>(py: Python<'py>, event: &Bound<'py, PyAny>) -> PyResult<Bound<'py, PyString>> {
    Ok(match event.cast::<DecodedEvent>() {
        Ok(decoded) => decoded.get().key.bind(py).clone(),
        Err(_) => event.getattr(intern!(py, "key"))?.cast_into::<PyString>()?,
    })
}

/// An event's answer from `PyOperator::evaluate_encoded`.
enum Done {
    Nothing,
    Late(i64),
    /// Per result in the contract's order, its query's bit and its body's bytes in
    /// the batch's buffer.
    Bodies(Vec<(usize, std::ops::Range<usize>)>),
    /// The list `encoded_results` built with the GIL.
    Python(Py<PyAny>),
}

/// Why `PyOperator::evaluate_encoded` stopped before the batch's end.
enum Stop<'a> {
    Failed(PyErr),
    /// The event just evaluated has a result the native writer leaves to Python: its
    /// key and results, for `encoded_results`.
    ToPython(&'a str, Vec<Hit>),
}

impl PyOperator {
    /// Evaluate events and write their results' bodies into `bodies`, without Python
    /// (but for the exact fallback, which takes the GIL): an answer per event into
    /// `done`, until the events run out (None) or one needs Python.
    fn evaluate_encoded<'a>(&mut self, pending: &mut impl Iterator<Item = Incoming<'a>>, budget: i64, done: &mut Vec<Done>,
                            bodies: &mut Vec<u8>) -> Option<Stop<'a>> {
        for one in pending {
            let key = one.key;
            let mut ex = PyExact { f: &self.exact, error: None };
            let outcome = self.core.process(one, &mut ex);
            if let Some(e) = ex.error {
                return Some(Stop::Failed(e));
            }
            let mut hits = match outcome {
                Ok(hits) if hits.is_empty() => {
                    done.push(Done::Nothing);
                    continue;
                }
                Ok(hits) => hits,
                Err(late) => {
                    done.push(Done::Late(late.maxts));
                    continue;
                }
            };
            if hits.len() > 1 {
                hits.sort_by(|a, b| in_order(a).cmp(&in_order(b)));
            }
            let mark = bodies.len();
            let mut items = Vec::with_capacity(hits.len());
            for hit in &hits {
                let start = bodies.len();
                if !self.write_body(&self.queries[&hit.bit], key, hit, bodies) || (bodies.len() - start + key.len()) as i64 > budget {
                    bodies.truncate(mark);
                    return Some(Stop::ToPython(key, hits));
                }
                items.push((hit.bit, start..bodies.len()));
            }
            done.push(Done::Bodies(items));
        }
        None
    }
}

impl Names for PyOperator {
    fn stream(&self, s: u32) -> &[u8] {
        &self.streams[s as usize].name_avro
    }

    fn shape(&self, s: u32, shape: u32) -> (&[usize], &[Vec<u8>]) {
        let names = &self.streams[s as usize];
        (&names.shapes[shape as usize], &names.labels_avro[shape as usize])
    }

    fn prefix(&self, tag: u32) -> Option<&[u8]> {
        // tag 0 (a bare int) and u32::MAX (any other object) have no prefix
        self.prefix_avro.get(tag.checked_sub(1)? as usize)?.as_deref()
    }
}

/// The core's answer to an event: the results it completes, or the key's maxts when
/// the event is late.
type Outcome = Result<Vec<Hit>, i64>;

/// The contract's order of results: by registration, then by the arrival of their
/// events in FROM order (which is the order of their positions).
fn in_order(hit: &Hit) -> (u64, &[u64]) {
    (hit.order, &hit.seqs)
}

/// A query's `select` as Python gives it: (label, stream, column) triples.
type Selected = Vec<(Py<PyString>, String, String)>;
/// `PyOperator::register`'s arguments.
type Compiled<'py> = (Py<PyString>, Vec<String>, i64, Vec<Bound<'py, PyAny>>, Option<Selected>);

#[pymethods]
impl PyOperator {
    /// `order`: "adaptive" or a static order such as "AJW"; `period`: events between
    /// an adaptive order's re-measures.
    #[new]
    #[allow(clippy::too_many_arguments)]
    fn new(py: Python<'_>, retention: i64, lateness: i64, result_cls: Py<PyAny>, exact: Py<PyAny>, order: &str,
           period: u64) -> PyResult<Self> {
        let mut core = Operator::new(retention, lateness);
        core.types = TypeManager::new(ordering::parse(order).map_err(PyValueError::new_err)?, period);
        Ok(PyOperator {
            core,
            streams: Vec::new(),
            stream_of: FxHashMap::default(),
            last_stream: None,
            queries: FxHashMap::default(),
            result_cls,
            exact,
            prefixes: PyDict::new(py).unbind(),
            prefix_list: Vec::new(),
            prefix_avro: Vec::new(),
            others: Vec::new(),
            decoded: FxHashMap::default(),
            decoded_prefixes: FxHashMap::default(),
        })
    }

    /// The id of a stream and the slot of one of its columns, for compiling predicates.
    fn slot(&mut self, py: Python<'_>, stream: &str, column: &str) -> (u32, usize) {
        let id = self.stream_id(py, stream);
        (id, self.slot_of(py, id, column))
    }

    /// Add a compiled query; returns its bit. `select` is None for `SELECT *`, else
    /// (label, stream, column) triples.
    fn register(&mut self, py: Python<'_>, query_id: Py<PyString>, streams: Vec<String>, window: i64,
                preds: Vec<Bound<'_, PyAny>>, select: Option<Selected>) -> PyResult<usize> {
        Ok(self.register_many(py, vec![(query_id, streams, window, preds, select)])?[0])
    }

    /// `register` for many queries at once, each a tuple of its arguments; their bits
    /// in order. The operator builds its lists once for all of them (a restore, a
    /// burst of commands) instead of once per query.
    fn register_many(&mut self, py: Python<'_>, queries: Vec<Compiled<'_>>) -> PyResult<Vec<usize>> {
        let mut specs = Vec::with_capacity(queries.len());
        let mut infos = Vec::with_capacity(queries.len());
        for (query_id, streams, window, preds, select) in queries {
            let from: Vec<u32> = streams.iter().map(|s| self.stream_id(py, s)).collect();
            let preds = preds.iter().map(pred).collect::<PyResult<Vec<_>>>()?;
            let select: Option<Vec<_>> = select.map(|items| {
                items
                    .into_iter()
                    .map(|(label, s, c)| {
                        let (sid, slot) = self.slot(py, &s, &c);
                        (label, sid, slot)
                    })
                    .collect()
            });
            let names: Vec<&str> = streams.iter().map(String::as_str).collect();
            let body = query_body(py, &query_id, &names, select.as_deref());
            specs.push(QuerySpec { streams: from.clone(), window, preds });
            infos.push(QueryInfo { id: query_id, from, select, body });
        }
        let bits = self.core.register_many(specs);
        for (&bit, info) in bits.iter().zip(infos) {
            self.queries.insert(bit, info);
        }
        Ok(bits)
    }

    /// Make the registered queries `other`'s, `batch` (their bits) the ones it
    /// registered last: what registering those here would have built, copied instead
    /// of built (`Operator::copy_registry`). Only for an operator whose registered
    /// queries were `other`'s before that batch, registered in the same order (the
    /// caller keeps track: `juggler.engine.native_engine`). Streams and columns take
    /// `other`'s numbers; false, with nothing changed, when this operator numbered a
    /// name otherwise (its events named them in another order).
    fn copy_registry(&mut self, py: Python<'_>, other: PyRef<'_, PyOperator>, batch: Vec<usize>) -> bool {
        if !self.names_agree(py, &other) {
            return false;
        }
        for (s, theirs) in other.streams.iter().enumerate() {
            let id = self.stream_id(py, theirs.name.bind(py).to_str().unwrap_or_default());
            debug_assert_eq!(id as usize, s);
            for column in &theirs.columns[self.streams[s].columns.len()..] {
                self.slot_of(py, id, column.bind(py).to_str().unwrap_or_default());
            }
        }
        self.queries = other.queries.iter().map(|(&bit, info)| (bit, info.clone_ref(py))).collect();
        self.core.copy_registry(&other.core, &batch);
        true
    }

    fn deregister(&mut self, bit: usize) {
        self.core.deregister(bit);
        self.queries.remove(&bit);
    }

    /// The results of query `bit` over the held events.
    fn history<'py>(&mut self, py: Python<'py>, bit: usize) -> PyResult<Bound<'py, PyList>> {
        let exact = self.exact.clone_ref(py);
        let mut ex = PyExact { f: &exact, error: None };
        let hits = self.core.history(bit, &mut ex);
        if let Some(e) = ex.error {
            return Err(e);
        }
        self.results(py, hits)
    }

    /// Accept an event: its results, or the key's maxts (an int) when it is late.
    fn process<'py>(&mut self, py: Python<'py>, event: &Bound<'py, PyAny>) -> PyResult<Bound<'py, PyAny>> {
        let exact = self.exact.clone_ref(py);
        Ok(self.process_one(py, event, &exact)?.unwrap_or_else(|| PyList::empty(py).into_any()))
    }

    /// `process` over a batch, one answer per event: the boundary is crossed once.
    /// An event without results gets the empty tuple, which is not allocated (and so
    /// does not wake the garbage collector) per event.
    fn process_batch<'py>(&mut self, py: Python<'py>, events: Vec<Bound<'py, PyAny>>) -> PyResult<Bound<'py, PyList>> {
        let exact = self.exact.clone_ref(py);
        let none = PyTuple::empty(py).into_any();
        let out = PyList::empty(py);
        for event in &events {
            out.append(self.process_one(py, event, &exact)?.unwrap_or_else(|| none.clone()))?;
        }
        Ok(out)
    }

    /// `process_batch` for the worker, with the results written as Avro in Rust: per
    /// event the empty tuple (no results), the key's maxts (an int) when it is late,
    /// or a list of its results in `process_batch`'s order, each a `(query id, body)`
    /// pair, `body` the Avro body of `juggler.Result` that
    /// `result_body(result_record(r))` gives for the `Result` r, or the `Result`
    /// itself where the native writer leaves it to Python (see `write_body`). An
    /// event's results all have its key. `budget`: the bytes a result's Kafka key (its
    /// key in UTF-8) and body may take together; a larger one is given as a `Result`,
    /// and Python's `encode_result_bounded` omits its row.
    ///
    /// The events' values are taken from their Python objects first; the operator
    /// then evaluates them and writes their results without the GIL, so the worker's
    /// other threads (its HTTP pages) run meanwhile, and the answers become Python
    /// objects at the end. An event whose results the native writer leaves to Python
    /// has them built at once, with the GIL, before the next event changes its key's
    /// state. Errors are raised as when the events went one by one: the events before
    /// the failing one are evaluated, and no answer is returned.
    fn process_batch_encoded<'py>(&mut self, py: Python<'py>, events: Vec<Bound<'py, PyAny>>, budget: i64) -> PyResult<Bound<'py, PyList>> {
        let mut failed = None;
        let mut keys = Vec::with_capacity(events.len());
        for event in &events {
            match event_key(py, event) {
                Ok(key) => keys.push(key),
                Err(e) => {
                    failed = Some(e);
                    break;
                }
            }
        }
        let mut incoming = Vec::with_capacity(keys.len());
        for (event, key) in events.iter().zip(&keys) {
            match key.to_str().and_then(|key| self.incoming(py, event, key)) {
                Ok(one) => incoming.push(one),
                Err(e) => {
                    failed = Some(e);
                    break;
                }
            }
        }
        // a later event's new column widened its stream after the earlier rows were cut
        for one in &mut incoming {
            one.row.resize(self.core.widths[one.stream as usize], V::Missing);
        }
        let mut pending = incoming.into_iter();
        let mut done = Vec::with_capacity(pending.len());
        let mut bodies = Vec::new();
        loop {
            match py.detach(|| self.evaluate_encoded(&mut pending, budget, &mut done, &mut bodies)) {
                None => break,
                Some(Stop::Failed(e)) => return Err(e),
                Some(Stop::ToPython(key, hits)) => {
                    let results = self.encoded_results(py, key, hits, budget, &mut Vec::new())?;
                    done.push(Done::Python(results.into_any().unbind()));
                }
            }
        }
        if let Some(e) = failed {
            return Err(e);
        }
        let none = PyTuple::empty(py).into_any();
        let out = PyList::empty(py);
        for answer in done {
            out.append(match answer {
                Done::Nothing => none.clone(),
                Done::Late(maxts) => maxts.into_pyobject(py)?.into_any(),
                Done::Bodies(items) => {
                    let results = PyList::empty(py);
                    for (bit, range) in items {
                        let item = PyTuple::new(py, [self.queries[&bit].id.bind(py).as_any(), PyBytes::new(py, &bodies[range]).as_any()])?;
                        untrack(&item);
                        results.append(item)?;
                    }
                    results.into_any()
                }
                Done::Python(results) => results.into_bound(py),
            })?;
        }
        Ok(out)
    }

    /// A key's (maxts, floor, held events as (stream, ts, data, position) in
    /// arrival order), or None: what must survive a restart.
    fn snapshot<'py>(&self, py: Python<'py>, key: &str) -> PyResult<Option<Bound<'py, PyTuple>>> {
        let Some((ks, held)) = self.core.snapshot(key) else { return Ok(None) };
        let events = PyList::empty(py);
        for (s, i) in held {
            let store = &ks.stores[s as usize];
            let names = &self.streams[s as usize];
            let data = PyDict::new(py);
            for &slot in &names.shapes[store.shape(i) as usize] {
                data.set_item(names.columns[slot].bind(py), to_py(py, store.value(i, slot))?)?;
            }
            events.append((names.name.bind(py), store.ts(i), data, self.decode_pos(py, store.pos(i))?))?;
        }
        Ok(Some(PyTuple::new(py, [ks.maxts.into_pyobject(py)?.into_any(), ks.floor.into_pyobject(py)?.into_any(), events.into_any()])?))
    }

    /// Reinstate a key from `snapshot`'s parts without evaluating anything.
    fn restore(&mut self, py: Python<'_>, key: &str, maxts: Option<i64>, floor: Option<i64>,
               events: Vec<Bound<'_, PyAny>>) -> PyResult<()> {
        self.core.restore_key(key, maxts, floor);
        for event in &events {
            let incoming = self.incoming(py, event, key)?;
            self.core.restore(incoming);
        }
        Ok(())
    }

    /// (maxts, floor) of a key, or None for a key never seen.
    fn key_bounds(&self, key: &str) -> Option<(Option<i64>, Option<i64>)> {
        self.core.keys.get(key).map(|ks| (ks.maxts, ks.floor))
    }

    /// Bytes of per-key state held in Rust (keys, stores, held events, indexes).
    fn state_bytes(&self) -> usize {
        self.core.state_bytes()
    }

    /// Bytes the registered queries take in Rust: lists, MAXWINDOW classes, plan
    /// nodes and what is kept per query.
    fn registry_bytes(&self) -> usize {
        self.core.registry_bytes() + self.queries.capacity() * (1 + std::mem::size_of::<(usize, QueryInfo)>())
    }

    fn key_count(&self) -> usize {
        self.core.keys.len()
    }

    /// Held events per stream, over all keys.
    fn held_events(&self) -> HashMap<String, usize> {
        self.core
            .held()
            .into_iter()
            .enumerate()
            .filter_map(|(s, n)| n.map(|n| (self.streams[s].name.to_string(), n)))
            .collect()
    }

    #[getter]
    fn horizon(&self) -> i64 {
        self.core.horizon
    }

    #[setter]
    fn set_horizon(&mut self, horizon: i64) {
        self.core.horizon = horizon;
    }

    /// Counters since creation: events, candidates (held events examined as
    /// partners), probes (join/window list probes on them), results.
    fn stats(&self) -> HashMap<&'static str, u64> {
        let s = self.core.stats;
        HashMap::from([
            ("events", s.events), ("candidates", s.candidates), ("probes", s.probes), ("results", s.results), ("probed", s.probed), ("scanned", s.scanned), ("visited", s.visited),
        ])
    }

    /// Every predicate list as (family, left column, right column or None, factor or
    /// None, predicates in it); family is "upper", "lower" or "eq" and columns read
    /// "S.col".
    fn lists(&self, py: Python<'_>) -> Vec<ListRow> {
        let column = |(s, slot): (u32, usize)| {
            let names = &self.streams[s as usize];
            format!("{}.{}", names.name.bind(py), names.columns[slot].bind(py))
        };
        self.core
            .lists()
            .into_iter()
            .map(|(family, l, r, factor, n)| (["upper", "lower", "eq"][family as usize], column(l), r.map(column), factor, n))
            .collect()
    }

    /// The predicate type manager: the current order, reorders, and per type (A, J,
    /// W) comparisons, partners tested and passed by each filter phase, and the
    /// selectivity an adaptive order last measured.
    fn ordering<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        let (s, t) = (&self.core.stats, &self.core.types);
        let per_type = |values: [f64; 3]| -> PyResult<Bound<'py, PyDict>> {
            let d = PyDict::new(py);
            for (name, v) in ["A", "J", "W"].iter().zip(values) {
                d.set_item(name, v)?;
            }
            Ok(d)
        };
        let d = PyDict::new(py);
        d.set_item("order", ordering::name(t.order))?;
        d.set_item("adaptive", t.adaptive)?;
        d.set_item("reorders", t.reorders)?;
        d.set_item("comparisons", per_type(s.comparisons.map(|c| c as f64))?)?;
        d.set_item("tested", per_type(s.tested.map(|c| c as f64))?)?;
        d.set_item("passed", per_type(s.passed.map(|c| c as f64))?)?;
        d.set_item("selectivity", per_type(t.selectivity)?)?;
        Ok(d)
    }
}

/// The extension module: `juggler_native.Operator`, which `juggler.engine.native_engine`
/// drives.
#[pymodule]
fn juggler_native(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<PyOperator>()?;
    m.add_class::<EventDecoder>()?;
    m.add_class::<DecodedEvent>()?;
    m.add_function(wrap_pyfunction!(crate::py_result_json::result_json, m)?)?;
    Ok(())
}
