//! Kubernetes quantities as exact integers: CPU in millicores, memory in bytes.
//!
//! Parsing accepts every form Kubernetes accepts (`250m`, `2`, `0.5`, `1.5Gi`, `1e3`,
//! `+1k`, `-1Mi`) and rounds up to a whole millicore or byte as Kubernetes does (away
//! from zero). Arithmetic runs on `i128`, so no intermediate step overflows; a result
//! outside `i64` is rejected with the value in the message.

use kerf_api::{Quantity, Resource};

/// Why a quantity could not be read.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum QuantityError {
    /// The text is not a quantity, or its value does not fit.
    #[error("invalid quantity {value:?}: {reason}")]
    Invalid {
        /// The quantity as written.
        value: String,
        /// What is wrong with it.
        reason: String,
    },
}

impl QuantityError {
    /// A short label for metrics and event reasons.
    pub fn category(&self) -> &'static str {
        "InvalidQuantity"
    }
}

/// One MiB in bytes: memory caps round up to it.
pub const MIB: i64 = 1 << 20;

/// Largest decimal exponent worth computing: 10^38 is just below `i128::MAX`.
const MAX_POW10: u32 = 38;

/// The number part of a quantity: `mantissa * 10^exp10`, sign applied.
struct Number {
    mantissa: i128,
    exp10: i32,
}

/// Parses `q` into millicores (CPU) or bytes (memory), rounding up to a whole unit.
pub fn parse_quantity(resource: Resource, q: &str) -> Result<i64, QuantityError> {
    match parse_plain(resource, q) {
        Some(v) => Ok(v),
        None => parse_any(resource, q),
    }
}

/// The common forms (`250m`, `2`, `512Mi`, `1Gi`, `64k`): digits and a suffix, read with
/// `i64` arithmetic. `None` for any other form, and for a value that does not fit, which
/// [`parse_any`] reads (and rejects) the same way.
fn parse_plain(resource: Resource, q: &str) -> Option<i64> {
    let end = q
        .bytes()
        .position(|b| !b.is_ascii_digit())
        .unwrap_or(q.len());
    if end == 0 || end > 18 {
        return None;
    }
    let n: i64 = q.get(..end)?.parse().ok()?;
    let (exp10, exp2) = match q.get(end..)? {
        suffix @ ("" | "m" | "k" | "M" | "G" | "Ki" | "Mi" | "Gi" | "Ti") => {
            suffix_scale(suffix).ok()?
        }
        _ => return None,
    };
    let exp10 = i32::try_from(exp10).ok()?
        + match resource {
            Resource::Cpu => 3,
            Resource::Memory => 0,
        };
    if exp10 < 0 {
        // Memory in thousandths of a byte (exp2 is 0): round up to a whole byte.
        let unit = 10i64.checked_pow(exp10.unsigned_abs())?;
        return Some(n / unit + i64::from(n % unit != 0));
    }
    n.checked_mul(10i64.checked_pow(exp10.unsigned_abs())?)?
        .checked_mul(1i64.checked_shl(exp2)?)
}

/// Reads every form Kubernetes accepts, with `i128` arithmetic.
fn parse_any(resource: Resource, q: &str) -> Result<i64, QuantityError> {
    let bad = |reason: String| QuantityError::Invalid {
        value: q.to_owned(),
        reason,
    };
    let (number, suffix) = split_number(q).map_err(bad)?;
    let (exp10, exp2) = suffix_scale(suffix).map_err(bad)?;
    let unit_exp = match resource {
        Resource::Cpu => 3,
        Resource::Memory => 0,
    };
    let total_exp10 = i64::from(number.exp10) + exp10 + unit_exp;
    let value = scale(number.mantissa, total_exp10, exp2)
        .ok_or_else(|| bad(format!("{resource} value out of range")))?;
    i64::try_from(value).map_err(|_| bad(format!("{resource} value out of range")))
}

/// Parses a [`Quantity`] into millicores (CPU) or bytes (memory).
pub fn parse(resource: Resource, q: &Quantity) -> Result<i64, QuantityError> {
    parse_quantity(resource, q.as_str())
}

/// Splits `q` into its signed decimal number and its suffix.
fn split_number(q: &str) -> Result<(Number, &str), String> {
    if q.is_empty() {
        return Err("empty".to_owned());
    }
    let (negative, rest) = match q.as_bytes()[0] {
        b'-' => (true, &q[1..]),
        b'+' => (false, &q[1..]),
        _ => (false, q),
    };
    let end = rest
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(rest.len());
    let (digits, suffix) = rest.split_at(end);
    let mut number = read_decimal(digits)?;
    if negative {
        number.mantissa = -number.mantissa;
    }
    Ok((number, suffix))
}

