//! Property tests of quantities, the decrease cap and the tolerance.

use kerf_api::Resource;
use kerf_decide::quantity::{MIB, cap_decrease, format, parse, parse_quantity, within_tolerance};
use proptest::prelude::*;

const CPU: Resource = Resource::Cpu;
const MEM: Resource = Resource::Memory;

/// `(100 - p)%` of `current`, rounded up to a multiple of `unit`, exactly.
fn floor_of(current: i64, p: u8, unit: i64) -> i128 {
    let exact = i128::from(current) * (100 - i128::from(p));
    let unit = i128::from(unit) * 100;
    (exact + unit - 1).div_euclid(unit) * (unit / 100)
}

proptest! {
    // design §5: formatting then parsing gives the value back
    #[test]
    fn cpu_format_round_trips(value in any::<i64>()) {
        prop_assert_eq!(parse(CPU, &format(CPU, value)), Ok(value));
    }

    // design §5: formatting then parsing gives the value back
    #[test]
    fn memory_format_round_trips(value in any::<i64>()) {
        prop_assert_eq!(parse(MEM, &format(MEM, value)), Ok(value));
    }

    // design §5: formatting then parsing gives the value back
    #[test]
    fn memory_round_trips_binary_multiples(n in -1_000_000i64..1_000_000, shift in 0u32..43) {
        let value = n << shift;
        prop_assert_eq!(parse(MEM, &format(MEM, value)), Ok(value));
    }

    // design §5: a decimal of n digits after the point in cores is the millicores rounded up
    #[test]
    fn cpu_decimal_cores_round_up(whole in 0i64..1_000_000, frac in 0u32..1_000_000) {
        let text = format!("{whole}.{frac:06}");
        let expected = whole * 1000 + i64::from(frac.div_ceil(1000));
        prop_assert_eq!(parse_quantity(CPU, &text), Ok(expected));
    }

    // rule: GR-14, GR-15
    #[test]
    fn cpu_cap_never_below_rounded_floor(
        current in 0i64..1_000_000_000, target in 0i64..1_000_000_000, p in 0u8..100,
    ) {
        let capped = cap_decrease(CPU, current, target, p);
        let floor = floor_of(current, p, 1).min(i128::from(current));
        if target < current {
            prop_assert_eq!(i128::from(capped), i128::from(target).max(floor));
            prop_assert!(capped <= current);
        }
    }

    // rule: GR-14, GR-15
    #[test]
    fn memory_cap_never_below_floor_rounded_to_mib(
        current in 0i64..(1i64 << 44), target in 0i64..(1i64 << 44), p in 0u8..100,
    ) {
        let capped = cap_decrease(MEM, current, target, p);
        let floor = floor_of(current, p, MIB).min(i128::from(current));
        if target < current {
            prop_assert_eq!(i128::from(capped), i128::from(target).max(floor));
            prop_assert!(capped <= current);
            prop_assert!(capped == target || capped == current || capped % MIB == 0);
        }
    }

    // rule: GR-16
    #[test]
    fn increases_are_never_capped(
        current in any::<i64>(), extra in 0i64..1_000_000, p in 0u8..=100, cpu in any::<bool>(),
    ) {
        let resource = if cpu { CPU } else { MEM };
        let target = current.saturating_add(extra);
        prop_assert_eq!(cap_decrease(resource, current, target, p), target);
    }

    // rule: GR-14
    #[test]
    fn hundred_percent_lets_a_value_fall_to_target(current in 0i64..i64::MAX, target in 0i64..i64::MAX) {
        prop_assert_eq!(cap_decrease(MEM, current, target, 100), target);
        prop_assert_eq!(cap_decrease(CPU, current, target, 100), target);
    }

    // rule: GR-14, GR-15 — the cap holds at the edges of i64
    #[test]
    fn cap_never_overflows(current in any::<i64>(), target in any::<i64>(), p in any::<u8>()) {
        let capped = cap_decrease(MEM, current, target, p);
        prop_assert!(capped >= target.min(current));
        prop_assert!(capped <= current.max(target));
    }

    // rule reading 3: less than the tolerance keeps the value, the tolerance or more moves it
    #[test]
    fn tolerance_matches_exact_percentages(current in 1i64..1_000_000_000_000, target in 0i64..2_000_000_000_000, tol in 0u32..200_000) {
        let change = (i128::from(target) - i128::from(current)).abs() * 100_000;
        let allowed = i128::from(tol) * i128::from(current);
        prop_assert_eq!(within_tolerance(current, target, tol), change < allowed || target == current);
    }
}

// rule: GR-14
#[test]
fn fifty_percent_halves_and_no_lower() {
    assert_eq!(cap_decrease(CPU, 1000, 100, 50), 500);
    assert_eq!(cap_decrease(CPU, 1000, 700, 50), 700);
    assert_eq!(cap_decrease(MEM, 1 << 30, 1 << 20, 50), 1 << 29);
    // maxChangePercent 30: to 70 %.
    assert_eq!(cap_decrease(CPU, 1000, 0, 30), 700);
    // maxChangePercent 0: no decrease at all.
    assert_eq!(cap_decrease(CPU, 1000, 0, 0), 1000);
}

// rule: GR-15
#[test]
fn cap_rounds_up_to_a_whole_millicore_or_mib() {
    // 50 % of 333m is 166.5m: the limit is 167m.
    assert_eq!(cap_decrease(CPU, 333, 1, 50), 167);
    // 50 % of 1001 MiB is 500.5 MiB: the limit is 501 MiB.
    assert_eq!(cap_decrease(MEM, 1001 * MIB, MIB, 50), 501 * MIB);
    // 50 % of 100 MiB + 1 byte rounds up to 51 MiB.
    assert_eq!(cap_decrease(MEM, 100 * MIB + 1, 0, 50), 51 * MIB);
    // Below one MiB the rounding would exceed the current value: no decrease.
    assert_eq!(cap_decrease(MEM, 1000, 10, 50), 1000);
}

// rule: GR-16
#[test]
fn increase_is_returned_unchanged() {
    assert_eq!(cap_decrease(CPU, 100, 10_000, 50), 10_000);
    assert_eq!(cap_decrease(MEM, 100, 100, 50), 100);
}

// rule reading 3: exactly the tolerance is a change
#[test]
fn tolerance_boundary_is_a_change() {
    assert!(within_tolerance(1000, 1049, 5000));
    assert!(!within_tolerance(1000, 1050, 5000));
    assert!(!within_tolerance(1000, 950, 5000));
    assert!(within_tolerance(1000, 951, 5000));
    assert!(within_tolerance(1000, 1000, 0));
    assert!(!within_tolerance(1000, 1001, 0));
    // From zero, any other value is a change.
    assert!(within_tolerance(0, 0, 5000));
    assert!(!within_tolerance(0, 1, 5000));
    // No overflow at the edges.
    assert!(!within_tolerance(i64::MAX, i64::MIN, 5000));
    assert!(within_tolerance(i64::MAX, i64::MIN, u32::MAX));
    assert!(within_tolerance(i64::MAX, i64::MAX - 1, 5000));
}
