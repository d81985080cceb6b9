//! Parsers of single setting values: names, URLs, numbers, sizes, addresses, durations,
//! freeze windows and the clusterDefaults file. Each error names the flag and the value.

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::path::Path;
use std::time::Duration;

use kerf_api::policy::{RightsizingPolicySpec, Window};
use kerf_api::rsr::RecommendationSource;
use kerf_decide::duration::{DurationError, format_go_duration, parse_go_duration};
use kerf_decide::window::parse_window;
use serde_json::Value;

use super::{MAX_WINDOWS, NodeSelector, SettingsError, Tolerance};

/// The cluster name: a DNS subdomain.
pub(crate) fn parse_cluster_name(s: &str) -> Result<String, SettingsError> {
    let ok = !s.is_empty() && s.len() <= 253 && s.split('.').all(is_dns_label);
    if ok {
        Ok(s.to_owned())
    } else {
        Err(SettingsError::invalid(
            "cluster-name",
            s,
            "must be a DNS subdomain (lowercase letters, digits, '-' and '.')",
        ))
    }
}

/// The recommendation source: one of [`RecommendationSource::ALL`] by name; unset or empty
/// is `hub` (whether a hub is then set is checked by `Settings::from_args_holding`).
pub(crate) fn parse_recommendation_source(
    s: Option<&str>,
) -> Result<RecommendationSource, SettingsError> {
    let Some(s) = s.filter(|s| !s.trim().is_empty()) else {
        return Ok(RecommendationSource::Hub);
    };
    RecommendationSource::from_name(s.trim()).ok_or_else(|| {
        let names: Vec<&str> = RecommendationSource::ALL
            .iter()
            .map(|v| v.as_str())
            .collect();
        SettingsError::invalid(
            "recommendation-source",
            s,
            format!("must be one of {}", names.join(", ")),
        )
    })
}

/// A DNS label: lowercase letters, digits and `-`, at most 63.
pub(crate) fn is_dns_label(s: &str) -> bool {
    !s.is_empty()
        && s.len() <= 63
        && s.bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
        && !s.starts_with('-')
        && !s.ends_with('-')
}

/// A DNS subdomain: dot-separated DNS labels, at most 253.
pub(crate) fn is_dns_subdomain(s: &str) -> bool {
    s.len() <= 253 && s.split('.').all(is_dns_label)
}

/// An optional http(s) URL with a host; the trailing slash is dropped.
pub(crate) fn opt_url(
    flag: &'static str,
    s: Option<&str>,
) -> Result<Option<String>, SettingsError> {
    let Some(s) = s.map(str::trim).filter(|s| !s.is_empty()) else {
        return Ok(None);
    };
    let rest = s
        .strip_prefix("https://")
        .or_else(|| s.strip_prefix("http://"));
    match rest {
        Some(r) if !r.is_empty() && !r.starts_with('/') && !r.contains(char::is_whitespace) => {
            Ok(Some(s.trim_end_matches('/').to_owned()))
        }
        _ => Err(SettingsError::invalid(
            flag,
            s,
            "must be an http:// or https:// URL with a host",
        )),
    }
}

/// Parses the tolerance: a decimal percentage with at most 3 decimals, 0 < t < 100.
pub fn parse_tolerance(s: &str) -> Result<Tolerance, SettingsError> {
    let err = |reason: &str| SettingsError::invalid("tolerance", s, reason);
    let t = s.trim().trim_end_matches('%');
    let (int, frac) = t.split_once('.').unwrap_or((t, ""));
    let digits = |d: &str| d.bytes().all(|b| b.is_ascii_digit());
    if int.is_empty() && frac.is_empty() || !digits(int) || !digits(frac) {
        return Err(err("must be a decimal percentage such as 5 or 2.5"));
    }
    if frac.len() > 3 {
        return Err(err("must have at most 3 decimals"));
    }
    let int: u64 = if int.is_empty() {
        0
    } else if int.len() > 3 {
        return Err(err("must be between 0 and 100 (exclusive)"));
    } else {
        int.parse()
            .map_err(|_| err("must be a decimal percentage such as 5 or 2.5"))?
    };
    let frac_milli: u64 = format!("{frac:0<3}").parse().unwrap_or(0);
    let milli = int * 1000 + frac_milli;
    if milli == 0 || milli >= 100_000 {
        return Err(err("must be between 0 and 100 (exclusive)"));
    }
    Ok(Tolerance {
        percent_milli: u32::try_from(milli).map_err(|_| err("too large"))?,
    })
}