/// Reads `123`, `1.5`, `.5` or `5.` into a mantissa and a decimal exponent.
fn read_decimal(digits: &str) -> Result<Number, String> {
    if !digits.bytes().any(|b| b.is_ascii_digit()) {
        return Err("no digits".to_owned());
    }
    let mut mantissa: i128 = 0;
    let mut exp10: i32 = 0;
    let mut seen_point = false;
    for b in digits.bytes() {
        if b == b'.' {
            if seen_point {
                return Err("more than one decimal point".to_owned());
            }
            seen_point = true;
            continue;
        }
        mantissa = mantissa
            .checked_mul(10)
            .and_then(|m| m.checked_add(i128::from(b - b'0')))
            .ok_or_else(|| "too many digits".to_owned())?;
        if seen_point {
            exp10 -= 1;
        }
    }
    Ok(Number { mantissa, exp10 })
}

/// The decimal suffixes, a factor of 1000 apart, from `n` (10^-9) to `E` (10^18).
const DECIMAL_SUFFIXES: [&str; 10] = ["n", "u", "m", "", "k", "M", "G", "T", "P", "E"];

/// The binary suffixes, a factor of 1024 apart, from `Ki` (2^10) to `Ei` (2^60).
const BINARY_SUFFIXES: [&str; 6] = ["Ki", "Mi", "Gi", "Ti", "Pi", "Ei"];

/// The scale a suffix stands for: `(decimal exponent, binary exponent)`.
fn suffix_scale(suffix: &str) -> Result<(i64, u32), String> {
    let decimal = DECIMAL_SUFFIXES
        .iter()
        .zip((-9..).step_by(3))
        .map(|(s, e)| (*s, (e, 0)));
    let binary = BINARY_SUFFIXES
        .iter()
        .zip((10..).step_by(10))
        .map(|(s, e)| (*s, (0, e)));
    match decimal.chain(binary).find(|(s, _)| *s == suffix) {
        Some((_, scale)) => Ok(scale),
        None => decimal_exponent(suffix).map(|e| (e, 0)),
    }
}

/// Reads an exponent suffix such as `e3`, `E-3` or `e+6`.
fn decimal_exponent(suffix: &str) -> Result<i64, String> {
    let unknown = || format!("unknown suffix {suffix:?}");
    let rest = suffix
        .strip_prefix('e')
        .or_else(|| suffix.strip_prefix('E'))
        .ok_or_else(unknown)?;
    let digits = rest.strip_prefix(['+', '-']).unwrap_or(rest);
    if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return Err(unknown());
    }
    // Anything past a few thousand is out of range either way; keep the number small.
    let significant = digits.trim_start_matches('0');
    let magnitude: i64 = if significant.len() > 6 {
        1_000_000
    } else if significant.is_empty() {
        0
    } else {
        significant.parse().map_err(|_| unknown())?
    };
    Ok(if rest.starts_with('-') {
        -magnitude
    } else {
        magnitude
    })
}

/// `mantissa * 10^exp10 * 2^exp2`, rounded away from zero to an integer; `None` when it
/// does not fit in `i128`.
fn scale(mantissa: i128, exp10: i64, exp2: u32) -> Option<i128> {
    if mantissa == 0 {
        return Some(0);
    }
    let scaled = mantissa.checked_mul(1i128.checked_shl(exp2)?)?;
    if exp10 >= 0 {
        let exp = u32::try_from(exp10).ok().filter(|e| *e <= MAX_POW10)?;
        return scaled.checked_mul(10i128.pow(exp));
    }
    let exp = u32::try_from(-exp10).ok()?;
    if exp > MAX_POW10 {
        // |scaled| < 2^127 < 10^39, so the exact value lies strictly between 0 and 1.
        return Some(scaled.signum());
    }
    Some(div_away_from_zero(scaled, 10i128.pow(exp)))
}

/// `n / d` for `d > 0`, rounded away from zero.
fn div_away_from_zero(n: i128, d: i128) -> i128 {
    let q = n / d;
    if n % d == 0 { q } else { q + n.signum() }
}

/// `n / d` for `d > 0`, rounded towards positive infinity.
fn div_ceil(n: i128, d: i128) -> i128 {
    let q = n.div_euclid(d);
    if n.rem_euclid(d) == 0 { q } else { q + 1 }
}

