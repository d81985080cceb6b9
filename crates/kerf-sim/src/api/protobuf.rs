//! Protobuf request bodies (`application/vnd.kubernetes.protobuf`), which client-go's typed
//! clients send for the built-in kinds (`kubectl create namespace|deployment|pdb|...`).
//!
//! A body is the magic `k8s\0` and a `runtime.Unknown` naming the `apiVersion`/`kind` and
//! holding the encoded object. The object is decoded with the schema of `schema.txt` into
//! the JSON the Go object marshals to, so the rest of the server handles it as a JSON body.
//! Malformed bodies get the real server's 400s, worded by the Go decoder. Answers stay JSON.

mod render;
pub mod schema;
mod wire;

use serde_json::{Value, json};

use crate::store::ApiError;
use wire::{LEN, Reader};

/// The media type of Kubernetes protobuf.
pub const MEDIA_TYPE: &str = "application/vnd.kubernetes.protobuf";

/// Nesting limit of decoded messages (the schema's own depth is far below).
pub const MAX_DEPTH: u32 = 64;

const MAGIC: &[u8; 4] = b"k8s\x00";

/// Why a protobuf body does not decode; the texts are the Go decoder's.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ProtobufError {
    /// An empty body.
    #[error("empty data")]
    EmptyData,
    /// The magic alone.
    #[error("empty body")]
    EmptyBody,
    /// No `k8s\0` magic.
    #[error(
        "provided data does not appear to be a protobuf message, expected prefix [107 56 115 0]"
    )]
    BadPrefix,
    /// The data ends inside a value.
    #[error("unexpected EOF")]
    UnexpectedEof,
    /// A varint longer than ten bytes.
    #[error("proto: integer overflow")]
    IntOverflow,
    /// A length that does not fit.
    #[error("proto: negative length found during unmarshaling")]
    InvalidLength,
    /// A known field with another wire type.
    #[error("proto: wrong wireType = {wire} for field {field}")]
    WrongWireType {
        /// The wire type found.
        wire: u8,
        /// The Go field name.
        field: String,
    },
    /// An end-group tag outside a group.
    #[error("proto: {0}: wiretype end group for non-group")]
    EndGroup(String),
    /// Field number zero or negative.
    #[error("proto: {message}: illegal tag {num} (wire type {wire})")]
    IllegalTag {
        /// The Go type name.
        message: String,
        /// The field number.
        num: i32,
        /// The whole tag.
        wire: u64,
    },
    /// Wire type 6 or 7.
    #[error("proto: illegal wireType {0}")]
    IllegalWireType(u8),
    /// An end group without a start.
    #[error("proto: unexpected end of group")]
    UnexpectedEndOfGroup,
    /// An IntOrString of neither type.
    #[error("impossible IntOrString.Type")]
    IntOrStringType,
    /// A time out of range.
    #[error("proto: Timestamp: time out of range")]
    TimeRange,
    /// FieldsV1 holding no JSON.
    #[error("proto: FieldsV1: {0}")]
    FieldsV1(String),
    /// Nesting past [`MAX_DEPTH`].
    #[error("proto: message nested too deeply")]
    TooDeep,
    /// The built-in schema does not parse.
    #[error("protobuf schema: {0}")]
    Schema(String),
}

/// Whether objects of `api_version`/`kind` have a protobuf encoding the server decodes
/// (the built-in kinds; not custom resources).
pub fn has_encoding(api_version: &str, kind: &str) -> bool {
    schema::get().is_ok_and(|s| s.kind(api_version, kind).is_some())
}

