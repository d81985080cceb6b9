//! The throttling signal's sources: the PromQL text and the cAdvisor fallback.

use kerf_testkit::decide::health as health_support;

use chrono::Duration;
use health_support::{in_place, t0, thresholds};
use kerf_api::Resource;
use kerf_decide::health::cadvisor::sample_from_scrapes;
use kerf_decide::health::{
    BreachReason, CadvisorError, CfsCounters, CfsKey, Counts, HealthVerdict, PodMatch, evaluate,
    parse_cadvisor, throttling_queries, throttling_window,
};
use proptest::prelude::*;

// rule: RB-12, RB-13
#[test]
fn rb_12_the_query_is_the_share_of_throttled_periods_since_the_change() {
    let pods = PodMatch::Names(vec!["checkout-7d9f-b".into(), "checkout-7d9f-a".into()]);
    let q = throttling_queries("payments", &pods, "app", 600).unwrap();
    let sel = r#"{namespace="payments",pod=~"checkout-7d9f-a|checkout-7d9f-b",container="app"}"#;
    assert_eq!(
        q.throttled_periods,
        format!("sum(increase(container_cpu_cfs_throttled_periods_total{sel}[600s]))")
    );
    assert_eq!(
        q.periods,
        format!("sum(increase(container_cpu_cfs_periods_total{sel}[600s]))")
    );
    assert_eq!(q.ratio, format!("{} / {}", q.throttled_periods, q.periods));
    assert!(throttling_queries("ns", &PodMatch::Names(vec![]), "app", 60).is_none());
}

