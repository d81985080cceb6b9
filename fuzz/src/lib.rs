//! Helpers shared by the fuzz targets: reading an input as lines of text and as an
//! instant.

use chrono::{DateTime, Utc};

/// The input as UTF-8 text, or `None` (the agent's parsers all take `&str`).
pub fn text(data: &[u8]) -> Option<&str> {
    std::str::from_utf8(data).ok()
}

/// The `i`-th line of `lines`; an empty or missing line is `None`.
pub fn field(lines: &[&str], i: usize) -> Option<String> {
    lines
        .get(i)
        .filter(|l| !l.is_empty())
        .map(|l| (*l).to_owned())
}

/// An instant from a line holding Unix seconds; 2026-03-29T00:30:00Z (the night Europe
/// moves its clocks) when the line is missing or out of chrono's range.
pub fn instant(line: Option<&str>) -> DateTime<Utc> {
    line.and_then(|l| l.trim().parse::<i64>().ok())
        .and_then(|s| DateTime::from_timestamp(s, 0))
        .unwrap_or_else(|| DateTime::from_timestamp(1_774_744_200, 0).unwrap_or_default())
}