/// Parses one `key=value[,key=value]` selector.
pub fn parse_node_selector(s: &str) -> Result<NodeSelector, SettingsError> {
    let err = |reason: String| SettingsError::invalid("unsupported-node-selector", s, reason);
    let mut pairs = BTreeMap::new();
    for part in s.split(',').map(str::trim) {
        let Some((k, v)) = part.split_once('=') else {
            return Err(err(format!("{part:?} is not key=value")));
        };
        let (k, v) = (k.trim(), v.trim());
        if !is_label_key(k) {
            return Err(err(format!("{k:?} is not a label key")));
        }
        if !is_label_value(v) {
            return Err(err(format!("{v:?} is not a label value")));
        }
        pairs.insert(k.to_owned(), v.to_owned());
    }
    Ok(NodeSelector(pairs))
}

fn is_label_name(s: &str) -> bool {
    !s.is_empty() && is_label_value(s)
}

fn is_label_value(s: &str) -> bool {
    s.len() <= 63
        && s.bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.'))
        && s.bytes().next().is_none_or(|b| b.is_ascii_alphanumeric())
        && s.bytes().last().is_none_or(|b| b.is_ascii_alphanumeric())
}

fn is_label_key(k: &str) -> bool {
    match k.split_once('/') {
        Some((prefix, name)) => is_dns_subdomain(prefix) && is_label_name(name),
        None => is_label_name(k),
    }
}

/// A whole number of at least 1.
pub(crate) fn parse_count(flag: &'static str, s: &str) -> Result<u32, SettingsError> {
    match s.trim().parse::<u32>() {
        Ok(n) if n >= 1 => Ok(n),
        _ => Err(SettingsError::invalid(
            flag,
            s,
            "must be a whole number of at least 1",
        )),
    }
}

/// Parses a byte size: a number of bytes or a number with `Ki`, `Mi` or `Gi`.
pub fn parse_bytes(flag: &'static str, s: &str) -> Result<u64, SettingsError> {
    let t = s.trim();
    let (num, mult) = [("Ki", 1u64 << 10), ("Mi", 1 << 20), ("Gi", 1 << 30)]
        .into_iter()
        .find_map(|(suffix, m)| t.strip_suffix(suffix).map(|n| (n, m)))
        .unwrap_or((t, 1));
    match num.parse::<u64>().ok().and_then(|n| n.checked_mul(mult)) {
        Some(n) if n >= 1024 => Ok(n),
        Some(_) => Err(SettingsError::invalid(flag, s, "must be at least 1Ki")),
        None => Err(SettingsError::invalid(
            flag,
            s,
            "must be a number of bytes, optionally with Ki, Mi or Gi",
        )),
    }
}

/// Parses a listen address; an empty host (`:8443`) listens on every IPv4 address.
pub fn parse_addr(flag: &'static str, s: &str) -> Result<SocketAddr, SettingsError> {
    let t = s.trim();
    let full = if t.starts_with(':') {
        format!("0.0.0.0{t}")
    } else {
        t.to_owned()
    };
    full.parse()
        .map_err(|_| SettingsError::invalid(flag, s, "must be host:port with an IP address host"))
}

/// A tracing EnvFilter directive string.
pub(crate) fn parse_log_filter(s: &str) -> Result<String, SettingsError> {
    tracing_subscriber::EnvFilter::try_new(s)
        .map(|_| s.to_owned())
        .map_err(|e| SettingsError::invalid("log-filter", s, e.to_string()))
}

/// Parses a Go duration (`kerf_decide::duration::parse_go_duration`, the grammar of Go's
/// `time.ParseDuration`; no whitespace is trimmed) that must not be negative.
pub(crate) fn duration(flag: &'static str, s: &str) -> Result<Duration, SettingsError> {
    let parsed = parse_go_duration(s).map_err(|DurationError::Invalid { reason, .. }| {
        SettingsError::invalid(
            flag,
            s,
            format!("must be a Go duration such as 30s, 2m or 1h30m ({reason})"),
        )
    })?;
    parsed
        .to_std()
        .map_err(|_| SettingsError::invalid(flag, s, "must not be negative"))
}

/// A Go duration of at least one second.
pub(crate) fn positive_duration(flag: &'static str, s: &str) -> Result<Duration, SettingsError> {
    match duration(flag, s)? {
        d if d >= Duration::from_secs(1) => Ok(d),
        _ => Err(SettingsError::invalid(flag, s, "must be at least 1s")),
    }
}

/// Formats a duration in Go syntax (`1h30m`, `45s`, `500ms`), as
/// `kerf_decide::duration::format_go_duration` writes it.
pub fn format_duration(d: Duration) -> String {
    chrono::Duration::from_std(d)
        .map(format_go_duration)
        .unwrap_or_else(|_| format!("{}s", d.as_secs()))
}

fn read_file(flag: &'static str, path: &Path) -> Result<String, SettingsError> {
    std::fs::read_to_string(path).map_err(|source| SettingsError::Unreadable {
        flag,
        path: path.to_owned(),
        source,
    })
}

