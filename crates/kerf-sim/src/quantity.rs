//! Kubernetes quantities as the API server reads them: `500m`, `2Gi`, `1e3`.

use serde_json::Value;

/// Parses a Kubernetes quantity into base units (cores, bytes).
pub fn quantity(v: &Value) -> Option<f64> {
    let s = match v {
        Value::String(s) => s.trim().to_string(),
        Value::Number(n) => return n.as_f64(),
        _ => return None,
    };
    let suffixes: [(&str, f64); 14] = [
        ("Ki", 1024.0),
        ("Mi", 1024f64.powi(2)),
        ("Gi", 1024f64.powi(3)),
        ("Ti", 1024f64.powi(4)),
        ("Pi", 1024f64.powi(5)),
        ("Ei", 1024f64.powi(6)),
        ("n", 1e-9),
        ("u", 1e-6),
        ("m", 1e-3),
        ("k", 1e3),
        ("M", 1e6),
        ("G", 1e9),
        ("T", 1e12),
        ("P", 1e15),
    ];
    for (suf, mult) in suffixes {
        if let Some(num) = s.strip_suffix(suf) {
            return num.parse::<f64>().ok().map(|n| n * mult);
        }
    }
    if let Some(num) = s.strip_suffix('E') {
        return num.parse::<f64>().ok().map(|n| n * 1e18);
    }
    s.parse::<f64>().ok()
}
