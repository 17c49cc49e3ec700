//! Reading stream records (Avro single-object messages of flat primitive records)
//! without Python: the worker's per-record decoding.
//!
//! Why in Rust: fastavro's reader, the finite-number check and the `Event` and dict
//! built per record were a large share of the worker's time per record. The
//! reader here only takes the plain case, the one encoding a correct writer produces:
//! the schema's single-object header, minimal varints, booleans 0 or 1, strings of
//! valid UTF-8, finite numbers, no trailing bytes, and a present UTF-8 key of at most
//! the decoder's `max_key_bytes` (`juggler.codec.avro.MAX_KEY_BYTES`, passed in so
//! Python's constant is the only one). Anything else gives None and the caller
//! decodes the record with `juggler.codec.avro.Codec.event_from`, which accepts what
//! fastavro accepts and says exactly why it refuses the rest: so a record is
//! accepted, valued and refused the same whichever path read it
//! (`tests/unit/test_native_decode.py` holds them equal).

use crate::value::V;

/// An Avro primitive a stream column can have (`juggler.codec.avro.avro_stream_schema`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Field {
    Int,
    Long,
    Float,
    Double,
    Bool,
    Str,
}

impl Field {
    pub fn parse(name: &str) -> Option<Field> {
        Some(match name {
            "int" => Field::Int,
            "long" => Field::Long,
            "float" => Field::Float,
            "double" => Field::Double,
            "boolean" => Field::Bool,
            "string" => Field::Str,
            _ => return None,
        })
    }
}

/// How one stream's records are written: the single-object header (magic and schema
/// fingerprint) and the record's fields in schema order, `ts` at `ts`.
#[derive(Clone, Debug)]
pub struct Layout {
    pub header: Vec<u8>,
    pub fields: Vec<Field>,
    pub ts: usize,
}

impl Layout {
    /// A record's `ts` and its other fields' values in schema order, or None when the
    /// message is not the plain case (see the module doc).
    pub fn decode(&self, message: &[u8]) -> Option<(i64, Vec<V>)> {
        let mut body = Body { data: message.strip_prefix(self.header.as_slice())? };
        let mut ts = 0;
        let mut values = Vec::with_capacity(self.fields.len().saturating_sub(1));
        for (i, &field) in self.fields.iter().enumerate() {
            let value = body.value(field)?;
            if i != self.ts {
                values.push(value);
            } else if let V::I(n) = value {
                ts = n;
            } else {
                return None;
            }
        }
        body.data.is_empty().then_some((ts, values))
    }
}

/// A Kafka message key as the entity key: present, at most `max_bytes`, UTF-8.
pub fn entity_key(key: Option<&[u8]>, max_bytes: usize) -> Option<&str> {
    key.filter(|k| k.len() <= max_bytes).and_then(|k| std::str::from_utf8(k).ok())
}

/// The unread rest of a record body (also `result_json`'s reader).
pub(crate) struct Body<'a> {
    pub(crate) data: &'a [u8],
}

impl<'a> Body<'a> {
    pub(crate) fn take(&mut self, n: usize) -> Option<&'a [u8]> {
        if n > self.data.len() {
            return None;
        }
        let (head, rest) = self.data.split_at(n);
        self.data = rest;
        Some(head)
    }

    pub(crate) fn value(&mut self, field: Field) -> Option<V> {
        Some(match field {
            Field::Long => V::I(self.long()?),
            Field::Int => V::I(i32::try_from(self.long()?).ok()?.into()),
            Field::Float => V::F(finite(f32::from_le_bytes(self.take(4)?.try_into().ok()?).into())?),
            Field::Double => V::F(finite(f64::from_le_bytes(self.take(8)?.try_into().ok()?))?),
            Field::Bool => match self.take(1)? {
                [0] => V::B(false),
                [1] => V::B(true),
                _ => return None,
            },
            Field::Str => V::S(Box::new(self.str()?.to_owned())),
        })
    }

    /// An Avro string: its length, then that many bytes of valid UTF-8.
    pub(crate) fn str(&mut self) -> Option<&'a str> {
        let n = usize::try_from(self.long()?).ok()?;
        std::str::from_utf8(self.take(n)?).ok()
    }

    /// A zigzag varint in its minimal form (at most ten bytes, no high zero byte).
    pub(crate) fn long(&mut self) -> Option<i64> {
        let mut z = 0u64;
        for i in 0..10 {
            let b = *self.take(1)?.first()?;
            if i == 9 && b > 1 {
                return None;
            }
            z |= u64::from(b & 0x7F) << (7 * i);
            if b & 0x80 == 0 {
                if b == 0 && i > 0 {
                    return None;
                }
                return Some(((z >> 1) as i64) ^ -((z & 1) as i64));
            }
        }
        None
    }
}

