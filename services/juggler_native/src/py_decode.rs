//! `juggler_native.EventDecoder` and `DecodedEvent`: stream records read in Rust
//! (`decode`) into events the operator takes as they are, with no Python dict or
//! `Event` per record.
//!
//! A `DecodedEvent` reads like a `juggler.engine.events.Event` (`stream`, `key`, `ts`,
//! `data`, `position`), so whatever the worker does with an event (order it, hold it,
//! report it late) works on either; `data` and `position` are built only when asked.

use std::sync::Arc;

use pyo3::exceptions::PyValueError;
use pyo3::intern;
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyDict, PyList, PyString, PyTuple};
use rustc_hash::FxHashMap;

use crate::decode::{Field, Layout, entity_key};
use crate::py_convert::to_py;
use crate::value::V;

/// One stream: how its records are written, and its names for the events read.
pub struct Stream {
    pub name: Py<PyString>,
    /// The fields but `ts`, in schema order: the columns of an event's `data`.
    pub columns: Vec<Py<PyString>>,
    pub layout: Layout,
}

/// A stream as Python describes it: name, single-object header, fields in schema
/// order as (name, Avro primitive type).
type StreamSpec = (String, Vec<u8>, Vec<(String, String)>);

/// The decoder of a worker's streams, built once from its stream schemas.
#[pyclass(frozen, module = "juggler_native")]
pub struct EventDecoder {
    streams: FxHashMap<String, Arc<Stream>>,
    /// The longest entity key (`juggler.codec.avro.MAX_KEY_BYTES`): given by Python so
    /// both paths refuse the same keys from one constant.
    max_key_bytes: usize,
}

#[pymethods]
impl EventDecoder {
    /// One `StreamSpec` per stream; one of its fields is `ts`, an int or a long.
    #[new]
    fn new(py: Python<'_>, streams: Vec<StreamSpec>, max_key_bytes: usize) -> PyResult<Self> {
        let mut out = FxHashMap::default();
        for (name, header, fields) in streams {
            let types = fields
                .iter()
                .map(|(column, t)| Field::parse(t).ok_or_else(|| PyValueError::new_err(format!("stream {name}: column {column} has type {t}, not a primitive"))))
                .collect::<PyResult<Vec<_>>>()?;
            let ts = fields
                .iter()
                .position(|(column, _)| column == "ts")
                .filter(|&i| matches!(types[i], Field::Int | Field::Long))
                .ok_or_else(|| PyValueError::new_err(format!("stream {name}: no int or long field ts")))?;
            let columns = fields.iter().filter(|(column, _)| column != "ts").map(|(column, _)| PyString::intern(py, column).unbind()).collect();
            let stream = Stream { name: PyString::intern(py, &name).unbind(), columns, layout: Layout { header, fields: types, ts } };
            out.insert(name, Arc::new(stream));
        }
        Ok(EventDecoder { streams: out, max_key_bytes })
    }

    /// The record of `stream` with this Kafka key and value at (topic, partition,
    /// offset) as an event, or None when it is not the plain case (`decode`): the
    /// caller then decodes it with `Codec.event_from`, which accepts it or says why not.
    #[allow(clippy::too_many_arguments)]
    fn event(&self, py: Python<'_>, stream: &str, key: &Bound<'_, PyAny>, value: &Bound<'_, PyAny>, topic: Py<PyString>, partition: i64,
             offset: i64) -> Option<DecodedEvent> {
        self.decode(py, self.streams.get(stream)?, key, value, topic, partition, offset)
    }

    /// A fetched group of records of `stream` from one (topic, partition), each read as
    /// `event` reads it: per record a `DecodedEvent`, or None where `event` gives None.
    /// `records` are objects with `key`, `value` and `offset` (the worker's
    /// `task.Record`): one call per group, so Python does no per-record call to decode.
    fn events(&self, py: Python<'_>, stream: &str, topic: Py<PyString>, partition: i64, records: &Bound<'_, PyList>)
              -> PyResult<Vec<Option<DecodedEvent>>> {
        let Some(stream) = self.streams.get(stream) else {
            return Ok(records.iter().map(|_| None).collect());
        };
        records
            .iter()
            .map(|record| {
                let key = record.getattr(intern!(py, "key"))?;
                let value = record.getattr(intern!(py, "value"))?;
                let offset = record.getattr(intern!(py, "offset"))?.extract()?;
                Ok(self.decode(py, stream, &key, &value, topic.clone_ref(py), partition, offset))
            })
            .collect()
    }
}

impl EventDecoder {
    /// One record of `stream` as an event, or None when it is not the plain case.
    #[allow(clippy::too_many_arguments)]
    fn decode(&self, py: Python<'_>, stream: &Arc<Stream>, key: &Bound<'_, PyAny>, value: &Bound<'_, PyAny>, topic: Py<PyString>,
              partition: i64, offset: i64) -> Option<DecodedEvent> {
        let key = entity_key(key.cast::<PyBytes>().ok().map(|k| k.as_bytes()), self.max_key_bytes)?;
        let (ts, values) = stream.layout.decode(value.cast::<PyBytes>().ok()?.as_bytes())?;
        Some(DecodedEvent { stream: stream.clone(), key: PyString::new(py, key).unbind(), ts, values, topic, partition, offset })
    }
}

/// A stream record the decoder read: what the operator needs of it, in Rust.
#[pyclass(frozen, module = "juggler_native")]
pub struct DecodedEvent {
    pub stream: Arc<Stream>,
    #[pyo3(get)]
    pub key: Py<PyString>,
    #[pyo3(get)]
    pub ts: i64,
    /// The values of `stream.columns`.
    pub values: Vec<V>,
    pub topic: Py<PyString>,
    pub partition: i64,
    pub offset: i64,
}

#[pymethods]
impl DecodedEvent {
    #[getter(stream)]
    fn stream_name(&self, py: Python<'_>) -> Py<PyString> {
        self.stream.name.clone_ref(py)
    }

    /// The columns but `ts` in schema order, as `Codec.event_from` gives them.
    #[getter]
    fn data<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        let data = PyDict::new(py);
        for (column, value) in self.stream.columns.iter().zip(&self.values) {
            data.set_item(column.bind(py), to_py(py, value)?)?;
        }
        Ok(data)
    }

    /// (topic, partition, offset).
    #[getter]
    fn position<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyTuple>> {
        (self.topic.clone_ref(py), self.partition, self.offset).into_pyobject(py)
    }

    fn __repr__(&self, py: Python<'_>) -> PyResult<String> {
        Ok(format!("DecodedEvent(stream={}, key={}, ts={}, data={}, position={})", self.stream.name.bind(py).repr()?,
                   self.key.bind(py).repr()?, self.ts, self.data(py)?.repr()?, self.position(py)?.repr()?))
    }
}
