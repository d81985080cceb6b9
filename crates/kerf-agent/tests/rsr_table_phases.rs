//! `kubectl get rsr -A` and `kubectl get rsr -A -o wide` (the real kubectl 1.32, against
//! kerf-sim) for every phase: each rsr's status is built by the status code the agent runs from
//! a real decision, written through the status subresource, and the table's PHASE, CPU,
//! MEMORY, REASON and wide columns (POLICY, CONFIDENCE, LAST CHANGE, NEXT) are checked.

use kerf_testkit::decide as pipeline_fixture;

use std::collections::BTreeMap;

use chrono::{DateTime, Duration, Utc};
use k8s_openapi::api::core::v1::Namespace;
use kerf_api::policy::{Mode, Strategy, Window};
use kerf_api::rsr::{
    ChangeProgress, ChangeRecord, ChangeState, RightsizingRecommendationStatus, RollbackRecord,
    Summary,
};
use kerf_api::wellknown as wk;
use kerf_api::{Resource, RightsizingRecommendation};
use kerf_decide::effective::{Layer, Sourced};
use kerf_decide::facts::Facts;
use kerf_decide::status::Invalid;
use kerf_testkit::{kubectl_stdout, table};
use kube::api::{Patch, PatchParams, PostParams};
use kube::{Api, Client};
use pipeline_fixture::status::{audit_status, build, in_place_change, invalid_only};
use pipeline_fixture::{MI, facts, now, policy, recommendation, set_mode, set_strategy, values};
use serde_json::json;

const NS: &str = "payments";

