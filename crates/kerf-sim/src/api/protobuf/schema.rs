//! The protobuf schema of the built-in kinds (`schema.txt`, written by `gen_schema.py` from
//! the Go types of k8s.io/api): per message, its fields' numbers, JSON names, Go shapes
//! (pointer, list, map) and `omitempty`, which is what the Go JSON form of a decoded
//! object depends on.

use std::collections::HashMap;
use std::sync::OnceLock;

use super::ProtobufError;

const TEXT: &str = include_str!("schema.txt");

/// The element type of a field.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Base {
    /// A string (or a named string type).
    Str,
    /// A bool.
    Bool,
    /// An int32.
    I32,
    /// An int64.
    I64,
    /// `[]byte`: base64 in JSON.
    Bytes,
    /// resource.Quantity: a string in JSON.
    Quantity,
    /// intstr.IntOrString: a number or a string in JSON.
    IntOrString,
    /// metav1.Time: RFC 3339 seconds in JSON.
    Time,
    /// metav1.MicroTime: RFC 3339 microseconds in JSON.
    MicroTime,
    /// metav1.FieldsV1: the JSON it holds.
    FieldsV1,
    /// A message of the schema, by index.
    Msg(usize),
}

impl Base {
    /// Whether the value is a varint on the wire.
    pub fn is_varint(self) -> bool {
        matches!(self, Base::Bool | Base::I32 | Base::I64)
    }
}

/// How a field holds its element type in Go.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Shape {
    /// A value.
    Plain,
    /// A pointer: set (even to zero) or nil.
    Ptr,
    /// A slice (repeated).
    List,
    /// A `map[string]T` (repeated key/value entries).
    Map,
}

/// One field of a message.
#[derive(Debug, Clone)]
pub struct Field {
    /// Field number.
    pub num: u32,
    /// JSON name; `.` for an embedded struct whose fields are inlined.
    pub json: &'static str,
    /// Go field name where it is not the capitalized JSON name.
    go: Option<&'static str>,
    /// Element type.
    pub base: Base,
    /// Go shape.
    pub shape: Shape,
    /// `json:",omitempty"`.
    pub omitempty: bool,
}

impl Field {
    /// The Go field name, as the decoder's errors name it.
    pub fn go_name(&self) -> String {
        if let Some(go) = self.go {
            return go.to_string();
        }
        let mut chars = self.json.chars();
        chars
            .next()
            .map(|c| c.to_ascii_uppercase().to_string() + chars.as_str())
            .unwrap_or_default()
    }

    /// Whether the field is an inlined embedded struct.
    pub fn inline(&self) -> bool {
        self.json == "."
    }
}

/// One message (Go struct).
#[derive(Debug, Clone)]
pub struct Message {
    /// `pkg/version.Name`, e.g. `apps/v1.DeploymentSpec`.
    pub name: &'static str,
    /// Fields in Go order.
    pub fields: Vec<Field>,
}

impl Message {
    /// The Go type name, as the decoder's errors name it.
    pub fn go_name(&self) -> &'static str {
        self.name.rsplit('.').next().unwrap_or(self.name)
    }
}

/// All messages and the kinds they encode.
#[derive(Debug)]
pub struct Schema {
    /// Messages, referenced by index.
    pub messages: Vec<Message>,
    kinds: Vec<(&'static str, &'static str, usize)>,
}

impl Schema {
    /// The message of an `apiVersion`/`kind`.
    pub fn kind(&self, api_version: &str, kind: &str) -> Option<usize> {
        self.kinds
            .iter()
            .find(|(v, k, _)| *v == api_version && *k == kind)
            .map(|(_, _, m)| *m)
    }
}

/// The schema, parsed on first use.
pub fn get() -> Result<&'static Schema, ProtobufError> {
    static SCHEMA: OnceLock<Result<Schema, String>> = OnceLock::new();
    SCHEMA
        .get_or_init(|| parse(TEXT))
        .as_ref()
        .map_err(|e| ProtobufError::Schema(e.clone()))
}