fn finite(f: f64) -> Option<f64> {
    f.is_finite().then_some(f)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::avro;

    fn layout() -> Layout {
        Layout { header: vec![0xC3, 0x01, 1, 2, 3, 4, 5, 6, 7, 8], fields: vec![Field::Long, Field::Double, Field::Bool, Field::Str, Field::Int, Field::Float], ts: 0 }
    }

    fn message(ts: i64, d: f64, b: u8, s: &[u8], i: i64, f: f32) -> Vec<u8> {
        let mut out = layout().header;
        avro::long(&mut out, ts);
        out.extend_from_slice(&d.to_le_bytes());
        out.push(b);
        avro::long(&mut out, s.len() as i64);
        out.extend_from_slice(s);
        avro::long(&mut out, i);
        out.extend_from_slice(&f.to_le_bytes());
        out
    }

    #[test]
    fn reads_a_plain_record() {
        let got = layout().decode(&message(-5, 1.5, 1, "é".as_bytes(), 7, 0.25)).unwrap();
        assert_eq!(got, (-5, vec![V::F(1.5), V::B(true), V::S(Box::new("é".into())), V::I(7), V::F(0.25)]));
        for ts in [i64::MIN, i64::MAX, 0, 63, -64, 64] {
            assert_eq!(layout().decode(&message(ts, 0.0, 0, b"", 0, 0.0)).unwrap().0, ts);
        }
    }

    #[test]
    fn refuses_anything_but_the_plain_case() {
        let good = message(1, 1.0, 0, b"ab", 1, 1.0);
        assert!(layout().decode(&good).is_some());
        assert!(layout().decode(&good[..good.len() - 1]).is_none(), "truncated");
        assert!(layout().decode(&[&good[..], &[0]].concat()).is_none(), "trailing byte");
        assert!(layout().decode(&[&[0xC3, 0x01, 9][..], &good[3..]].concat()).is_none(), "another fingerprint");
        assert!(layout().decode(&message(1, f64::NAN, 0, b"", 1, 1.0)).is_none());
        assert!(layout().decode(&message(1, f64::INFINITY, 0, b"", 1, 1.0)).is_none());
        assert!(layout().decode(&message(1, 1.0, 0, b"", 1, f32::NEG_INFINITY)).is_none());
        assert!(layout().decode(&message(1, 1.0, 2, b"", 1, 1.0)).is_none(), "boolean 2");
        assert!(layout().decode(&message(1, 1.0, 0, b"\xff", 1, 1.0)).is_none(), "bad UTF-8");
        assert!(layout().decode(&message(1, 1.0, 0, b"\xed\xa0\x80", 1, 1.0)).is_none(), "a surrogate");
        assert!(layout().decode(&message(1, 1.0, 0, b"", 1 << 31, 1.0)).is_none(), "int beyond 32 bits");
        let mut padded = layout().header;
        padded.extend_from_slice(&[0x82, 0x00]); // ts 1, not minimal
        padded.extend_from_slice(&good[11..]);
        assert!(layout().decode(&padded).is_none());
        let mut long = layout().header;
        long.extend_from_slice(&[0xFF; 10]); // eleven bytes' worth of varint
        long.extend_from_slice(&good[11..]);
        assert!(layout().decode(&long).is_none());
    }

    #[test]
    fn keys_must_be_present_short_utf8() {
        assert_eq!(entity_key(Some(b"p1"), 8), Some("p1"));
        assert_eq!(entity_key(Some(b""), 8), Some(""));
        assert_eq!(entity_key(None, 8), None);
        assert_eq!(entity_key(Some(b"\xc3"), 8), None);
        assert_eq!(entity_key(Some(b"abcdefgh"), 8), Some("abcdefgh"));
        assert_eq!(entity_key(Some(b"abcdefghi"), 8), None);
    }
}
