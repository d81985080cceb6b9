//! Decodes a message of the schema into the JSON the Go object would marshal to: a value
//! field is written unless it is `omitempty` and zero, a pointer only when set (an explicit
//! zero included), lists and maps only when they have entries, structs always, and zero
//! times (Go's `null`) not at all.

use std::borrow::Cow;

use base64::Engine;
use chrono::{DateTime, SecondsFormat, TimeDelta};
use serde_json::{Map, Value, json};

use super::ProtobufError;
use super::schema::{Base, Field, Schema, Shape};
use super::wire::{LEN, Reader, VARINT, packed};

/// One occurrence of a field on the wire.
#[derive(Debug, Clone, Copy)]
enum Raw<'a> {
    Varint(u64),
    Len(&'a [u8]),
}

/// Decodes message `msg` of the schema from `buf`.
pub fn message(
    s: &Schema,
    msg: usize,
    buf: &[u8],
    depth: u32,
) -> Result<Map<String, Value>, ProtobufError> {
    if depth > super::MAX_DEPTH {
        return Err(ProtobufError::TooDeep);
    }
    let m = s.messages.get(msg).ok_or(ProtobufError::TooDeep)?;
    let mut seen: Vec<Vec<Raw<'_>>> = vec![Vec::new(); m.fields.len()];
    let mut r = Reader::new(buf);
    while let Some((num, wt)) = r.tag(m.go_name())? {
        let Some(i) = m.fields.iter().position(|f| f.num == num) else {
            r.skip(wt)?;
            continue;
        };
        let f = &m.fields[i];
        let varint = f.base.is_varint() && f.shape != Shape::Map;
        let raw = match wt {
            VARINT if varint => Raw::Varint(r.varint()?),
            LEN if !varint || f.shape == Shape::List => Raw::Len(r.bytes()?),
            _ => {
                return Err(ProtobufError::WrongWireType {
                    wire: wt,
                    field: f.go_name(),
                });
            }
        };
        seen[i].push(raw);
    }
    let mut out = Map::new();
    for (f, raws) in m.fields.iter().zip(&seen) {
        field(s, f, raws, depth, &mut out)?;
    }
    Ok(out)
}

fn field(
    s: &Schema,
    f: &Field,
    raws: &[Raw<'_>],
    depth: u32,
    out: &mut Map<String, Value>,
) -> Result<(), ProtobufError> {
    let v = match f.shape {
        Shape::Plain => match value(s, f.base, raws, depth)? {
            Some(Value::Object(inner)) if f.inline() => {
                out.extend(inner);
                return Ok(());
            }
            Some(v) if f.omitempty && go_empty(f.base, &v) => return Ok(()),
            v => v,
        },
        _ if raws.is_empty() => None,
        Shape::Ptr => value(s, f.base, raws, depth)?,
        Shape::List => Some(list(s, f.base, raws, depth)?),
        Shape::Map => Some(map(s, f.base, raws, depth)?),
    };
    if let Some(v) = v {
        out.insert(f.json.to_string(), v);
    }
    Ok(())
}

/// Zero values `omitempty` drops (structs are never empty to Go's encoder).
fn go_empty(base: Base, v: &Value) -> bool {
    match base {
        Base::Str | Base::Bytes => v.as_str() == Some(""),
        Base::Bool => v == &Value::Bool(false),
        Base::I32 | Base::I64 => v.as_i64() == Some(0),
        _ => false,
    }
}

/// The JSON of a single (not repeated) value from its occurrences, the zero value when
/// there are none; `None` where Go writes `null`.
fn value(
    s: &Schema,
    base: Base,
    raws: &[Raw<'_>],
    depth: u32,
) -> Result<Option<Value>, ProtobufError> {
    let last_varint = raws.iter().rev().find_map(|r| match r {
        Raw::Varint(v) => Some(*v),
        Raw::Len(_) => None,
    });
    let last_len = raws.iter().rev().find_map(|r| match r {
        Raw::Len(b) => Some(*b),
        Raw::Varint(_) => None,
    });
    let v = last_varint.unwrap_or(0);
    Ok(Some(match base {
        Base::Str => json!(String::from_utf8_lossy(last_len.unwrap_or_default())),
        Base::Bool => json!(v != 0),
        Base::I32 => json!(v as i32),
        Base::I64 => json!(v as i64),
        Base::Bytes => match last_len {
            Some(b) => json!(base64::engine::general_purpose::STANDARD.encode(b)),
            None => return Ok(None),
        },
        Base::Quantity => json!(quantity(last_len.unwrap_or_default())?),
        Base::IntOrString => int_or_string(&joined(raws))?,
        Base::Time | Base::MicroTime => {
            return Ok(
                timestamp(last_len.unwrap_or_default(), base == Base::MicroTime)?
                    .map(Value::String),
            );
        }
        Base::FieldsV1 => return fields_v1(last_len.unwrap_or_default()),
        Base::Msg(m) => Value::Object(message(s, m, &joined(raws), depth + 1)?),
    }))
}

/// Occurrences of a message field merge, as concatenated encodings do.
fn joined<'a>(raws: &[Raw<'a>]) -> Cow<'a, [u8]> {
    let mut parts = raws.iter().filter_map(|r| match r {
        Raw::Len(b) => Some(*b),
        Raw::Varint(_) => None,
    });
    match (parts.next(), parts.next()) {
        (None, _) => Cow::Borrowed(&[]),
        (Some(one), None) => Cow::Borrowed(one),
        (Some(a), Some(b)) => {
            let mut all = [a, b].concat();
            parts.for_each(|p| all.extend_from_slice(p));
            Cow::Owned(all)
        }
    }
}

