//! The Avro binary encoding of a `juggler.Result` body (schemas/Result.avsc), the
//! pieces the operator writes results from without building Python objects.
//!
//! Why in Rust: at 100 join queries results outnumber events, and building a Python
//! `Result`, its record dict and then its bytes would cost more than evaluating
//! the event. The bytes must be exactly those `juggler.codec.result_body` writes
//! (fastavro's): the tests in `tests/unit/test_native_results.py` hold them equal.
//!
//! Layout: query (string), key (string), ts (long), sources (map of Position {topic:
//! string, partition: int, offset: long}), row (map of union [null, boolean, long,
//! double, string]). A non-empty map is one block (its count, then its entries) and a
//! 0 that ends it; an empty map is the 0 alone.

use crate::value::V;

/// Append `n` as Avro writes an int or a long: zigzag, then a little-endian base-128
/// varint.
pub fn long(out: &mut Vec<u8>, n: i64) {
    let mut z = ((n << 1) ^ (n >> 63)) as u64;
    while z > 0x7F {
        out.push((z as u8 & 0x7F) | 0x80);
        z >>= 7;
    }
    out.push(z as u8);
}

/// Append an Avro string: its UTF-8 length, then its bytes.
pub fn string(out: &mut Vec<u8>, s: &str) {
    long(out, s.len() as i64);
    out.extend_from_slice(s.as_bytes());
}

/// `s` as an Avro string, for names written in every result (query ids, stream names,
/// column labels, topics).
pub fn encoded(s: &str) -> Vec<u8> {
    let mut out = Vec::with_capacity(s.len() + 2);
    string(&mut out, s);
    out
}

/// The block count that starts a map of `n` entries (nothing for an empty map, whose
/// block list is the closing 0 alone).
pub fn map_start(out: &mut Vec<u8>, n: usize) {
    if n > 0 {
        long(out, n as i64);
    }
}

/// The 0 that ends a map's blocks.
pub fn map_end(out: &mut Vec<u8>) {
    out.push(0);
}

/// Append a row value as the union [null, boolean, long, double, string]: the branch
/// index (zigzag) and the value. False, with nothing written, for an int beyond 64 bits,
/// which the schema cannot hold.
pub fn row_value(out: &mut Vec<u8>, v: &V) -> bool {
    match v {
        V::Missing => out.push(0),
        V::B(b) => out.extend_from_slice(&[2, u8::from(*b)]),
        V::I(i) => {
            out.push(4);
            long(out, *i);
        }
        V::F(f) => {
            out.push(6);
            out.extend_from_slice(&f.to_le_bytes());
        }
        V::S(s) => {
            out.push(8);
            string(out, s);
        }
        V::X(_) => return false,
    }
    true
}

#[cfg(test)]
mod tests {
    use super::*;

    fn long_bytes(n: i64) -> Vec<u8> {
        let mut out = Vec::new();
        long(&mut out, n);
        out
    }

    #[test]
    fn zigzag_varints_match_the_avro_spec() {
        // the spec's table, then the varint boundaries and both ends of a long
        assert_eq!(long_bytes(0), [0x00]);
        assert_eq!(long_bytes(-1), [0x01]);
        assert_eq!(long_bytes(1), [0x02]);
        assert_eq!(long_bytes(-2), [0x03]);
        assert_eq!(long_bytes(2), [0x04]);
        assert_eq!(long_bytes(-64), [0x7F]);
        assert_eq!(long_bytes(64), [0x80, 0x01]);
        assert_eq!(long_bytes(8191), [0xFE, 0x7F]);
        assert_eq!(long_bytes(-8193), [0x81, 0x80, 0x01]);
        assert_eq!(long_bytes(i64::MAX), [0xFE, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0x01]);
        assert_eq!(long_bytes(i64::MIN), [0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0x01]);
    }

    #[test]
    fn varints_decode_back() {
        for n in [0, 1, -1, 63, -64, 64, -65, 1 << 20, -(1 << 40), i64::MAX - 1, i64::MIN + 1] {
            let bytes = long_bytes(n);
            let mut z = 0u64;
            for (i, b) in bytes.iter().enumerate() {
                z |= u64::from(b & 0x7F) << (7 * i);
                assert_eq!(b & 0x80 != 0, i + 1 < bytes.len());
            }
            assert_eq!(((z >> 1) as i64) ^ -((z & 1) as i64), n);
        }
    }

    #[test]
    fn strings_are_prefixed_with_their_utf8_length() {
        assert_eq!(encoded(""), [0]);
        assert_eq!(encoded("é"), [4, 0xC3, 0xA9]);
        assert_eq!(encoded(&"x".repeat(64))[..2], [0x80, 0x01]);
    }

    #[test]
    fn row_values_carry_their_union_branch() {
        let value = |v: V| {
            let mut out = Vec::new();
            row_value(&mut out, &v).then_some(out)
        };
        assert_eq!(value(V::Missing), Some(vec![0]));
        assert_eq!(value(V::B(true)), Some(vec![2, 1]));
        assert_eq!(value(V::B(false)), Some(vec![2, 0]));
        assert_eq!(value(V::I(-3)), Some(vec![4, 5]));
        assert_eq!(value(V::F(1.0)), Some([&[6u8][..], &1.0f64.to_le_bytes()].concat()));
        assert_eq!(value(V::S(Box::new("ab".into()))), Some(vec![8, 4, b'a', b'b']));
        assert_eq!(value(V::X(Box::new("1".repeat(30)))), None);
    }

    #[test]
    fn maps_are_one_block_or_the_end_alone() {
        let mut out = Vec::new();
        map_start(&mut out, 0);
        map_end(&mut out);
        assert_eq!(out, [0]);
        out.clear();
        map_start(&mut out, 2);
        assert_eq!(out, [4]);
    }
}
