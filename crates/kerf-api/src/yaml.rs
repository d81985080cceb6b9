//! A small YAML writer for JSON values, so the CRD YAML needs no YAML library at run time.
//! Strings are always quoted with JSON escapes (valid YAML), keys only when needed.

use serde_json::Value;

/// Writes a JSON value as block-style YAML.
pub fn to_yaml(v: &Value) -> String {
    let mut out = String::new();
    write_value(&mut out, v, 0, false);
    out
}

fn key(k: &str) -> String {
    let plain = !k.is_empty()
        && k.chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.' | '/'))
        && !k.starts_with(['-', '.'])
        && !matches!(
            k,
            "true" | "false" | "null" | "yes" | "no" | "on" | "off" | "y" | "n"
        );
    if plain {
        k.to_owned()
    } else {
        scalar(&Value::String(k.to_owned()))
    }
}

fn scalar(v: &Value) -> String {
    match v {
        Value::String(_) | Value::Number(_) | Value::Bool(_) | Value::Null => {
            serde_json::to_string(v).unwrap_or_default()
        }
        Value::Array(a) if a.is_empty() => "[]".to_owned(),
        Value::Object(o) if o.is_empty() => "{}".to_owned(),
        _ => String::new(),
    }
}

fn is_block(v: &Value) -> bool {
    matches!(v, Value::Array(a) if !a.is_empty()) || matches!(v, Value::Object(o) if !o.is_empty())
}

fn write_value(out: &mut String, v: &Value, indent: usize, in_list: bool) {
    let pad = " ".repeat(indent);
    match v {
        Value::Object(o) if !o.is_empty() => {
            for (i, (k, val)) in o.iter().enumerate() {
                if !(in_list && i == 0) {
                    out.push_str(&pad);
                }
                out.push_str(&key(k));
                out.push(':');
                if is_block(val) {
                    out.push('\n');
                    let child = if matches!(val, Value::Array(_)) {
                        indent
                    } else {
                        indent + 2
                    };
                    write_value(out, val, child, false);
                } else {
                    out.push(' ');
                    out.push_str(&scalar(val));
                    out.push('\n');
                }
            }
        }
        Value::Array(a) if !a.is_empty() => {
            for item in a {
                out.push_str(&pad);
                out.push_str("- ");
                if is_block(item) {
                    if matches!(item, Value::Array(_)) {
                        out.push('\n');
                        write_value(out, item, indent + 2, false);
                    } else {
                        write_value(out, item, indent + 2, true);
                    }
                } else {
                    out.push_str(&scalar(item));
                    out.push('\n');
                }
            }
        }
        _ => {
            out.push_str(&pad);
            out.push_str(&scalar(v));
            out.push('\n');
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn yaml_round_trips_through_a_yaml_parser() {
        let v = serde_json::json!({
            "a": {"b": [1, "two", {"c": true, "d": [], "e": {}}], "on": null},
            "x-kubernetes-validations": [{"rule": "self.a < \"b\"\nnext", "message": "m: n"}],
            "list": [[1, 2], []],
        });
        let back: Value = serde_yaml::from_str(&to_yaml(&v)).unwrap();
        assert_eq!(back, v);
    }
}
