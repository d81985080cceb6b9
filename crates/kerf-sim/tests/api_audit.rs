//! Request accounting: the sim counts every request its API server answers, tells writes
//! (POST, PUT, PATCH, DELETE, not dry runs) from reads and Lease renewals from other writes,
//! and a test can snapshot and reset the log.

use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::ConfigMap;
use kerf_sim::api::audit::AuditSnapshot;
use kerf_sim::sim::{Sim, SimConfig};
use kube::Api;
use kube::api::{DeleteParams, ListParams, Patch, PatchParams, PostParams};
use serde_json::json;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_request_is_counted_and_writes_are_told_apart() -> anyhow::Result<()> {
    let sim = Sim::start(SimConfig {
        run_controllers: false,
        ..SimConfig::default()
    })
    .await?;
    let client = sim.client();
    let cms: Api<ConfigMap> = Api::namespaced(client.clone(), "default");
    let leases: Api<Lease> = Api::namespaced(client.clone(), "kube-node-lease");
    let cm: ConfigMap =
        serde_json::from_value(json!({"metadata": {"name": "a"}, "data": {"k": "v"}}))?;
    let lease: Lease = serde_json::from_value(json!({"metadata": {"name": "l"},
        "spec": {"holderIdentity": "x", "leaseDurationSeconds": 15}}))?;
    leases.create(&PostParams::default(), &lease).await?;
    let before = sim.audit().reset();
    assert!(before.total >= 1, "{before:?}");
    assert_eq!(
        before.mutating_except_leases, 1,
        "the Lease create is a write"
    );

    // Reads do not count as writes.
    cms.list(&ListParams::default()).await?;
    assert!(cms.get_opt("missing").await?.is_none());
    assert_eq!(sim.audit().mutating(), 0);
    assert_eq!(sim.audit().total(), 2);

    writes_of_each_kind(&cms, &leases, &cm).await?;
    the_log_tells_the_writes_apart(&sim.audit().snapshot());

    // Reset returns the counts and starts over.
    let taken = sim.audit().reset();
    assert_eq!(taken.mutating, 5);
    assert_eq!(sim.audit().snapshot().total, 0);
    Ok(())
}

/// A create, a refused create (still a write attempt), a dry run (not one), a patch with a
/// field manager, a delete, and a Lease renewal.
async fn writes_of_each_kind(
    cms: &Api<ConfigMap>,
    leases: &Api<Lease>,
    cm: &ConfigMap,
) -> anyhow::Result<()> {
    let pp = PostParams {
        field_manager: Some("tester".into()),
        ..PostParams::default()
    };
    cms.create(&pp, cm).await?;
    let again = cms.create(&pp, cm).await;
    assert!(
        matches!(again, Err(kube::Error::Api(ref s)) if s.code == 409),
        "{again:?}"
    );
    let dry = PostParams {
        dry_run: true,
        ..PostParams::default()
    };
    let mut other = cm.clone();
    other.metadata.name = Some("b".into());
    cms.create(&dry, &other).await?;
    cms.patch(
        "a",
        &PatchParams::apply("applier").force(),
        &Patch::Apply(json!({"apiVersion": "v1", "kind": "ConfigMap", "data": {"k": "w"}})),
    )
    .await?;
    cms.delete("a", &DeleteParams::default()).await?;
    // A Lease renewal.
    leases
        .patch(
            "l",
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"holderIdentity": "y"}})),
        )
        .await?;

    Ok(())
}

/// The log of [`writes_of_each_kind`]: the counts, each write with its path, status and
/// manager, the dry run apart, the Lease renewal last.
#[allow(clippy::expect_used)] // test helper: a failure fails the test
fn the_log_tells_the_writes_apart(s: &AuditSnapshot) {
    assert_eq!(s.total, 8, "{:#?}", s.records);
    assert_eq!(s.mutating, 5, "{:#?}", s.records);
    assert_eq!(s.mutating_except_leases, 4);
    let writes: Vec<(String, String, u16, String)> = s
        .writes_except_leases()
        .iter()
        .map(|r| {
            (
                r.method.to_string(),
                r.path.clone(),
                r.status,
                r.manager.clone(),
            )
        })
        .collect();
    let cm_path = "/api/v1/namespaces/default/configmaps";
    assert_eq!(
        writes[0],
        ("POST".into(), cm_path.into(), 201, "tester".into())
    );
    assert_eq!(
        writes[1],
        ("POST".into(), cm_path.into(), 409, "tester".into())
    );
    assert_eq!(writes[2].0, "PATCH");
    assert_eq!(writes[2].1, format!("{cm_path}/a"));
    assert_eq!(writes[2].3, "applier");
    assert_eq!(writes[3].0, "DELETE");
    let dry_run: Vec<_> = s.records.iter().filter(|r| r.dry_run).collect();
    assert_eq!(dry_run.len(), 1);
    assert!(!dry_run[0].is_mutating());
    let renewal = s.records.last().cloned().expect("a record");
    assert!(renewal.is_lease_renewal(), "{renewal}");
    assert_eq!(renewal.status, 200, "{renewal}");
    assert!(
        renewal
            .to_string()
            .contains("PATCH /apis/coordination.k8s.io/v1/namespaces/kube-node-lease/leases/l")
    );
}