/// The canonical text of a value: CPU as `"2"` for whole cores or `"250m"`; memory with
/// the largest binary suffix that divides it exactly (`"512Mi"`, `"1Gi"`), else bytes.
pub fn format(resource: Resource, value: i64) -> Quantity {
    let text = match resource {
        Resource::Cpu if value % 1000 == 0 => (value / 1000).to_string(),
        Resource::Cpu => format!("{value}m"),
        Resource::Memory => format_memory(value),
    };
    Quantity(text)
}

fn format_memory(value: i64) -> String {
    if value == 0 {
        return "0".to_owned();
    }
    const SUFFIXES: [(u32, &str); 6] = [
        (60, "Ei"),
        (50, "Pi"),
        (40, "Ti"),
        (30, "Gi"),
        (20, "Mi"),
        (10, "Ki"),
    ];
    let wide = i128::from(value);
    for (shift, suffix) in SUFFIXES {
        let unit = 1i128 << shift;
        if wide % unit == 0 {
            return format!("{}{suffix}", wide / unit);
        }
    }
    value.to_string()
}

/// The lowest value one step may set: `(100 - p)%` of `current`, rounded up to a whole
/// millicore (CPU) or MiB (memory), never above `current`. The granularity of memory is
/// a MiB, so a value below one MiB can not be lowered.
pub fn decrease_floor(resource: Resource, current: i64, max_change_percent: u8) -> i64 {
    let unit = match resource {
        Resource::Cpu => 1,
        Resource::Memory => MIB,
    };
    if (0..=i64::MAX / 100).contains(&current) {
        // The same arithmetic without `i128`: `current * keep` fits.
        let keep = 100 - i64::from(max_change_percent.min(100));
        let (n, d) = (current * keep, 100 * unit);
        let floor = (n / d + i64::from(n % d != 0)) * unit;
        return floor.min(current);
    }
    let keep = 100 - i128::from(max_change_percent.min(100));
    let unit = i128::from(unit);
    let floor = div_ceil(i128::from(current) * keep, 100 * unit) * unit;
    // The floor lies between 0 and `current` before the rounding, and the rounding is
    // capped at `current`, so it fits in i64.
    i64::try_from(floor.min(i128::from(current))).unwrap_or(current)
}

/// Caps a decrease (GR-14, GR-15, GR-16): the result is never below `(100 - p)%` of
/// `current` rounded up to a whole millicore or MiB. An increase (`target >= current`)
/// comes back unchanged; with `p = 100` the value may fall to `target`.
pub fn cap_decrease(resource: Resource, current: i64, target: i64, max_change_percent: u8) -> i64 {
    if target >= current || max_change_percent >= 100 {
        return target;
    }
    target.max(decrease_floor(resource, current, max_change_percent))
}

/// Whether moving from `current` to `target` is smaller than the tolerance, given in
/// thousandths of a percent (5 % is `5000`). Exactly the tolerance is a change (rule
/// reading 3). From a current value of 0, any other target is a change.
pub fn within_tolerance(current: i64, target: i64, tolerance_percent_milli: u32) -> bool {
    if current == target {
        return true;
    }
    if current == 0 {
        return false;
    }
    let diff = (i128::from(target) - i128::from(current)).abs();
    // diff / |current| * 100 * 1000 < tolerance
    diff * 100_000 < i128::from(tolerance_percent_milli) * i128::from(current).abs()
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;

    proptest! {
        // design D14: the common forms read as every form does
        #[test]
        fn plain_forms_read_as_any_form(
            digits in "[0-9]{1,20}",
            suffix in proptest::sample::select(vec!["", "m", "k", "M", "G", "Ki", "Mi", "Gi", "Ti", "Pi", "n", "e3"]),
            cpu in any::<bool>(),
        ) {
            let r = if cpu { Resource::Cpu } else { Resource::Memory };
            let q = format!("{digits}{suffix}");
            if let Some(v) = parse_plain(r, &q) {
                prop_assert_eq!(Ok(v), parse_any(r, &q));
            }
            prop_assert_eq!(parse_quantity(r, &q), parse_any(r, &q));
        }
    }

    #[test]
    fn scale_rounds_away_from_zero() {
        assert_eq!(scale(1, -1, 0), Some(1));
        assert_eq!(scale(-1, -1, 0), Some(-1));
        assert_eq!(scale(1, -100, 0), Some(1));
        assert_eq!(scale(0, 100, 0), Some(0));
        assert_eq!(scale(1, 100, 0), None);
    }
}