/// Reads freeze.windows: inline JSON (starting with `[`) or a YAML file with a list.
pub fn parse_freeze_windows(v: Option<&str>) -> Result<Vec<Window>, SettingsError> {
    let Some(v) = v.map(str::trim).filter(|v| !v.is_empty()) else {
        return Ok(Vec::new());
    };
    let text = if v.starts_with('[') {
        v.to_owned()
    } else {
        read_file("freeze-windows", Path::new(v))?
    };
    freeze_windows_from_text(v, &text)
}

/// Reads freeze.windows from the YAML (or JSON) `text` of a list; errors show `v`.
pub fn freeze_windows_from_text(v: &str, text: &str) -> Result<Vec<Window>, SettingsError> {
    let de = serde_yaml::Deserializer::from_str(text);
    let windows: Vec<Window> = serde_path_to_error::deserialize(de).map_err(|e| {
        SettingsError::invalid(
            "freeze-windows",
            v,
            format!("at {}: {}", e.path(), e.inner()),
        )
    })?;
    if windows.len() > MAX_WINDOWS {
        return Err(SettingsError::invalid(
            "freeze-windows",
            v,
            format!("holds {} windows; at most {MAX_WINDOWS}", windows.len()),
        ));
    }
    for (i, w) in windows.iter().enumerate() {
        if let Err(e) = parse_window(w) {
            return Err(SettingsError::invalid(
                "freeze-windows",
                v,
                format!("window {i}: {e}"),
            ));
        }
    }
    Ok(windows)
}

/// Reads the clusterDefaults file: the policy fields of a RightsizingPolicy spec, without
/// `selector` and `priority`.
pub fn read_cluster_defaults(
    path: Option<&Path>,
) -> Result<Option<RightsizingPolicySpec>, SettingsError> {
    const FLAG: &str = "cluster-defaults-file";
    let Some(path) = path else {
        return Ok(None);
    };
    let text = read_file(FLAG, path)?;
    cluster_defaults_from_text(&path.display().to_string(), &text)
}

/// Reads the clusterDefaults YAML `text`; errors show `shown` as the flag's value.
pub fn cluster_defaults_from_text(
    shown: &str,
    text: &str,
) -> Result<Option<RightsizingPolicySpec>, SettingsError> {
    const FLAG: &str = "cluster-defaults-file";
    if text.trim().is_empty() {
        return Ok(None);
    }
    let de = serde_yaml::Deserializer::from_str(text);
    let spec: RightsizingPolicySpec = serde_path_to_error::deserialize(de).map_err(|e| {
        SettingsError::invalid(FLAG, shown, format!("at {}: {}", e.path(), e.inner()))
    })?;
    if spec.selector.is_some() || spec.priority.is_some() {
        return Err(SettingsError::invalid(
            FLAG,
            shown,
            "selector and priority belong to a RightsizingPolicy, not to clusterDefaults",
        ));
    }
    let unknown = unknown_keys_in(text, &spec)
        .map_err(|reason| SettingsError::invalid(FLAG, shown, reason))?;
    if !unknown.is_empty() {
        return Err(SettingsError::invalid(
            FLAG,
            shown,
            format!(
                "unknown key {}: the keys are the policy fields of a RightsizingPolicy spec",
                unknown.join(", ")
            ),
        ));
    }
    Ok(Some(spec))
}

/// The keys of the YAML `text` that `spec`, read from it, does not hold: keys no field
/// reads (a typo such as `guardrail`), as dotted paths. Keys with an empty value (null,
/// `[]`, `{}`) are not reported, since a field may leave those out when written.
fn unknown_keys_in(text: &str, spec: &RightsizingPolicySpec) -> Result<Vec<String>, String> {
    let input: Value = serde_yaml::from_str(text).map_err(|e| e.to_string())?;
    let known = serde_json::to_value(spec).map_err(|e| e.to_string())?;
    let mut out = Vec::new();
    unknown_keys(&input, &known, "", &mut out);
    Ok(out)
}

fn unknown_keys(input: &Value, known: &Value, path: &str, out: &mut Vec<String>) {
    let join = |key: &str| {
        if path.is_empty() {
            key.to_owned()
        } else {
            format!("{path}.{key}")
        }
    };
    match (input, known) {
        (Value::Object(given), Value::Object(read)) => {
            for (key, v) in given {
                match read.get(key) {
                    Some(r) => unknown_keys(v, r, &join(key), out),
                    None if is_empty(v) => {}
                    None => out.push(join(key)),
                }
            }
        }
        (Value::Array(given), Value::Array(read)) => {
            for (i, (v, r)) in given.iter().zip(read).enumerate() {
                unknown_keys(v, r, &format!("{path}[{i}]"), out);
            }
        }
        _ => {}
    }
}

fn is_empty(v: &Value) -> bool {
    match v {
        Value::Null => true,
        Value::Array(a) => a.is_empty(),
        Value::Object(o) => o.is_empty(),
        _ => false,
    }
}
