use std::collections::HashMap;
use std::time::Duration;

use chrono::{TimeZone, Utc};
use kerf_api::hub::HubWorkload;

use super::query::relabel_steps;
use super::*;

fn target(kind: &str, name: &str, containers: &[&str]) -> Target {
    Target {
        workload: HubWorkload {
            namespace: "shop".to_owned(),
            kind: kind.to_owned(),
            name: name.to_owned(),
        },
        containers: containers.iter().map(|c| (*c).to_owned()).collect(),
    }
}

/// The regex as Prometheus anchors it (`^(?:...)$`).
fn anchored(regex: &str) -> regex::Regex {
    regex::Regex::new(&format!("^(?:{regex})$")).expect("valid regex")
}

fn matches(naming: PodNaming, name: &str, pod: &str) -> bool {
    anchored(&pod_regex(naming, name)).is_match(pod)
}

/// The name the API server generates from `base` (cut to 58) and a 5-character suffix.
fn generated(base: &str, suffix: &str) -> String {
    format!("{}{suffix}", &base[..base.len().min(58)])
}

#[test]
fn deployment_pods_are_name_hash_suffix() {
    let d = PodNaming::Deployment;
    assert!(matches(d, "web", "web-7d9f8c6b5-x2c4z"));
    assert!(matches(d, "web", "web-5b-x2c4z"));
    assert!(
        !matches(d, "web", "web-v2-7d9f8c6b5-x2c4z"),
        "another Deployment"
    );
    assert!(!matches(d, "web", "web-7d9f8c6b5"), "no random suffix");
    assert!(
        !matches(d, "web", "web-7d9f8c6b5-abcde"),
        "vowels are never generated"
    );
    assert!(!matches(d, "web", "webhook-7d9f8c6b5-x2c4z"));
    assert!(matches(d, "a.b", "a.b-7d9f8c6b5-x2c4z"));
    assert!(
        !matches(d, "a.b", "axb-7d9f8c6b5-x2c4z"),
        "a dot is literal"
    );
}

#[test]
fn statefulset_pods_are_name_ordinal() {
    let s = PodNaming::StatefulSet;
    assert!(matches(s, "db", "db-0"));
    assert!(matches(s, "db", "db-12"));
    assert!(!matches(s, "db", "db-x2c4z"));
    assert!(!matches(s, "db", "db-primary-0"));
}

#[test]
fn daemonset_pods_are_name_suffix() {
    let d = PodNaming::DaemonSet;
    assert!(matches(d, "agent", "agent-x2c4z"));
    assert!(!matches(d, "agent", "agent-x2c4"));
    assert!(!matches(d, "agent", "agent-7d9f8c6b5-x2c4z"));
}

#[test]
fn long_names_are_cut_as_the_api_server_cuts_generated_names() {
    let ds = "a".repeat(60);
    let pod = generated(&format!("{ds}-"), "x2c4z");
    assert_eq!(pod.len(), 63);
    assert!(matches(PodNaming::DaemonSet, &ds, &pod));
    // A Deployment whose `<name>-<hash>-` is cut inside the hash.
    let dep = "b".repeat(50);
    let pod = generated(&format!("{dep}-7d9f8c6b5-"), "x2c4z");
    assert!(matches(PodNaming::Deployment, &dep, &pod), "{pod}");
    // A short hash is kept whole.
    assert!(matches(
        PodNaming::Deployment,
        &dep,
        &generated(&format!("{dep}-7d9-"), "x2c4z")
    ));
    // Cut inside the name itself.
    let dep = "c".repeat(70);
    let pod = generated(&format!("{dep}-7d9f8c6b5-"), "x2c4z");
    assert!(matches(PodNaming::Deployment, &dep, &pod));
}

#[test]
fn the_more_specific_name_wins_where_two_fit() {
    let targets = [
        target("Deployment", "api", &["app"]),
        target("Deployment", "api-v2", &["app"]),
        target("StatefulSet", "api", &["app"]),
    ];
    let list: Vec<_> = targets
        .iter()
        .map(|t| (t, PodNaming::of_kind(&t.workload.kind).expect("kind")))
        .collect();
    let steps = relabel_steps(&list);
    let workload_of = |pod: &str| {
        steps.iter().fold(None, |found, (regex, to)| {
            match anchored(regex).captures(pod) {
                Some(c) => Some(to.replace("$1", c.get(1).map_or("", |m| m.as_str()))),
                None => found,
            }
        })
    };
    assert_eq!(
        workload_of("api-v2-7d9f8c6b5-x2c4z").as_deref(),
        Some("Deployment/api-v2")
    );
    assert_eq!(
        workload_of("api-7d9f8c6b5-x2c4z").as_deref(),
        Some("Deployment/api")
    );
    assert_eq!(workload_of("api-0").as_deref(), Some("StatefulSet/api"));
    assert_eq!(workload_of("other-0"), None);
}

