//! Integer formats of CRD schemas (`int32`, `int64`): a value of type `integer` that does
//! not fit its format is refused with the real server's words. The API server's OpenAPI
//! validator reports this as a plain error, not a field error, so the cause has no field
//! (`<nil>`) and an empty value:
//! `<nil>: Invalid value: "": Checked value must be of type integer with format int32 in spec.priority`.

use serde_json::Value;

use crate::store::Cause;

/// The cause for `v` at `path` when the schema is an integer with a format it does not fit.
pub fn integer_format_cause(schema: &Value, v: &Value, path: &str) -> Option<Cause> {
    if schema["type"] != "integer" {
        return None;
    }
    let format = schema["format"].as_str()?;
    let fits = match format {
        "int32" => v.as_i64().is_some_and(|n| i32::try_from(n).is_ok()),
        "int64" => v.as_i64().is_some(),
        "uint32" => v.as_u64().is_some_and(|n| u32::try_from(n).is_ok()),
        "uint64" => v.as_u64().is_some(),
        _ => return None,
    };
    (!fits).then(|| {
        (
            "FieldValueInvalid".to_string(),
            "<nil>".to_string(),
            format!(
                "Invalid value: \"\": Checked value must be of type integer with format {format} in {path}"
            ),
        )
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn int32_and_int64_bounds() {
        let int32 = json!({"type": "integer", "format": "int32"});
        assert!(integer_format_cause(&int32, &json!(2_147_483_647), "spec.p").is_none());
        assert!(integer_format_cause(&int32, &json!(-2_147_483_648_i64), "spec.p").is_none());
        let (_, field, msg) =
            integer_format_cause(&int32, &json!(2_147_483_648_i64), "spec.p").expect("refused");
        assert_eq!(field, "<nil>");
        assert_eq!(
            msg,
            "Invalid value: \"\": Checked value must be of type integer with format int32 in spec.p"
        );
        let int64 = json!({"type": "integer", "format": "int64"});
        assert!(integer_format_cause(&int64, &json!(i64::MAX), "spec.p").is_none());
        assert!(integer_format_cause(&int64, &json!(u64::MAX), "spec.p").is_some());
        let plain = json!({"type": "integer"});
        assert!(integer_format_cause(&plain, &json!(u64::MAX), "spec.p").is_none());
    }
}