fn parse(text: &'static str) -> Result<Schema, String> {
    let lines: Vec<&'static str> = text
        .lines()
        .filter(|l| !l.trim().is_empty() && !l.starts_with('#'))
        .collect();
    let index: HashMap<&str, usize> = lines
        .iter()
        .filter_map(|l| l.strip_prefix("type "))
        .enumerate()
        .map(|(i, name)| (name.trim(), i))
        .collect();
    let mut messages: Vec<Message> = Vec::new();
    let mut kinds = Vec::new();
    for line in lines {
        if let Some(name) = line.strip_prefix("type ") {
            messages.push(Message {
                name: name.trim(),
                fields: Vec::new(),
            });
        } else if let Some(rest) = line.strip_prefix("kind ") {
            let w: Vec<&'static str> = rest.split_whitespace().collect();
            let [api_version, kind, msg] = w[..] else {
                return Err(format!("bad kind line: {line}"));
            };
            let msg = *index.get(msg).ok_or(format!("unknown type {msg}"))?;
            kinds.push((api_version, kind, msg));
        } else {
            let field = parse_field(line, &index)?;
            messages
                .last_mut()
                .ok_or(format!("field before any type: {line}"))?
                .fields
                .push(field);
        }
    }
    Ok(Schema { messages, kinds })
}

fn parse_field(line: &'static str, index: &HashMap<&str, usize>) -> Result<Field, String> {
    let mut words = line.split_whitespace();
    let (Some(num), Some(json), Some(ty)) = (words.next(), words.next(), words.next()) else {
        return Err(format!("bad field line: {line}"));
    };
    let num = num
        .parse()
        .map_err(|_| format!("bad field number: {line}"))?;
    let (mut omitempty, mut go) = (false, None);
    for w in words {
        match w {
            "o" => omitempty = true,
            _ => go = Some(w.strip_prefix("go=").ok_or(format!("bad flag: {line}"))?),
        }
    }
    let (shape, elem) = if let Some(e) = ty.strip_prefix('*') {
        (Shape::Ptr, e)
    } else if let Some(e) = ty.strip_prefix("[]") {
        (Shape::List, e)
    } else if let Some(e) = ty.strip_prefix("{}") {
        (Shape::Map, e)
    } else {
        (Shape::Plain, ty)
    };
    let base = match elem {
        "string" => Base::Str,
        "bool" => Base::Bool,
        "int32" => Base::I32,
        "int64" => Base::I64,
        "bytes" => Base::Bytes,
        "Quantity" => Base::Quantity,
        "IntOrString" => Base::IntOrString,
        "Time" => Base::Time,
        "MicroTime" => Base::MicroTime,
        "FieldsV1" => Base::FieldsV1,
        msg => Base::Msg(*index.get(msg).ok_or(format!("unknown type {msg}"))?),
    };
    Ok(Field {
        num,
        json,
        go,
        base,
        shape,
        omitempty,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_schema_parses_and_names_every_served_kind() {
        let s = get().expect("schema");
        for (v, k) in [
            ("v1", "Namespace"),
            ("v1", "Pod"),
            ("apps/v1", "Deployment"),
            ("policy/v1", "PodDisruptionBudget"),
            ("autoscaling/v1", "Scale"),
        ] {
            assert!(s.kind(v, k).is_some(), "{v} {k}");
        }
        let spec = &s.messages[s
            .messages
            .iter()
            .position(|m| m.name == "apps/v1.DeploymentSpec")
            .expect("spec")];
        let replicas = spec
            .fields
            .iter()
            .find(|f| f.json == "replicas")
            .expect("replicas");
        assert_eq!(
            (replicas.num, replicas.shape, replicas.base),
            (1, Shape::Ptr, Base::I32)
        );
        let paused = spec
            .fields
            .iter()
            .find(|f| f.json == "paused")
            .expect("paused");
        assert_eq!((paused.shape, paused.omitempty), (Shape::Plain, true));
    }

    #[test]
    fn go_field_names_follow_the_json_name_or_the_override() {
        let s = get().expect("schema");
        let meta = s
            .messages
            .iter()
            .find(|m| m.name == "meta/v1.ObjectMeta")
            .expect("meta");
        let names: Vec<String> = meta.fields.iter().take(5).map(Field::go_name).collect();
        assert_eq!(
            names,
            ["Name", "GenerateName", "Namespace", "SelfLink", "UID"]
        );
        assert_eq!(meta.go_name(), "ObjectMeta");
    }

    #[test]
    fn the_message_graph_has_no_cycles() {
        let s = get().expect("schema");
        fn depth(s: &Schema, m: usize, seen: &mut Vec<usize>) -> usize {
            assert!(!seen.contains(&m), "cycle through {}", s.messages[m].name);
            seen.push(m);
            let d = s.messages[m]
                .fields
                .iter()
                .filter_map(|f| match f.base {
                    Base::Msg(i) => Some(depth(s, i, seen)),
                    _ => None,
                })
                .max()
                .unwrap_or(0);
            seen.pop();
            d + 1
        }
        for m in 0..s.messages.len() {
            assert!(depth(s, m, &mut Vec::new()) < super::super::MAX_DEPTH as usize);
        }
    }
}
