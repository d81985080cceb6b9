//! A compiled schedule fires at the wall times croner finds: for random 5-field
//! schedules and random wall times, the next and the previous firing (inclusive or not)
//! equal croner's `find_next_occurrence` and `find_previous_occurrence`.

use chrono::{NaiveDate, NaiveDateTime};
use kerf_api::validate::parse_schedule;
use kerf_decide::window::Schedule;
use proptest::prelude::*;

/// One field: `*`, a value, a list, a range, or a step on `*` or a range.
fn field(min: u32, max: u32, names: &'static [&'static str]) -> BoxedStrategy<String> {
    let value = move || {
        let numbers = (min..=max).prop_map(|v| v.to_string());
        if names.is_empty() {
            numbers.boxed()
        } else {
            prop_oneof![
                numbers,
                proptest::sample::select(names).prop_map(str::to_owned)
            ]
            .boxed()
        }
    };
    let range = (min..=max, min..=max).prop_map(|(a, b)| format!("{}-{}", a.min(b), a.max(b)));
    prop_oneof![
        2 => Just("*".to_owned()),
        3 => value(),
        2 => proptest::collection::vec(value(), 2..4).prop_map(|v| v.join(",")),
        2 => range.clone(),
        1 => (1..=max.max(1)).prop_map(|s| format!("*/{s}")),
        1 => (range, 1..=max.max(1)).prop_map(|(r, s)| format!("{r}/{s}")),
    ]
    .boxed()
}

fn schedule() -> impl Strategy<Value = String> {
    const MONTHS: &[&str] = &["JAN", "feb", "Dec"];
    const DAYS: &[&str] = &["SUN", "mon", "Fri"];
    (
        field(0, 59, &[]),
        field(0, 23, &[]),
        field(1, 31, &[]),
        field(1, 12, MONTHS),
        field(0, 7, DAYS),
    )
        .prop_map(|(mi, h, dom, mo, dow)| format!("{mi} {h} {dom} {mo} {dow}"))
}

/// A wall time between 2020 and 2031, to the nanosecond.
fn wall() -> impl Strategy<Value = NaiveDateTime> {
    let start = NaiveDate::from_ymd_opt(2020, 1, 1)
        .and_then(|d| d.and_hms_opt(0, 0, 0))
        .unwrap_or_default();
    (
        0i64..11 * 366 * 86_400,
        prop_oneof![Just(0u32), 0u32..1_000_000_000],
    )
        .prop_map(move |(s, ns)| {
            start + chrono::Duration::seconds(s) + chrono::Duration::nanoseconds(i64::from(ns))
        })
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 2000, ..ProptestConfig::default() })]

    // rule: AP-29
    #[test]
    fn ap_29_a_compiled_schedule_fires_where_croner_does(
        text in schedule(),
        from in wall(),
        inclusive in any::<bool>(),
    ) {
        let Ok(cron) = parse_schedule(&text) else {
            return Ok(());
        };
        let compiled = Schedule::new(&cron);
        prop_assert_eq!(
            compiled.next(from, inclusive),
            cron.find_next_occurrence(&from, inclusive).ok(),
            "next of {:?} from {}", text, from
        );
        prop_assert_eq!(
            compiled.prev(from, inclusive),
            cron.find_previous_occurrence(&from, inclusive).ok(),
            "previous of {:?} from {}", text, from
        );
    }
}