/// Decodes a protobuf body sent for an object of `api_version`/`kind` into its JSON form,
/// or answers the real server's 400 for it.
pub fn decode(body: &[u8], api_version: &str, kind: &str) -> Result<Value, ApiError> {
    let s = schema::get().map_err(|e| ApiError::new(500, "InternalError", e.to_string(), None))?;
    let unknown = envelope(body).map_err(|e| {
        ApiError::bad_request(format!(
            "the object provided is unrecognized (must be of type {kind}): {e} ({})",
            summary(body)
        ))
    })?;
    let (group, version) = split_api_version(&unknown.api_version)
        .filter(|(_, v)| !v.is_empty())
        .unwrap_or_else(|| split_api_version(api_version).unwrap_or_default());
    let data_kind = if unknown.kind.is_empty() {
        kind
    } else {
        unknown.kind.as_str()
    };
    let data_api_version = if group.is_empty() {
        version.to_string()
    } else {
        format!("{group}/{version}")
    };
    let cannot = |e: String| {
        ApiError::bad_request(format!(
            "{data_kind} in version {version:?} cannot be handled as a {kind}: {e}"
        ))
    };
    let Some(msg) = s.kind(&data_api_version, data_kind) else {
        return Err(cannot(format!(
            "no kind {data_kind:?} is registered for version {data_api_version:?} in scheme \"pkg/api/legacyscheme/scheme.go:30\""
        )));
    };
    let mut obj = render::message(s, msg, unknown.raw, 0).map_err(|e| cannot(e.to_string()))?;
    if (data_api_version.as_str(), data_kind) != (api_version, kind) {
        return Err(cannot(format!(
            "converting ({version}.{data_kind}) to ({}.{kind}): unknown conversion",
            internal_package(api_version)
        )));
    }
    obj.insert("apiVersion".into(), json!(data_api_version));
    obj.insert("kind".into(), json!(data_kind));
    Ok(Value::Object(obj))
}

/// The `runtime.Unknown` of a body.
#[derive(Debug, Default)]
struct Unknown<'a> {
    api_version: String,
    kind: String,
    raw: &'a [u8],
}

fn envelope(body: &[u8]) -> Result<Unknown<'_>, ProtobufError> {
    if body.is_empty() {
        return Err(ProtobufError::EmptyData);
    }
    let data = body.strip_prefix(MAGIC).ok_or(ProtobufError::BadPrefix)?;
    if data.is_empty() {
        return Err(ProtobufError::EmptyBody);
    }
    let mut out = Unknown::default();
    let mut r = Reader::new(data);
    while let Some((num, wt)) = r.tag("Unknown")? {
        let name = match num {
            1 => "TypeMeta",
            2 => "Raw",
            3 => "ContentEncoding",
            4 => "ContentType",
            _ => {
                r.skip(wt)?;
                continue;
            }
        };
        let value = len_field(&mut r, wt, name)?;
        match num {
            1 => type_meta(value, &mut out)?,
            2 => out.raw = value,
            _ => {}
        }
    }
    Ok(out)
}

/// The bytes of field `name` (wire type `wt`), which must be length-delimited.
fn len_field<'a>(r: &mut Reader<'a>, wt: u8, name: &str) -> Result<&'a [u8], ProtobufError> {
    if wt != LEN {
        return Err(ProtobufError::WrongWireType {
            wire: wt,
            field: name.to_string(),
        });
    }
    r.bytes()
}

fn type_meta(buf: &[u8], out: &mut Unknown<'_>) -> Result<(), ProtobufError> {
    let mut r = Reader::new(buf);
    while let Some((num, wt)) = r.tag("TypeMeta")? {
        let (name, slot) = match num {
            1 => ("APIVersion", &mut out.api_version),
            2 => ("Kind", &mut out.kind),
            _ => {
                r.skip(wt)?;
                continue;
            }
        };
        *slot = String::from_utf8_lossy(len_field(&mut r, wt, name)?).into_owned();
    }
    Ok(())
}

/// `(group, version)` of an apiVersion; `None` when it has more than one `/`.
fn split_api_version(api_version: &str) -> Option<(&str, &str)> {
    match api_version.split_once('/') {
        None => Some(("", api_version)),
        Some((_, v)) if v.contains('/') => None,
        Some((g, v)) => Some((g, v)),
    }
}

/// The Go package of the server's internal version of a group (`core`, `apps`, ...).
fn internal_package(api_version: &str) -> &str {
    match api_version.split_once('/') {
        None => "core",
        Some((g, _)) => g.split('.').next().unwrap_or(g),
    }
}

/// The server's summary of a body in decode errors: its first 30 bytes, as text when it
/// looks like JSON and in hex otherwise.
fn summary(body: &[u8]) -> String {
    let head = &body[..body.len().min(30)];
    let more = if body.len() > 30 { " ..." } else { "" };
    match body.first() {
        None => "<empty>".to_string(),
        Some(b'{') => format!("{}{more}", String::from_utf8_lossy(head)),
        Some(_) => format!("{}{more}", hex::encode(head)),
    }
}

#[cfg(test)]
mod tests;
