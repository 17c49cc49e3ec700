//! A `juggler.Result` message as the JSON text the results index keeps and the HTTP
//! API serves, read and written in one pass with no Python object per field.
//!
//! Why in Rust: the index (`juggler.runtime.results_store._row`) decoded each result
//! with fastavro into a dict and wrote it with `json.dumps`: 15 us per result, most of
//! the indexing process's CPU on a machine it shares with the worker and the broker.
//!
//! The text must be exactly `json.dumps(record | {"position": position},
//! allow_nan=False)`: keys in schema order, ", " and ": " separators, ASCII only
//! (`\uXXXX`, lower-case hex, surrogate pairs beyond the BMP), floats as Python's
//! `repr`. Only the plain case is read (the `decode` reader: the expected
//! single-object header, minimal varints, valid UTF-8, finite doubles, booleans 0 or
//! 1, ints within 32 bits, no trailing bytes) plus what a map may hold: positive
//! blocks, union branches 0 to 4 and no repeated key (a Python dict would keep the
//! first key's place and the last value). Anything else gives None and the caller
//! takes the Python path, so every odd result keeps its current text;
//! `tests/unit/test_native_result_json.py` holds the two paths equal.

use std::fmt::Write;

use crate::decode::{Body, Field};
use crate::value::V;

/// The JSON text of a Result message framed with `header` (the Result schema's
/// single-object header) at (topic, partition, offset), or None when the message is
/// not the plain case (see the module doc).
pub fn result_json(
    message: &[u8],
    header: &[u8],
    topic: &str,
    partition: i64,
    offset: i64,
) -> Option<String> {
    let mut body = Body { data: message.strip_prefix(header)? };
    let mut out = String::with_capacity(2 * message.len() + 64);
    out.push_str("{\"query\": ");
    string(&mut out, body.str()?);
    out.push_str(", \"key\": ");
    string(&mut out, body.str()?);
    write!(out, ", \"ts\": {}, \"sources\": ", body.long()?).ok()?;
    map(&mut body, &mut out, |body, out| {
        let topic = body.str()?;
        let V::I(partition) = body.value(Field::Int)? else { return None };
        position(out, topic, partition, body.long()?);
        Some(())
    })?;
    out.push_str(", \"row\": ");
    map(&mut body, &mut out, row_value)?;
    out.push_str(", \"position\": ");
    position(&mut out, topic, partition, offset);
    out.push('}');
    body.data.is_empty().then_some(out)
}

/// A map as a JSON object, each value written by `value`: blocks of a positive count
/// until the 0 that ends them, and no key twice.
fn map<'a>(
    body: &mut Body<'a>,
    out: &mut String,
    value: impl Fn(&mut Body<'a>, &mut String) -> Option<()>,
) -> Option<()> {
    let mut keys: Vec<&str> = Vec::new();
    out.push('{');
    loop {
        let count = body.long()?;
        if count == 0 {
            break;
        }
        for _ in 0..u64::try_from(count).ok()? {
            let key = body.str()?;
            if !keys.is_empty() {
                out.push_str(", ");
            }
            string(out, key);
            out.push_str(": ");
            value(body, out)?;
            keys.push(key);
        }
    }
    out.push('}');
    keys.sort_unstable();
    keys.windows(2).all(|pair| pair[0] != pair[1]).then_some(())
}

/// A row value: the union [null, boolean, long, double, string].
fn row_value(body: &mut Body<'_>, out: &mut String) -> Option<()> {
    match body.long()? {
        0 => out.push_str("null"),
        1 => out.push_str(if body.value(Field::Bool)? == V::B(true) { "true" } else { "false" }),
        2 => write!(out, "{}", body.long()?).ok()?,
        3 => {
            let V::F(f) = body.value(Field::Double)? else { return None };
            double(out, f);
        }
        4 => string(out, body.str()?),
        _ => return None,
    }
    Some(())
}

/// A `juggler.Position` as `{"topic": ..., "partition": ..., "offset": ...}`.
fn position(out: &mut String, topic: &str, partition: i64, offset: i64) {
    out.push_str("{\"topic\": ");
    string(out, topic);
    // writing to a String cannot fail
    let _ = write!(out, ", \"partition\": {partition}, \"offset\": {offset}}}");
}