fn list(s: &Schema, base: Base, raws: &[Raw<'_>], depth: u32) -> Result<Value, ProtobufError> {
    let mut items = Vec::new();
    for raw in raws {
        match (raw, base.is_varint()) {
            (Raw::Len(b), true) => {
                for v in packed(b)? {
                    items.extend(value(s, base, &[Raw::Varint(v)], depth)?);
                }
            }
            _ => items.push(value(s, base, &[*raw], depth)?.unwrap_or(Value::Null)),
        }
    }
    Ok(Value::Array(items))
}

fn map(s: &Schema, base: Base, raws: &[Raw<'_>], depth: u32) -> Result<Value, ProtobufError> {
    let mut out = Map::new();
    for raw in raws {
        let Raw::Len(entry) = raw else { continue };
        let mut r = Reader::new(entry);
        let (mut key, mut vals) = (String::new(), Vec::new());
        // Go reads map entries by field number alone, whatever the wire type says.
        while let Some((num, wt)) = r.tag("MapEntry")? {
            match num {
                1 => key = String::from_utf8_lossy(r.bytes()?).into_owned(),
                2 if base.is_varint() => vals.push(Raw::Varint(r.varint()?)),
                2 => vals.push(Raw::Len(r.bytes()?)),
                _ => r.skip(wt)?,
            }
        }
        let v = value(s, base, &vals, depth)?.unwrap_or(Value::Null);
        out.insert(key, v);
    }
    Ok(Value::Object(out))
}

/// resource.Quantity: `message Quantity { optional string string = 1; }`.
fn quantity(buf: &[u8]) -> Result<String, ProtobufError> {
    let mut r = Reader::new(buf);
    let mut out = "0".to_string();
    while let Some((num, wt)) = r.tag("Quantity")? {
        match (num, wt) {
            (1, LEN) => out = String::from_utf8_lossy(r.bytes()?).into_owned(),
            (1, _) => return Err(wrong(wt, "String")),
            _ => r.skip(wt)?,
        }
    }
    Ok(out)
}

/// intstr.IntOrString: `type` (0 int, 1 string), `intVal`, `strVal`.
fn int_or_string(buf: &[u8]) -> Result<Value, ProtobufError> {
    let mut r = Reader::new(buf);
    let (mut ty, mut int, mut text) = (0u64, 0i32, String::new());
    while let Some((num, wt)) = r.tag("IntOrString")? {
        match (num, wt) {
            (1, VARINT) => ty = r.varint()?,
            (2, VARINT) => int = r.varint()? as i32,
            (3, LEN) => text = String::from_utf8_lossy(r.bytes()?).into_owned(),
            (1, _) => return Err(wrong(wt, "Type")),
            (2, _) => return Err(wrong(wt, "IntVal")),
            (3, _) => return Err(wrong(wt, "StrVal")),
            _ => r.skip(wt)?,
        }
    }
    match ty {
        0 => Ok(json!(int)),
        1 => Ok(json!(text)),
        _ => Err(ProtobufError::IntOrStringType),
    }
}

/// metav1.Time and MicroTime: `seconds`, `nanos`; an empty message is the zero time. Time
/// keeps whole seconds, as the Go decoder does.
fn timestamp(buf: &[u8], micro: bool) -> Result<Option<String>, ProtobufError> {
    if buf.is_empty() {
        return Ok(None);
    }
    let mut r = Reader::new(buf);
    let (mut secs, mut nanos) = (0i64, 0i32);
    while let Some((num, wt)) = r.tag("Timestamp")? {
        match (num, wt) {
            (1, VARINT) => secs = r.varint()? as i64,
            (2, VARINT) => nanos = r.varint()? as i32,
            (1, _) => return Err(wrong(wt, "Seconds")),
            (2, _) => return Err(wrong(wt, "Nanos")),
            _ => r.skip(wt)?,
        }
    }
    let nanos = if micro { i64::from(nanos) } else { 0 };
    let t = DateTime::from_timestamp(secs, 0)
        .and_then(|t| t.checked_add_signed(TimeDelta::nanoseconds(nanos)))
        .ok_or(ProtobufError::TimeRange)?;
    let format = if micro {
        SecondsFormat::Micros
    } else {
        SecondsFormat::Secs
    };
    Ok(Some(t.to_rfc3339_opts(format, true)))
}

/// metav1.FieldsV1: `message FieldsV1 { optional bytes Raw = 1; }` holding JSON.
fn fields_v1(buf: &[u8]) -> Result<Option<Value>, ProtobufError> {
    let mut r = Reader::new(buf);
    let mut raw = None;
    while let Some((num, wt)) = r.tag("FieldsV1")? {
        match (num, wt) {
            (1, LEN) => raw = Some(r.bytes()?),
            (1, _) => return Err(wrong(wt, "Raw")),
            _ => r.skip(wt)?,
        }
    }
    match raw {
        None => Ok(None),
        Some(b) => serde_json::from_slice(b)
            .map(Some)
            .map_err(|e| ProtobufError::FieldsV1(e.to_string())),
    }
}

fn wrong(wire: u8, field: &str) -> ProtobufError {
    ProtobufError::WrongWireType {
        wire,
        field: field.to_string(),
    }
}
