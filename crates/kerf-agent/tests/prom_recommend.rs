//! The Prometheus recommender against a real Prometheus: series written by the test,
//! backfilled with `promtool tsdb create-blocks-from openmetrics`, then queried by
//! `prom_recommend::recommend` (docs/prometheus-source.md). Needs `prometheus` and
//! `promtool` on PATH, as tests/health_prometheus.rs does.

mod prometheus_support;

use std::fmt::Write as _;
use std::time::Duration;

use chrono::{DateTime, DurationRound, TimeDelta, Utc};
use kerf_agent::prom_recommend::{PromError, PromSettings, Target, recommend};
use kerf_api::hub::{HubWorkload, Recommendation};
use kerf_api::rsr::ContainerFlag;
use prometheus_support::Prometheus;

const MIB: u64 = 1 << 20;
/// Seconds between two written samples.
const SCRAPE: i64 = 60;

/// The usage of one container of one pod, sample by sample.
struct Series {
    namespace: &'static str,
    pod: String,
    container: &'static str,
    /// From `start`, for this long.
    hours: i64,
    /// CPU in millicores at the sample's offset (seconds from `start`).
    cpu_millicores: fn(i64) -> u64,
    /// Working set in bytes at the sample's offset.
    memory_bytes: fn(i64) -> u64,
    /// CFS counters, 10 periods a second, this percentage of them throttled.
    throttled_percent: Option<u64>,
    /// The offset of an OOM kill (cAdvisor's OOM counter goes from 0 to 1 there).
    oom_at: Option<i64>,
}

impl Series {
    fn samples(&self, start: DateTime<Utc>) -> impl Iterator<Item = (i64, i64)> + '_ {
        let t0 = start.timestamp();
        (0..=self.hours * 3600 / SCRAPE).map(move |k| (t0 + k * SCRAPE, k * SCRAPE))
    }

    fn labels(&self) -> String {
        format!(
            "namespace=\"{}\",pod=\"{}\",container=\"{}\"",
            self.namespace, self.pod, self.container
        )
    }
}

/// The OpenMetrics text of `series`, one family after the other, time ascending.
fn openmetrics(series: &[Series], start: DateTime<Utc>) -> String {
    let mut out = String::new();
    for s in series {
        // The counter as cumulative millicore-seconds, written in core-seconds.
        let mut total: u64 = 0;
        for (at, offset) in s.samples(start) {
            let _ = writeln!(
                out,
                "container_cpu_usage_seconds_total{{{}}} {}.{:03} {at}",
                s.labels(),
                total / 1000,
                total % 1000
            );
            total += (s.cpu_millicores)(offset) * SCRAPE as u64;
        }
    }
    for s in series {
        for (at, offset) in s.samples(start) {
            let _ = writeln!(
                out,
                "container_memory_working_set_bytes{{{}}} {} {at}",
                s.labels(),
                (s.memory_bytes)(offset)
            );
        }
    }
    let periods_per_scrape = 10 * SCRAPE as u64;
    for (metric, share) in [
        ("container_cpu_cfs_throttled_periods_total", None),
        ("container_cpu_cfs_periods_total", Some(100)),
    ] {
        for s in series {
            let Some(throttled) = s.throttled_percent else {
                continue;
            };
            let per_scrape = periods_per_scrape * share.unwrap_or(throttled) / 100;
            for (k, (at, _)) in s.samples(start).enumerate() {
                let _ = writeln!(
                    out,
                    "{metric}{{{}}} {} {at}",
                    s.labels(),
                    k as u64 * per_scrape
                );
            }
        }
    }
    for s in series {
        let Some(oom_at) = s.oom_at else { continue };
        for (at, offset) in s.samples(start) {
            let kills = u64::from(offset >= oom_at);
            let _ = writeln!(
                out,
                "container_oom_events_total{{{}}} {kills} {at}",
                s.labels()
            );
        }
    }
    out.push_str("# EOF\n");
    out
}

/// Backfills `text` and starts Prometheus on it with `args`.
async fn prometheus_with(text: &str, args: &[&str]) -> anyhow::Result<Prometheus> {
    prometheus_support::with_series(text, args).await
}

fn target(namespace: &str, kind: &str, name: &str, containers: &[&str]) -> Target {
    Target {
        workload: HubWorkload {
            namespace: namespace.to_owned(),
            kind: kind.to_owned(),
            name: name.to_owned(),
        },
        containers: containers.iter().map(|c| (*c).to_owned()).collect(),
    }
}

fn client(url: &str) -> anyhow::Result<prometheus_http_query::Client> {
    Ok(prometheus_http_query::Client::try_from(url)?)
}