#[test]
fn query_text_escapes_names_and_strings() {
    let q = throttling_queries("n\"s", &PodMatch::Names(vec!["a.b".into()]), "c\\d", 60).unwrap();
    assert!(q.periods.contains(r#"namespace="n\"s""#), "{}", q.periods);
    assert!(q.periods.contains(r#"pod=~"a\\.b""#), "{}", q.periods);
    assert!(q.periods.contains(r#"container="c\\d""#), "{}", q.periods);
    let q = throttling_queries("ns", &PodMatch::Regex("web-.*".into()), "app", 0).unwrap();
    assert!(q.periods.contains(r#"pod=~"web-.*""#) && q.periods.contains("[1s]"));
}

// rule: RB-14, reading 8
#[test]
fn rb_14_the_query_window_starts_after_the_delay() {
    let d = Duration::minutes(2);
    assert_eq!(
        throttling_window(t0(), d, t0() + Duration::seconds(119)),
        None
    );
    assert_eq!(throttling_window(t0(), d, t0() + d), None);
    let (start, secs) = throttling_window(t0(), d, t0() + Duration::minutes(12)).unwrap();
    assert_eq!((start, secs), (t0() + d, 600));
}

const SCRAPE_BEFORE: &str = r#"# HELP container_cpu_cfs_periods_total Number of elapsed enforcement period intervals.
# TYPE container_cpu_cfs_periods_total counter
container_cpu_cfs_periods_total{container="app",id="/kubepods/burstable/pod1/c1",image="img",name="c1",namespace="payments",pod="checkout-a"} 1000 1740830400000
container_cpu_cfs_periods_total{container="app",id="/kubepods/burstable/pod2/c2",image="img",name="c2",namespace="payments",pod="checkout-b"} 2000 1740830400000
container_cpu_cfs_periods_total{container="",id="/kubepods/burstable/pod1",namespace="payments",pod="checkout-a"} 9999
# TYPE container_cpu_cfs_throttled_periods_total counter
container_cpu_cfs_throttled_periods_total{container="app",namespace="payments",pod="checkout-a"} 100
container_cpu_cfs_throttled_periods_total{container="app",namespace="payments",pod="checkout-b"} 50
container_memory_working_set_bytes{container="app",namespace="payments",pod="checkout-a"} 1.2e+08 this is not read
"#;

const SCRAPE_AFTER: &str = r#"container_cpu_cfs_periods_total{container="app",namespace="payments",pod="checkout-a"} 1400
container_cpu_cfs_periods_total{container="app",namespace="payments",pod="checkout-b"} 2.2e+03
container_cpu_cfs_throttled_periods_total{container="app",namespace="payments",pod="checkout-a"} 250
container_cpu_cfs_throttled_periods_total{container="app",namespace="payments",pod="checkout-b"} 90
"#;

// rule: RB-17
#[test]
fn rb_17_cadvisor_fallback_measures_throttling() {
    let before = parse_cadvisor(SCRAPE_BEFORE).unwrap();
    assert_eq!(before.len(), 2, "pod-level series are left out");
    let key = CfsKey {
        namespace: "payments".into(),
        pod: "checkout-a".into(),
        container: "app".into(),
    };
    assert_eq!(
        before[&key],
        CfsCounters {
            periods: 1000,
            throttled_periods: 100
        }
    );
    let after = parse_cadvisor(SCRAPE_AFTER).unwrap();
    let pods = vec!["checkout-a".to_owned(), "checkout-b".to_owned()];
    let start = t0() + Duration::minutes(2);
    let s = sample_from_scrapes(&before, &after, "payments", &pods, "app", start);
    assert_eq!((s.periods, s.throttled_periods), (600, 190));

    // The sample drives a rollback like a PromQL one.
    let (watch, th) = (in_place(), thresholds());
    let v = evaluate(
        &watch,
        &[Resource::Cpu],
        Counts::default(),
        &[s],
        &th,
        t0() + Duration::minutes(10),
    );
    match v {
        HealthVerdict::Breach(b) => assert_eq!(b.reason, BreachReason::Throttling),
        other => panic!("expected a throttling breach, got {other:?}"),
    }
}

#[test]
fn counter_resets_and_new_pods_count_from_zero() {
    let before = parse_cadvisor(
        "container_cpu_cfs_periods_total{container=\"app\",namespace=\"ns\",pod=\"a\"} 5000\n",
    )
    .unwrap();
    let after = parse_cadvisor(
        "container_cpu_cfs_periods_total{container=\"app\",namespace=\"ns\",pod=\"a\"} 400\n\
         container_cpu_cfs_periods_total{container=\"app\",namespace=\"ns\",pod=\"b\"} 100\n",
    )
    .unwrap();
    let pods = vec!["a".to_owned(), "b".to_owned(), "gone".to_owned()];
    let s = sample_from_scrapes(&before, &after, "ns", &pods, "app", t0());
    assert_eq!(s.periods, 500);
}

#[test]
fn malformed_cfs_lines_are_errors_naming_the_line() {
    let bad = [
        ("container_cpu_cfs_periods_total{container=\"app\" 12", 1),
        (
            "# c\ncontainer_cpu_cfs_periods_total{container=\"app\"} twelve",
            2,
        ),
        (
            "x 1\n\ncontainer_cpu_cfs_throttled_periods_total{container=\"a\\q\"} 1",
            3,
        ),
        ("container_cpu_cfs_periods_total -1", 1),
        ("container_cpu_cfs_periods_total{a=\"b\"} NaN", 1),
        ("container_cpu_cfs_periods_total{a=\"b\"} 1 2 3", 1),
        ("container_cpu_cfs_periods_total{=\"b\"} 1", 1),
    ];
    for (text, line) in bad {
        match parse_cadvisor(text) {
            Err(CadvisorError::Malformed { line: l, .. }) => assert_eq!(l, line, "{text}"),
            Ok(v) => panic!("{text:?} parsed as {v:?}"),
        }
    }
    let err = parse_cadvisor("container_cpu_cfs_periods_total{").unwrap_err();
    assert!(err.to_string().contains("line 1"), "{err}");
    // Other metrics are never read, however they look.
    assert!(
        parse_cadvisor("some_other_metric{{{ garbage")
            .unwrap()
            .is_empty()
    );
}

proptest! {
    #[test]
    fn the_cadvisor_parser_never_panics(text in "\\PC*") {
        let _ = parse_cadvisor(&text);
    }

    #[test]
    fn the_cadvisor_parser_never_panics_on_cfs_lines(
        labels in "[a-z\"=,{}\\\\ ]{0,40}",
        value in "[-+0-9.eEaINnf ]{0,12}",
    ) {
        let text = format!("container_cpu_cfs_periods_total{{{labels} {value}\n");
        let _ = parse_cadvisor(&text);
        let text = format!("container_cpu_cfs_throttled_periods_total{labels} {value}");
        let _ = parse_cadvisor(&text);
    }

    #[test]
    fn the_cadvisor_parser_never_panics_on_bytes(bytes in proptest::collection::vec(any::<u8>(), 0..300)) {
        let text = String::from_utf8_lossy(&bytes);
        let _ = parse_cadvisor(&text);
    }
}
