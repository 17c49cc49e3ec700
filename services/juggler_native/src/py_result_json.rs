//! `juggler_native.result_json`: the results index's per-result conversion
//! (`crate::result_json`), for `juggler.runtime.results_store._row`.

use pyo3::prelude::*;

/// The JSON text of a `juggler.Result` message (`value`, framed with `header`, the
/// Result schema's single-object header) read at (topic, partition, offset), as
/// `json.dumps(record | {"position": ...}, allow_nan=False)` writes it; None when the
/// message is not the plain case, which the caller then decodes in Python.
#[pyfunction]
pub fn result_json(value: &[u8], header: &[u8], topic: &str, partition: i64, offset: i64) -> Option<String> {
    crate::result_json::result_json(value, header, topic, partition, offset)
}