/// Three days ago, on the hour: the series start there and last 48 hours (12 for the
/// DaemonSet); the recommendations are computed an hour after they end.
fn times() -> anyhow::Result<(DateTime<Utc>, DateTime<Utc>)> {
    let start = (Utc::now() - TimeDelta::days(3)).duration_trunc(TimeDelta::hours(1))?;
    Ok((start, start + TimeDelta::hours(49)))
}

/// Seconds from the start at hour `h`.
const fn at(h: i64) -> i64 {
    h * 3600
}

fn shop_series() -> Vec<Series> {
    vec![
        // web: two replicas at 200m and 100 MiB; one of them at 1 core for one hour
        // (2 % of the time, above the 90th percentile) and at 200 MiB for one sample that
        // falls between two 5-minute steps.
        Series {
            namespace: "shop",
            pod: "web-7d9f8c6b5-x2c4z".into(),
            container: "app",
            hours: 48,
            cpu_millicores: |_| 200,
            memory_bytes: |_| 100 * MIB,
            // Half of the CFS periods throttled: flagged `throttled`.
            throttled_percent: Some(50),
            oom_at: None,
        },
        Series {
            namespace: "shop",
            pod: "web-7d9f8c6b5-b9k2m".into(),
            container: "app",
            hours: 48,
            cpu_millicores: |o| {
                if (at(10)..at(11)).contains(&o) {
                    1000
                } else {
                    200
                }
            },
            memory_bytes: |o| {
                if o == at(20) + 180 {
                    200 * MIB
                } else {
                    100 * MIB
                }
            },
            throttled_percent: None,
            oom_at: None,
        },
        // webhook: not a target, same container name, a name that starts like web's.
        Series {
            namespace: "shop",
            pod: "webhook-5b7c9d8f6-qwrtz".into(),
            container: "app",
            hours: 48,
            cpu_millicores: |_| 4000,
            memory_bytes: |_| 1024 * MIB,
            throttled_percent: None,
            oom_at: Some(at(1)),
        },
        // db: 100m for 36 hours, then 400m for 12 (25 % of the time): the 90th
        // percentile is 400m; 300 MiB throughout.
        Series {
            namespace: "shop",
            pod: "db-0".into(),
            container: "postgres",
            hours: 48,
            cpu_millicores: |o| if o < at(36) { 100 } else { 400 },
            memory_bytes: |_| 300 * MIB,
            throttled_percent: Some(10),
            // OOM-killed at hour 30: flagged `oom-killed`.
            oom_at: Some(at(30)),
        },
        // agent: 12 hours of data, under the 24h minimum.
        Series {
            namespace: "shop",
            pod: "agent-x2c4z".into(),
            container: "agent",
            hours: 12,
            cpu_millicores: |_| 50,
            memory_bytes: |_| 64 * MIB,
            throttled_percent: None,
            oom_at: None,
        },
    ]
}

/// 30 pods of one Deployment in namespace `big`.
fn big_series() -> Vec<Series> {
    let chars = b"bcdfghjklmnpqrstvwxz2456789";
    (0..30)
        .map(|i| Series {
            namespace: "big",
            pod: format!(
                "many-7d9f8c6b5-x2c{}{}",
                chars[i / chars.len()] as char,
                chars[i % chars.len()] as char
            ),
            container: "app",
            hours: 1,
            cpu_millicores: |_| 10,
            memory_bytes: |_| 10 * MIB,
            throttled_percent: None,
            oom_at: None,
        })
        .collect()
}

fn requests(r: &Recommendation) -> Vec<(String, String, String)> {
    r.containers
        .iter()
        .map(|c| {
            let q = |v: &Option<kerf_api::Quantity>| v.as_ref().map_or("-".into(), |q| q.0.clone());
            (c.name.clone(), q(&c.requests.cpu), q(&c.requests.memory))
        })
        .collect()
}

