//! The Juggler operator: every registered query over one shared state, in
//! Rust.
//!
//! Per event, the operator finds the queries the event's attributes satisfy, retrieves
//! partners through the exploitation structures (JES value indexes, WES time ranges),
//! filters them by attribute masks, MAXWINDOW and the join and window predicate lists,
//! and emits results (thesis Figure 3.19); the predicate type manager (`ordering`)
//! measures the three predicate types' selectivity and keeps the order they are
//! applied in. Python keeps the language: it compiles queries to `operator::QuerySpec`
//! with exact thresholds and answers the rare comparison doubles cannot decide.
//!
//! The worker's stream records are read here too (`decode`): the plain ones become
//! events the operator takes with no Python object per column. So are the results the
//! results index keeps: `result_json` writes a result message as its JSON text.
//!
//! The pure core has no Python in it and is what `cargo test` checks; the `python`
//! feature (on in maturin builds) binds it as the `juggler_native` module, whose
//! `Operator` `juggler.engine.native_engine.NativeEngine` drives and whose
//! `EventDecoder` `juggler.codec.avro.Codec.native_decoder` builds.

pub mod avro;
pub mod blocks;
pub mod decode;
pub mod lists;
pub mod masks;
pub mod operator;
pub mod ordering;
pub mod result_body;
pub mod result_json;
pub mod store;
pub mod value;

#[cfg(feature = "python")]
mod py_convert;
#[cfg(feature = "python")]
mod py_decode;
#[cfg(feature = "python")]
mod py_operator;
#[cfg(feature = "python")]
mod py_result_json;
#[cfg(feature = "python")]
mod py_spec;
