//! A result's Avro body (`juggler.Result`, schemas/Result.avsc) written from the
//! operator's state, with no Python object: the worker's results go out as these
//! bytes (`avro` has the encoding's pieces).
//!
//! The names a body carries (query ids, stream names, labels, topics) are Python's
//! strings: the binding encodes each once, when it first meets it, and answers for
//! them through `Names`.

use crate::avro;
use crate::operator::{Hit, KeyState};

/// The Avro strings of the names the operator's streams and positions have.
pub trait Names {
    /// Stream `s`'s name, the key of its entry in a result's sources.
    fn stream(&self, s: u32) -> &[u8];
    /// The slots of stream `s`'s data shape `shape` (in data order) and their
    /// `S.col` labels, the row of a `SELECT *` result.
    fn shape(&self, s: u32, shape: u32) -> (&[usize], &[Vec<u8>]);
    /// The topic and partition of the positions tagged `tag` as a `Position` begins;
    /// None for a position the body cannot carry as `result_body` would.
    fn prefix(&self, tag: u32) -> Option<&[u8]>;
}

/// A query's names as its results' bodies carry them.
#[derive(Clone)]
pub struct Query {
    /// Its id, an Avro string.
    pub id: Vec<u8>,
    /// Its `SELECT` items (label as an Avro string, stream, slot); None for `SELECT *`.
    pub select: Option<Vec<(Vec<u8>, u32, usize)>>,
}

/// Append the Avro body of result `hit` of query `q` (its streams `from`, in FROM
/// order) for `key` (its held events in `ks`) to `out`: the bytes
/// `result_body(result_record(r))` gives for the `Result` r Python would build. False,
/// with what it appended unusable, for a result it does not write the same way: a
/// position `Names::prefix` refuses, or an int beyond 64 bits in the row; Python then
/// builds and encodes that result.
pub fn write(out: &mut Vec<u8>, names: &impl Names, q: &Query, from: &[u32], ks: &KeyState, key: &str, hit: &Hit) -> bool {
    out.extend_from_slice(&q.id);
    avro::string(out, key);
    avro::long(out, hit.ts);
    avro::map_start(out, from.len());
    for &s in from {
        let (store, i) = ks.event_of(hit, s);
        let (tag, offset) = store.pos(i);
        let Some(prefix) = names.prefix(tag) else { return false };
        out.extend_from_slice(names.stream(s));
        out.extend_from_slice(prefix);
        avro::long(out, offset);
    }
    avro::map_end(out);
    match &q.select {
        None => {
            let shape_of = |s: u32| {
                let (store, i) = ks.event_of(hit, s);
                names.shape(s, store.shape(i))
            };
            avro::map_start(out, from.iter().map(|&s| shape_of(s).0.len()).sum());
            for &s in from {
                let (store, i) = ks.event_of(hit, s);
                let (slots, labels) = names.shape(s, store.shape(i));
                for (label, &slot) in labels.iter().zip(slots) {
                    out.extend_from_slice(label);
                    if !avro::row_value(out, store.value(i, slot)) {
                        return false;
                    }
                }
            }
        }
        Some(select) => {
            avro::map_start(out, select.len());
            for (label, s, slot) in select {
                let (store, i) = ks.event_of(hit, *s);
                out.extend_from_slice(label);
                if !avro::row_value(out, store.value(i, *slot)) {
                    return false;
                }
            }
        }
    }
    avro::map_end(out);
    true
}