#[tokio::test]
async fn recommendations_from_a_real_prometheus() -> anyhow::Result<()> {
    let (start, now) = times()?;
    let mut series = shop_series();
    series.extend(big_series());
    let prom = prometheus_with(&openmetrics(&series, start), &[]).await?;
    let client = client(&prom.url)?;
    let targets = [
        target("shop", "Deployment", "web", &["app"]),
        target("shop", "StatefulSet", "db", &["postgres"]),
        target("shop", "DaemonSet", "agent", &["agent"]),
        target("shop", "Deployment", "gone", &["app"]),
    ];
    let settings = PromSettings::default();
    let recs = recommend(&client, &targets, &settings, now).await?;
    let names: Vec<_> = recs.iter().map(|r| r.workload.name.as_str()).collect();
    assert_eq!(names, ["web", "db"], "agent has 12h of data, gone has none");
    let (web, db) = (&recs[0], &recs[1]);
    // p90 of 200m + 15 % = 230m; peak 200 MiB + 15 % = 230 MiB.
    assert_eq!(
        requests(web),
        [("app".into(), "230m".into(), "230Mi".into())]
    );
    // p90 of 400m + 15 % = 460m; 300 MiB + 15 % = 345 MiB.
    assert_eq!(
        requests(db),
        [("postgres".into(), "460m".into(), "345Mi".into())]
    );
    // web: 50 % of its periods throttled (at least 25 %); db: 10 % throttled, one OOM kill.
    assert_eq!(web.containers[0].flags, [ContainerFlag::Throttled]);
    assert_eq!(db.containers[0].flags, [ContainerFlag::OomKilled]);
    for r in [web, db] {
        assert_eq!(
            r.data_coverage.covered.as_str(),
            "48h",
            "{}",
            r.workload.name
        );
        assert_eq!(r.data_coverage.window.as_str(), "336h");
        assert_eq!(r.confidence.as_str(), "0.14", "48h of 336h, rounded down");
        assert_eq!(r.generated_at, now);
    }
    // The same data an hour later: the same ids.
    let later = recommend(&client, &targets, &settings, now + TimeDelta::hours(1)).await?;
    let ids = |v: &[Recommendation]| {
        v.iter()
            .map(|r| r.recommendation_id.clone())
            .collect::<Vec<_>>()
    };
    assert_eq!(ids(&later), ids(&recs));

    // Six series per query at most (web alone reads six: CPU, memory, two CFS counters):
    // the batch is halved until each part fits, and the numbers are the same.
    let small = PromSettings {
        series_limit: 6,
        ..PromSettings::default()
    };
    assert_eq!(recommend(&client, &targets, &small, now).await?, recs);

    // 30 pods x (CPU + memory) = 60 series for one workload, over a limit of 50: an error,
    // no partial list.
    let strict = PromSettings {
        series_limit: 50,
        ..PromSettings::default()
    };
    let mut both = targets.to_vec();
    both.push(target("big", "Deployment", "many", &["app"]));
    match recommend(&client, &both, &strict, now).await {
        Err(e @ PromError::SeriesLimit { .. }) => assert_eq!(
            e.to_string(),
            "Deployment big/many has 60 usage series in the window, over the limit of 50 per \
             query: no recommendation is computed (raise the series limit or shorten the window)"
        ),
        other => panic!("expected the series limit, got {other:?}"),
    }
    Ok(())
}

#[tokio::test]
async fn an_unreachable_prometheus_is_an_error() -> anyhow::Result<()> {
    let url = format!("http://127.0.0.1:{}", prometheus_support::free_port()?);
    let targets = [target("shop", "Deployment", "web", &["app"])];
    let got = recommend(
        &client(&url)?,
        &targets,
        &PromSettings::default(),
        Utc::now(),
    )
    .await;
    match got {
        Err(e @ PromError::Unreachable { .. }) => {
            assert!(
                e.to_string()
                    .starts_with(&format!("Prometheus at {url}/ cannot be reached")),
                "{e}"
            );
        }
        other => panic!("expected unreachable, got {other:?}"),
    }
    Ok(())
}

#[tokio::test]
async fn a_prometheus_that_does_not_answer_times_out() -> anyhow::Result<()> {
    // Connections are accepted by the kernel and never answered.
    let silent = std::net::TcpListener::bind("127.0.0.1:0")?;
    let url = format!("http://{}", silent.local_addr()?);
    let settings = PromSettings {
        query_timeout: Duration::from_millis(500),
        ..PromSettings::default()
    };
    let targets = [target("shop", "Deployment", "web", &["app"])];
    match recommend(&client(&url)?, &targets, &settings, Utc::now()).await {
        Err(e @ PromError::Timeout { .. }) => assert_eq!(
            e.to_string(),
            format!("Prometheus at {url}/ did not answer within 500ms for namespace shop")
        ),
        other => panic!("expected a timeout, got {other:?}"),
    }
    Ok(())
}

#[tokio::test]
async fn a_prometheus_that_refuses_the_query_is_an_error() -> anyhow::Result<()> {
    let (start, now) = times()?;
    // 48 hours of one-minute samples are more than 1000 samples.
    let prom = prometheus_with(
        &openmetrics(&shop_series(), start),
        &["--query.max-samples=1000"],
    )
    .await?;
    let targets = [target("shop", "StatefulSet", "db", &["postgres"])];
    match recommend(&client(&prom.url)?, &targets, &PromSettings::default(), now).await {
        Err(e @ PromError::Refused { .. }) => {
            let text = e.to_string();
            assert!(
                text.starts_with(&format!(
                    "Prometheus at {}/ refused a query for namespace shop: execution: ",
                    prom.url
                )),
                "{text}"
            );
            assert!(text.contains("too many samples"), "{text}");
        }
        other => panic!("expected a refused query, got {other:?}"),
    }
    Ok(())
}