/// The label matchers of the queries of StatefulSet `db`'s container `postgres`.
const DB_MATCHERS: &str =
    r#"namespace="shop",container!="",container!="POD",container=~"postgres",pod=~"db-[0-9]+""#;

/// The queries of StatefulSet `db`, container `postgres`, with the default settings.
fn db_queries() -> BatchQueries {
    let t = target("StatefulSet", "db", &["postgres"]);
    BatchQueries::new(
        "shop",
        &[(&t, PodNaming::StatefulSet)],
        &PromSettings::default(),
    )
}

#[test]
fn one_query_per_resource_aggregated_by_workload_and_container() {
    let q = db_queries();
    let sel = DB_MATCHERS;
    let usage = format!(
        r#"max by (kerf_workload, container) (label_replace(rate(container_cpu_usage_seconds_total{{{sel}}}[5m]), "kerf_workload", "StatefulSet/$1", "pod", "(db)-[0-9]+"))"#
    );
    assert_eq!(
        q.cpu,
        format!(
            r#"label_replace(quantile_over_time(0.9, {usage}[1209600s:300s]), "kerf_stat", "value", "", "") or label_replace(count_over_time({usage}[1209600s:300s]), "kerf_stat", "count", "", "")"#
        )
    );
    let peak = format!(
        r#"max by (kerf_workload, container) (label_replace(max_over_time(container_memory_working_set_bytes{{{sel}}}[1209600s]), "kerf_workload", "StatefulSet/$1", "pod", "(db)-[0-9]+"))"#
    );
    assert!(
        q.memory.starts_with(&format!(
            r#"label_replace({peak}, "kerf_stat", "value", "", "") or "#
        )),
        "{}",
        q.memory
    );
    let [cpu, memory, ..] = q.selectors().map(|s| s.to_string());
    assert_eq!(
        cpu,
        format!(r#"{{__name__="container_cpu_usage_seconds_total",{sel}}}"#)
    );
    assert!(memory.contains("container_memory_working_set_bytes"));
}

#[test]
fn a_memory_percentile_below_100_reads_the_steps() {
    let t = target("StatefulSet", "db", &["postgres"]);
    let s = PromSettings {
        memory_percentile: 99,
        ..PromSettings::default()
    };
    let q = BatchQueries::new("shop", &[(&t, PodNaming::StatefulSet)], &s);
    assert!(
        q.memory
            .starts_with("label_replace(quantile_over_time(0.99, max by")
    );
    assert!(!q.memory.contains("max_over_time"));
}

#[test]
fn cpu_gets_the_margin_and_rounds_up_to_a_millicore() {
    assert_eq!(cpu_millicores(0.2, 15, 10), 230, "no float noise");
    assert_eq!(cpu_millicores(0.2001, 15, 10), 231);
    assert_eq!(cpu_millicores(1.0, 0, 10), 1000);
    assert_eq!(cpu_millicores(0.0001, 15, 10), 10, "the floor");
}

#[test]
fn memory_gets_the_margin_and_rounds_up_to_a_mib() {
    let mib = f64::from(1u32 << 20);
    assert_eq!(memory_mib(100.0 * mib, 15, 32), 115);
    assert_eq!(memory_mib(100.0 * mib + 1.0, 15, 32), 116);
    assert_eq!(memory_mib(200.0 * mib, 0, 32), 200);
    assert_eq!(memory_mib(1000.0, 15, 32), 32, "the floor");
}

#[test]
fn confidence_is_the_covered_part_of_the_window_rounded_down() {
    let h = |n: u64| Duration::from_secs(n * 3600);
    assert_eq!(confidence(h(48), h(336)).as_str(), "0.14");
    assert_eq!(confidence(h(335), h(336)).as_str(), "0.99");
    assert_eq!(confidence(h(336), h(336)).as_str(), "1");
    assert_eq!(confidence(h(0), h(336)).as_str(), "0.00");
    assert_eq!(confidence(h(1), Duration::ZERO).as_str(), "0.00");
}

#[test]
fn coverage_counts_steps_and_stops_at_the_window() {
    let s = PromSettings::default();
    assert_eq!(covered(576, &s), Duration::from_secs(48 * 3600));
    assert_eq!(covered(10_000, &s), s.window);
}

fn usage(cpu: f64, memory: f64, steps: u64) -> ContainerUsage {
    ContainerUsage {
        cpu_cores: Some(cpu),
        cpu_steps: steps,
        memory_bytes: Some(memory),
        memory_steps: steps + 1,
        ..ContainerUsage::default()
    }
}

fn usage_of(entries: &[(&str, &str, ContainerUsage)]) -> Usage {
    Usage(
        entries
            .iter()
            .map(|(w, c, u)| (((*w).to_owned(), (*c).to_owned()), *u))
            .collect(),
    )
}

#[test]
fn a_recommendation_fills_every_field() {
    let now = Utc.with_ymd_and_hms(2026, 12, 4, 12, 0, 0).unwrap();
    let t = target("Deployment", "web", &["app", "sidecar"]);
    let mib = f64::from(1u32 << 20);
    let u = usage_of(&[
        ("Deployment/web", "app", usage(0.2, 200.0 * mib, 576)),
        ("Deployment/web", "sidecar", usage(0.01, 20.0 * mib, 2016)),
    ]);
    let r = build(&t, &u, &PromSettings::default(), now).expect("a recommendation");
    assert_eq!(r.workload, t.workload);
    assert_eq!(r.generated_at, now);
    assert_eq!(r.confidence.as_str(), "0.14", "the lowest container");
    assert_eq!(r.data_coverage.covered.as_str(), "48h");
    assert_eq!(r.data_coverage.window.as_str(), "336h");
    let app = &r.containers[0];
    assert_eq!(app.requests.cpu.as_ref().map(|q| q.as_str()), Some("230m"));
    assert_eq!(
        app.requests.memory.as_ref().map(|q| q.as_str()),
        Some("230Mi")
    );
    assert!(app.limits.is_empty() && app.remove_limits.is_empty());
    let sidecar = &r.containers[1];
    assert_eq!(
        sidecar.requests.cpu.as_ref().map(|q| q.as_str()),
        Some("12m")
    );
    assert_eq!(
        sidecar.requests.memory.as_ref().map(|q| q.as_str()),
        Some("32Mi")
    );
    assert_eq!(
        sidecar.confidence.as_ref().map(|c| c.as_str()),
        Some("0.50")
    );
    let echo = &r.settings;
    assert_eq!(echo.window.as_ref().map(|w| w.as_str()), Some("336h"));
    assert_eq!(
        (
            echo.cpu_percentile,
            echo.memory_percentile,
            echo.headroom_percent
        ),
        (Some(90), Some(100), Some(15))
    );
    assert_eq!(echo.limits, Some(kerf_api::policy::LimitsHandling::Keep));
    assert!(r.recommendation_id.starts_with("prom-") && r.recommendation_id.len() == 21);
}

#[test]
fn different_margins_leave_headroom_out_of_the_echo() {
    let s = PromSettings {
        cpu_margin_percent: 20,
        ..PromSettings::default()
    };
    assert_eq!(settings_echo(&s).headroom_percent, None);
}

#[test]
fn a_workload_without_enough_data_gets_no_recommendation() {
    let now = Utc.with_ymd_and_hms(2026, 12, 4, 12, 0, 0).unwrap();
    let t = target("DaemonSet", "agent", &["agent"]);
    let s = PromSettings::default();
    assert_eq!(build(&t, &Usage::default(), &s, now), None, "no series");
    // 12 hours: under the 24h minimum.
    let u = usage_of(&[("DaemonSet/agent", "agent", usage(0.1, 1e8, 144))]);
    assert_eq!(build(&t, &u, &s, now), None);
    // CPU without memory.
    let mut only_cpu = usage(0.1, 1e8, 2016);
    only_cpu.memory_bytes = None;
    let u = usage_of(&[("DaemonSet/agent", "agent", only_cpu)]);
    assert_eq!(build(&t, &u, &s, now), None);
}

#[test]
fn a_container_without_data_is_left_out_of_the_recommendation() {
    let now = Utc.with_ymd_and_hms(2026, 12, 4, 12, 0, 0).unwrap();
    let t = target("Deployment", "web", &["app", "new-sidecar"]);
    // 4032 steps of 5 minutes: the whole window.
    let u = usage_of(&[("Deployment/web", "app", usage(0.2, 1e8, 4032))]);
    let r = build(&t, &u, &PromSettings::default(), now).expect("a recommendation");
    let names: Vec<_> = r.containers.iter().map(|c| c.name.as_str()).collect();
    assert_eq!(names, ["app"]);
    assert_eq!(r.confidence.as_str(), "1");
}

#[test]
fn the_id_is_stable_while_the_numbers_stay() {
    let now = Utc.with_ymd_and_hms(2026, 12, 4, 12, 0, 0).unwrap();
    let t = target("Deployment", "web", &["app"]);
    let s = PromSettings::default();
    let id = |cpu: f64, steps: u64, at| {
        let u = usage_of(&[("Deployment/web", "app", usage(cpu, 1e8, steps))]);
        build(&t, &u, &s, at)
            .expect("a recommendation")
            .recommendation_id
    };
    let first = id(0.2, 576, now);
    assert_eq!(
        first,
        id(0.2, 600, now + chrono::Duration::hours(2)),
        "more data, same values"
    );
    assert_eq!(first, id(0.2001 - 0.0001, 576, now), "the same millicores");
    assert_ne!(first, id(0.3, 576, now), "another CPU value");
    let other = Target {
        workload: HubWorkload {
            name: "web2".to_owned(),
            ..t.workload.clone()
        },
        ..t.clone()
    };
    let u = usage_of(&[("Deployment/web2", "app", usage(0.2, 1e8, 576))]);
    assert_ne!(
        first,
        build(&other, &u, &s, now).expect("rec").recommendation_id
    );
}

#[test]
fn series_without_labels_or_numbers_are_left_out() {
    let mut u = Usage::default();
    let labels = |stat: &str| -> HashMap<String, String> {
        [
            ("kerf_workload", "Deployment/web"),
            ("container", "app"),
            ("kerf_stat", stat),
        ]
        .into_iter()
        .map(|(k, v)| (k.to_owned(), v.to_owned()))
        .collect()
    };
    u.record(Answer::Cpu, &labels("value"), f64::NAN);
    u.record(Answer::Cpu, &labels("count"), 12.0);
    u.record(Answer::Memory, &labels("value"), 5e7);
    u.record(Answer::Memory, &HashMap::new(), 1.0);
    u.record(Answer::Flags, &labels("oom"), 1.0);
    let got = u.0.get(&("Deployment/web".to_owned(), "app".to_owned()));
    assert_eq!(
        got,
        Some(&ContainerUsage {
            cpu_cores: None,
            cpu_steps: 12,
            memory_bytes: Some(5e7),
            memory_steps: 0,
            oom_killed: true,
            throttled: false,
        })
    );
    assert_eq!(u.0.len(), 1);
}

#[test]
fn a_batch_over_the_series_limit_is_halved_until_one_workload_is_left() {
    let targets = [
        target("Deployment", "a", &["app"]),
        target("Deployment", "b", &["app"]),
        target("Deployment", "c", &["app"]),
    ];
    let batch: Vec<_> = targets.iter().map(|t| (t, PodNaming::Deployment)).collect();
    let s = PromSettings {
        series_limit: 20,
        ..PromSettings::default()
    };
    let names = |b: &[(&Target, PodNaming)]| {
        b.iter()
            .map(|(t, _)| t.workload.name.clone())
            .collect::<Vec<_>>()
    };
    // The first half comes last: it is popped first.
    let [second, first] = halves(&batch, 30, &s).expect("halves");
    assert_eq!(names(first), ["a"]);
    assert_eq!(names(second), ["b", "c"]);
    let e = halves(first, 60, &s).expect_err("one workload");
    assert_eq!(e.category(), "series_limit");
    assert_eq!(
        e.to_string(),
        "Deployment shop/a has 60 usage series in the window, over the limit of 20 per query: \
         no recommendation is computed (raise the series limit or shorten the window)"
    );
}

#[test]
fn a_policy_sets_the_window_percentiles_and_margins_so_the_echo_matches_it() {
    use kerf_api::duration::GoDuration;
    use kerf_api::policy::{LimitsHandling, RecommendationSettings};
    let policy = RecommendationSettings {
        window: Some(GoDuration("168h".to_owned())),
        cpu_percentile: Some(95),
        memory_percentile: Some(99),
        headroom_percent: Some(20),
        limits: Some(LimitsHandling::Ratio),
    };
    let s = PromSettings::default().with_policy(&policy);
    assert_eq!(s.window, Duration::from_secs(168 * 3600));
    assert_eq!((s.cpu_percentile, s.memory_percentile), (95, 99));
    assert_eq!((s.cpu_margin_percent, s.memory_margin_percent), (20, 20));
    let echo = settings_echo(&s);
    assert_eq!(
        RecommendationSettings {
            limits: Some(LimitsHandling::Ratio),
            ..echo
        },
        policy,
        "all but limits, which this source keeps"
    );
    let bad = RecommendationSettings {
        window: Some(GoDuration("two weeks".to_owned())),
        cpu_percentile: Some(0),
        ..RecommendationSettings::default()
    };
    assert_eq!(
        PromSettings::default().with_policy(&bad),
        PromSettings::default()
    );
}

#[test]
fn settings_that_cannot_be_used_are_named() {
    assert_eq!(PromSettings::default().validate(), Ok(()));
    let bad = |s: PromSettings| s.validate().expect_err("invalid");
    let d = PromSettings::default;
    assert_eq!(
        bad(PromSettings {
            step: Duration::ZERO,
            ..d()
        }),
        "step: must be at least 1s"
    );
    assert_eq!(
        bad(PromSettings {
            window: Duration::from_secs(3600),
            ..d()
        }),
        "minCoverage: must be at most the window"
    );
    assert_eq!(
        bad(PromSettings {
            cpu_percentile: 0,
            ..d()
        }),
        "cpuPercentile: must be 1 to 100"
    );
    assert_eq!(
        bad(PromSettings {
            memory_margin_percent: 1001,
            ..d()
        }),
        "cpuMarginPercent, memoryMarginPercent: must be 0 to 1000"
    );
    assert_eq!(
        bad(PromSettings {
            series_limit: 0,
            ..d()
        }),
        "seriesLimit: must be at least 1"
    );
}

#[test]
fn targets_that_cannot_be_queried_are_left_out() {
    let mut quoted = target("Deployment", "web\"} or vector(1) #", &["app"]);
    quoted.workload.namespace = "shop".to_owned();
    let targets = [
        target("Deployment", "web", &["app"]),
        target("CronJob", "nightly", &["job"]),
        quoted,
        target("StatefulSet", "db", &[]),
        target("DaemonSet", "agent", &["Agent"]),
    ];
    let grouped = by_namespace(&targets);
    let kept: Vec<_> = grouped["shop"]
        .iter()
        .map(|(t, n)| (t.workload.name.as_str(), *n))
        .collect();
    assert_eq!(kept, [("web", PodNaming::Deployment)]);
}

#[test]
fn flags_say_throttled_and_oom_killed_and_change_the_id() {
    let now = Utc.with_ymd_and_hms(2026, 12, 4, 12, 0, 0).unwrap();
    let t = target("Deployment", "web", &["app"]);
    let s = PromSettings::default();
    let plain = usage(0.2, 1e8, 576);
    let flagged = ContainerUsage {
        oom_killed: true,
        throttled: true,
        ..plain
    };
    let rec = |u: ContainerUsage| {
        build(&t, &usage_of(&[("Deployment/web", "app", u)]), &s, now).expect("rec")
    };
    let (a, b) = (rec(plain), rec(flagged));
    assert!(a.containers[0].flags.is_empty());
    assert_eq!(
        b.containers[0].flags,
        [
            kerf_api::rsr::ContainerFlag::Throttled,
            kerf_api::rsr::ContainerFlag::OomKilled
        ]
    );
    assert_ne!(a.recommendation_id, b.recommendation_id);
}

#[test]
fn the_flags_query_reads_oom_kills_and_the_throttled_share() {
    let q = db_queries();
    let sel = DB_MATCHERS;
    let lr = |inner: &str| {
        format!(
            r#"label_replace({inner}, "kerf_workload", "StatefulSet/$1", "pod", "(db)-[0-9]+")"#
        )
    };
    let max = "max by (kerf_workload, container)";
    let sum = "sum by (kerf_workload, container)";
    let oom = format!(
        "{max} ({}) or {max} ({})",
        lr(&format!(
            "increase(container_oom_events_total{{{sel}}}[1209600s]) > 0"
        )),
        lr(&format!(
            r#"max_over_time(kube_pod_container_status_last_terminated_reason{{{sel},reason="OOMKilled"}}[1209600s]) > 0"#
        ))
    );
    let throttled = format!(
        "{sum} ({}) / {sum} ({}) >= 0.25",
        lr(&format!(
            "increase(container_cpu_cfs_throttled_periods_total{{{sel}}}[86400s])"
        )),
        lr(&format!(
            "increase(container_cpu_cfs_periods_total{{{sel}}}[86400s])"
        ))
    );
    assert_eq!(
        q.flags,
        format!(
            r#"label_replace({oom}, "kerf_stat", "oom", "", "") or label_replace({throttled}, "kerf_stat", "throttled", "", "")"#
        )
    );
    assert_eq!(q.selectors().len(), 6, "every metric read is counted");
}