/// One rsr of the table: its name, the status the agent builds, and what its row must show.
struct Row {
    name: &'static str,
    status: RightsizingRecommendationStatus,
    /// PHASE, CPU, MEMORY, REASON.
    cells: [&'static str; 4],
    /// POLICY, NEXT.
    wide: [&'static str; 2],
    /// The instant LAST CHANGE counts from.
    last_change: Option<DateTime<Utc>>,
}

/// The status before the pass: change `c`, and the summary an earlier no-op pass would
/// have left had it overwritten REASON and written memory in bytes.
fn with_change(c: ChangeRecord) -> RightsizingRecommendationStatus {
    RightsizingRecommendationStatus {
        change: Some(Box::new(c)),
        summary: Some(Summary {
            cpu: Some("500m".into()),
            memory: Some("536870912".into()),
            reason: Some(wk::REASON_NO_SIGNIFICANT_CHANGE.into()),
            ..Default::default()
        }),
        ..Default::default()
    }
}

/// The checkout template: 500m/512Mi, the hub recommending 300m/384Mi.
fn checkout() -> Facts {
    let mut f = facts();
    f.workload.containers[0].requests = values(Some(500), Some(512 * MI));
    f.workload.containers[0].limits = values(None, None);
    f.recommendation.containers = vec![recommendation("300m", "384Mi")];
    f
}

/// checkout after its change went in: the template at 300m/384Mi.
fn changed_checkout(cpu: &str, memory: &str) -> Facts {
    let mut f = checkout();
    f.workload.containers[0].requests = values(Some(300), Some(384 * MI));
    f.recommendation.containers = vec![recommendation(cpu, memory)];
    f
}

/// An rsr whose spec does not convert: Pending, Valid=False, nothing decided.
fn pending() -> Row {
    let invalid = [Invalid {
        reason: wk::CONDITION_REASON_INVALID_SPEC,
        message: "spec.containers[0].requests.cpu: not a quantity".into(),
    }];
    let status = invalid_only(&invalid, false);
    Row {
        name: "pending",
        status,
        cells: ["Pending", "", "", "InvalidSpec"],
        wide: ["", ""],
        last_change: None,
    }
}

fn skipped() -> Row {
    Row {
        name: "skipped",
        status: audit_status(),
        cells: ["Skipped", "800m→400m", "2Gi→1536Mi", "ModeAudit"],
        wide: ["shop-default", ""],
        last_change: None,
    }
}

/// The workload went back to auto-patch an hour after its change was released: the
/// cooldown blocks the next change until 24h after the last one.
fn blocked() -> Row {
    let mut f = changed_checkout("250m", "300Mi");
    let mut change = in_place_change(ChangeState::Released);
    change.strategy = Strategy::Rollout;
    change.applied_at = Some(now() - Duration::hours(1));
    Row {
        name: "blocked",
        status: build(&mut f, &policy(), &with_change(change)),
        cells: ["Blocked", "300m→250m", "384Mi→300Mi", "Cooldown"],
        wide: ["shop-default", "2026-06-04T11:00:00Z"],
        last_change: Some(now() - Duration::hours(1)),
    }
}

/// A new recommendation an hour after a change: the cooldown holds it, the values of the
/// change are live, so the rsr stays Applied and NEXT says when the hold ends.
fn applied_held() -> Row {
    let mut f = changed_checkout("250m", "300Mi");
    let mut change = in_place_change(ChangeState::Applied);
    change.strategy = Strategy::Rollout;
    change.applied_at = Some(now() - Duration::hours(1));
    Row {
        name: "applied-held",
        status: build(&mut f, &policy(), &with_change(change)),
        cells: [
            "Applied",
            "300m→250m",
            "384Mi→300Mi",
            "RecommendationApplied",
        ],
        wide: ["shop-default", "2026-06-04T11:00:00Z"],
        last_change: Some(now() - Duration::hours(1)),
    }
}

// rule: AP-24
fn deferred() -> Row {
    let mut f = checkout();
    let mut p = policy();
    set_strategy(&mut p, Strategy::Deferred);
    let window = Window {
        start: Some("2026-06-03T18:00:00Z".into()),
        end: Some("2026-06-03T20:00:00Z".into()),
        ..Default::default()
    };
    p.maintenance_windows = Sourced::new(vec![window].into(), Layer::Policy);
    Row {
        name: "deferred",
        status: build(&mut f, &p, &Default::default()),
        cells: [
            "Deferred",
            "500m→300m",
            "512Mi→384Mi",
            "OutsideMaintenanceWindow",
        ],
        wide: ["shop-default", "2026-06-03T18:00:00Z"],
        last_change: None,
    }
}

/// A change started 10 minutes ago whose resizes are under way.
fn applying() -> Row {
    let mut f = checkout();
    let mut change = in_place_change(ChangeState::Applying);
    change.applied_at = None;
    change.started_at = now() - Duration::minutes(10);
    change.progress = Some(ChangeProgress {
        pods_accepted: 1,
        pods_total: 3,
    });
    Row {
        name: "applying",
        status: build(&mut f, &policy(), &with_change(change)),
        cells: [
            "Applying",
            "500m→300m",
            "512Mi→384Mi",
            "RecommendationApplied",
        ],
        wide: ["shop-default", ""],
        last_change: Some(now() - Duration::minutes(10)),
    }
}

/// A later pass with nothing to do keeps the reason of the change.
fn applied() -> Row {
    let mut f = changed_checkout("300m", "384Mi");
    let mut change = in_place_change(ChangeState::Applied);
    change.strategy = Strategy::Rollout;
    change.applied_at = Some(now() - Duration::days(2));
    Row {
        name: "applied",
        status: build(&mut f, &policy(), &with_change(change)),
        cells: ["Applied", "300m", "384Mi", "RecommendationApplied"],
        wide: ["shop-default", ""],
        last_change: Some(now() - Duration::days(2)),
    }
}

// rule: RB-05
/// An OOM kill rolled back memory only: the pods keep 300m.
fn rolled_back() -> Row {
    let mut f = checkout();
    let mut prev = with_change(in_place_change(ChangeState::RolledBack));
    prev.last_rollback = Some(RollbackRecord {
        time: now() - Duration::minutes(5),
        reason: wk::REASON_OOM_KILLS.into(),
        resources: vec![Resource::Memory],
        change_id: "chg-1".into(),
    });
    Row {
        name: "rolled-back",
        status: build(&mut f, &policy(), &prev),
        cells: ["RolledBack", "300m", "512Mi→384Mi", "OOMKills"],
        wide: ["shop-default", ""],
        last_change: Some(now() - Duration::hours(2)),
    }
}

/// The policy moved an in-place workload to audit: the pods still run 300m.
fn released() -> Row {
    let mut f = checkout();
    f.recommendation.containers = vec![recommendation("250m", "384Mi")];
    let mut p = policy();
    set_mode(&mut p, Mode::Audit, Mode::Audit);
    let prev = with_change(in_place_change(ChangeState::Released));
    Row {
        name: "released",
        status: build(&mut f, &p, &prev),
        cells: ["Released", "300m→250m", "384Mi", "ModeChanged"],
        wide: ["shop-default", ""],
        last_change: Some(now() - Duration::hours(2)),
    }
}

fn rows() -> Vec<Row> {
    vec![
        pending(),
        skipped(),
        blocked(),
        deferred(),
        applying(),
        applied(),
        applied_held(),
        rolled_back(),
        released(),
    ]
}

/// Creates rsr `row.name` in [`NS`] with checkout's recommendation and writes its status
/// through the status subresource.
async fn write(client: &Client, row: &Row) -> anyhow::Result<()> {
    let api: Api<RightsizingRecommendation> = Api::namespaced(client.clone(), NS);
    let rsr = RightsizingRecommendation::new(row.name, checkout().recommendation);
    api.create(&PostParams::default(), &rsr).await?;
    let body = json!({ "status": row.status });
    api.patch_status(row.name, &PatchParams::default(), &Patch::Merge(&body))
        .await?;
    Ok(())
}

/// The age kubectl prints for a `date` column (k8s.io/apimachinery `HumanDuration`).
fn human_duration(d: Duration) -> String {
    let s = d.num_seconds();
    let (m, h) = (d.num_minutes(), d.num_hours());
    match () {
        _ if s < 0 => "0s".into(),
        _ if s < 120 => format!("{s}s"),
        _ if m < 10 && s % 60 == 0 => format!("{m}m"),
        _ if m < 10 => format!("{m}m{}s", s % 60),
        _ if m < 180 => format!("{m}m"),
        _ if h < 8 && m % 60 == 0 => format!("{h}h"),
        _ if h < 8 => format!("{h}h{}m", m % 60),
        _ if h < 48 => format!("{h}h"),
        _ if h < 24 * 8 && h % 24 == 0 => format!("{}d", h / 24),
        _ if h < 24 * 8 => format!("{}d{}h", h / 24, h % 24),
        _ if h < 24 * 365 * 2 => format!("{}d", h / 24),
        _ if h < 24 * 365 * 8 && (h / 24) % 365 == 0 => format!("{}y", h / 24 / 365),
        _ if h < 24 * 365 * 8 => format!("{}y{}d", h / 24 / 365, (h / 24) % 365),
        _ => format!("{}y", h / 24 / 365),
    }
}

fn cells<'a>(
    rows: &'a BTreeMap<String, BTreeMap<String, String>>,
    name: &str,
    cols: &[&str],
) -> Vec<&'a str> {
    cols.iter()
        .map(|c| {
            rows.get(name)
                .and_then(|r| r.get(*c))
                .map_or("(missing)", String::as_str)
        })
        .collect()
}