/// `s` as `json.dumps` writes a string with `ensure_ascii`: printable ASCII as it is
/// but `"` and `\`, short escapes for the usual controls, `\u00XX` for the others and
/// everything beyond ASCII in UTF-16 code units.
fn string(out: &mut String, s: &str) {
    out.push('"');
    let mut plain = 0;
    for (i, c) in s.char_indices() {
        if matches!(c, ' '..='~') && c != '"' && c != '\\' {
            continue;
        }
        out.push_str(&s[plain..i]);
        plain = i + c.len_utf8();
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            '\u{8}' => out.push_str("\\b"),
            '\u{c}' => out.push_str("\\f"),
            _ => {
                for unit in c.encode_utf16(&mut [0; 2]) {
                    let _ = write!(out, "\\u{unit:04x}");
                }
            }
        }
    }
    out.push_str(&s[plain..]);
    out.push('"');
}

/// A finite double as Python's `repr`: the fewest digits that read back as `f`, in
/// positional form when the decimal exponent is from -4 to 15 (with ".0" when there is
/// no fraction), else as `d.ddde+XX`.
///
/// The digits are Ryu's (the `ryu` crate, serde_json's float writer): the shortest that
/// read back as `f`, the closest to it, ties to even, as Python's; only the layout is
/// Python's own. Rust's `{:e}` takes the larger digit on a tie (1496887933091857.25 to
/// 17 digits), and checking each double for one cost more than the rest of the result.
fn double(out: &mut String, f: f64) {
    let mut buffer = ryu::Buffer::new();
    let text = buffer.format_finite(f);
    let (sign, text) = text.strip_prefix('-').map_or(("", text), |t| ("-", t));
    let (mantissa, exponent) = match text.split_once('e') {
        Some((m, e)) => (m, e.parse::<i32>().expect("ryu writes a decimal exponent")),
        None => (text, 0),
    };
    let (int, frac) = mantissa.split_once('.').unwrap_or((mantissa, ""));
    // at most 17 significant digits, with the zeros a positional form adds (< 330)
    let mut all = [0u8; 400];
    all[..int.len()].copy_from_slice(int.as_bytes());
    all[int.len()..int.len() + frac.len()].copy_from_slice(frac.as_bytes());
    let all = &all[..int.len() + frac.len()];
    out.push_str(sign);
    let Some(first) = all.iter().position(|&b| b != b'0') else {
        out.push_str("0.0");
        return;
    };
    let last = all.iter().rposition(|&b| b != b'0').expect("a digit that is not 0");
    let digits = std::str::from_utf8(&all[first..=last]).expect("ASCII digits");
    // the decimal exponent of the first significant digit
    let exponent = exponent + int.len() as i32 - first as i32 - 1;
    if !(-4..16).contains(&exponent) {
        out.push_str(&digits[..1]);
        if digits.len() > 1 {
            out.push('.');
            out.push_str(&digits[1..]);
        }
        let _ = write!(out, "e{}{:02}", if exponent < 0 { '-' } else { '+' }, exponent.unsigned_abs());
    } else if exponent < 0 {
        out.push_str("0.");
        out.extend(std::iter::repeat_n('0', (-exponent - 1) as usize));
        out.push_str(digits);
    } else {
        let point = exponent as usize + 1;
        if digits.len() <= point {
            out.push_str(digits);
            out.extend(std::iter::repeat_n('0', point - digits.len()));
            out.push_str(".0");
        } else {
            out.push_str(&digits[..point]);
            out.push('.');
            out.push_str(&digits[point..]);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::avro;

    const HEADER: [u8; 10] = [0xC3, 0x01, 1, 2, 3, 4, 5, 6, 7, 8];

    fn repr(f: f64) -> String {
        let mut out = String::new();
        double(&mut out, f);
        out
    }

    fn escaped(s: &str) -> String {
        let mut out = String::new();
        string(&mut out, s);
        out
    }

    /// A message: query "q", key "k", ts 5, sources {"S": t/1/2}, then `row` (a map's
    /// encoded blocks and end).
    fn message(row: &[u8]) -> Vec<u8> {
        let mut out = HEADER.to_vec();
        avro::string(&mut out, "q");
        avro::string(&mut out, "k");
        avro::long(&mut out, 5);
        avro::map_start(&mut out, 1);
        avro::string(&mut out, "S");
        avro::string(&mut out, "t");
        avro::long(&mut out, 1);
        avro::long(&mut out, 2);
        avro::map_end(&mut out);
        out.extend_from_slice(row);
        out
    }

    fn json(message: &[u8]) -> Option<String> {
        result_json(message, &HEADER, "r", 0, 9)
    }

    #[test]
    fn floats_read_as_python_repr() {
        let cases = [
            (0.0, "0.0"),
            (-0.0, "-0.0"),
            (1.0, "1.0"),
            (-2.5, "-2.5"),
            (0.1, "0.1"),
            (1e-4, "0.0001"),
            (1e-5, "1e-05"),
            (1.5e-5, "1.5e-05"),
            (123.456, "123.456"),
            (1e15, "1000000000000000.0"),
            (1e16, "1e+16"),
            (1.5e300, "1.5e+300"),
            (5e-324, "5e-324"),
            (f64::MAX, "1.7976931348623157e+308"),
            (1234567890123456.7, "1234567890123456.8"),
            (0.000123, "0.000123"),
            (1e100, "1e+100"),
            (1496887933091857.25, "1496887933091857.2"),
            (-146076764543890.625, "-146076764543890.62"),
            (2f64.powi(-24), "5.960464477539063e-08"),
        ];
        for (f, text) in cases {
            assert_eq!(repr(f), text, "{f:e}");
        }
    }

    #[test]
    fn strings_are_ascii_with_pythons_escapes() {
        assert_eq!(escaped("a b~"), "\"a b~\"");
        assert_eq!(escaped("\"\\\n\r\t\u{8}\u{c}"), "\"\\\"\\\\\\n\\r\\t\\b\\f\"");
        assert_eq!(escaped("\u{0}\u{1f}\u{7f}é"), "\"\\u0000\\u001f\\u007f\\u00e9\"");
        assert_eq!(escaped("x😀y\u{ffff}"), "\"x\\ud83d\\ude00y\\uffff\"");
    }

    #[test]
    fn writes_a_result_as_json_dumps_does() {
        let mut row = Vec::new();
        avro::map_start(&mut row, 5);
        for (column, value) in [
            ("a", V::Missing),
            ("b", V::B(true)),
            ("c", V::I(-7)),
            ("d", V::F(0.5)),
            ("e", V::S(Box::new("x".into()))),
        ] {
            avro::string(&mut row, column);
            assert!(avro::row_value(&mut row, &value));
        }
        avro::map_end(&mut row);
        assert_eq!(
            json(&message(&row)).unwrap(),
            "{\"query\": \"q\", \"key\": \"k\", \"ts\": 5, \"sources\": {\"S\": {\"topic\": \"t\", \"partition\": 1, \
                    \"offset\": 2}}, \"row\": {\"a\": null, \"b\": true, \"c\": -7, \"d\": 0.5, \"e\": \"x\"}, \"position\": \
                    {\"topic\": \"r\", \"partition\": 0, \"offset\": 9}}"
        );
        let two_blocks = [2, 2, b'a', 0, 2, 2, b'b', 0, 0];
        assert!(json(&message(&two_blocks)).unwrap().contains("\"row\": {\"a\": null, \"b\": null}"));
        assert!(json(&message(&[0])).unwrap().contains("\"row\": {}, "));
    }

    #[test]
    fn refuses_anything_but_the_plain_case() {
        let good = message(&[2, 2, b'a', 0, 0]);
        assert!(json(&good).is_some());
        assert!(json(&good[..good.len() - 1]).is_none(), "truncated");
        assert!(json(&[&good[..], &[0]].concat()).is_none(), "trailing byte");
        assert!(json(&[&[0xC3, 0x01, 9][..], &good[3..]].concat()).is_none(), "another fingerprint");
        assert!(json(&[&[0, 0, 0, 0, 1][..], &good[10..]].concat()).is_none(), "registry framing");
        assert!(json(&message(&[4, 2, b'a', 0, 2, b'a', 2, 1, 0])).is_none(), "a key twice");
        assert!(json(&message(&[1, 4, 2, b'a', 0, 0])).is_none(), "a negative block count");
        assert!(json(&message(&[2, 2, b'a', 10, 0])).is_none(), "union branch 5");
        assert!(json(&message(&[2, 2, b'a', 1, 0])).is_none(), "union branch -1");
        assert!(json(&message(&[2, 2, b'a', 2, 2, 0])).is_none(), "boolean 2");
        assert!(json(&message(&[2, 2, 0xFF, 0, 0])).is_none(), "bad UTF-8");
        for bad in [f64::NAN, f64::INFINITY, f64::NEG_INFINITY] {
            let row = [&[2, 2, b'a', 6][..], &bad.to_le_bytes(), &[0]].concat();
            assert!(json(&message(&row)).is_none(), "{bad}");
        }
        let mut wide = message(&[0]);
        wide[20] = 0x80; // partition 1 << 31: the varint [0x80, 0x80, 0x80, 0x80, 0x10]
        wide.splice(21..21, [0x80, 0x80, 0x80, 0x10]);
        assert!(json(&wide).is_none(), "an int beyond 32 bits");
    }
}