/// LAST CHANGE as kubectl prints it for `at`, read around the call that printed it.
fn ages(at: Option<DateTime<Utc>>, before: DateTime<Utc>, after: DateTime<Utc>) -> Vec<String> {
    match at {
        None => vec!["".into()],
        Some(t) => vec![human_duration(before - t), human_duration(after - t)],
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_phase_shows_its_values_reason_and_wide_columns_in_kubectl() -> anyhow::Result<()> {
    let sim = kerf_testkit::sim().await?;
    let client = sim.client();
    kerf_testkit::apply_crds(&client).await?;
    let nss: Api<Namespace> = Api::all(client.clone());
    let ns: Namespace = serde_json::from_value(json!({"metadata": {"name": NS}}))?;
    match nss.create(&PostParams::default(), &ns).await {
        Ok(_) => {}
        Err(kube::Error::Api(s)) if s.code == 409 => {}
        Err(e) => return Err(e.into()),
    }
    let rows = rows();
    for row in &rows {
        write(&client, row).await?;
    }
    let kubeconfig = sim.kubeconfig_path();
    let text = kubectl_stdout(kubeconfig, &["get", "rsr", "-A"])?;
    let before = Utc::now();
    let wide_text = kubectl_stdout(kubeconfig, &["get", "rsr", "-A", "-o", "wide"])?;
    let after = Utc::now();
    let (table_rows, wide_rows) = (table(&text), table(&wide_text));
    assert_eq!(table_rows.len(), rows.len(), "{text}");
    for row in &rows {
        let main = ["PHASE", "CPU", "MEMORY", "REASON"];
        assert_eq!(
            cells(&table_rows, row.name, &main),
            row.cells,
            "rsr {}:\n{text}",
            row.name
        );
        assert_eq!(
            cells(&wide_rows, row.name, &main),
            row.cells,
            "rsr {} (-o wide):\n{wide_text}",
            row.name
        );
        let wide = cells(&wide_rows, row.name, &["POLICY", "CONFIDENCE", "NEXT"]);
        let want = [row.wide[0], "0.9", row.wide[1]];
        assert_eq!(wide, want, "rsr {} (-o wide):\n{wide_text}", row.name);
        let last = cells(&wide_rows, row.name, &["LAST CHANGE"])[0];
        let want = ages(row.last_change, before, after);
        assert!(
            want.iter().any(|w| w == last),
            "rsr {}: LAST CHANGE {last:?}, want one of {want:?}:\n{wide_text}",
            row.name
        );
    }
    Ok(())
}
