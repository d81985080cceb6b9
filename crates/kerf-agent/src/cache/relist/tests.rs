//! A relist of one namespace replaces that namespace's entries and nothing else, and
//! reports the workloads (or the namespace) whose entries came, went or changed.

use kerf_api::WorkloadKind;
use serde_json::{Value, json};

use super::*;
use crate::cache::cluster::{HpaWire, PdbWire};
use crate::cache::pods::PodWire;
use crate::cache::types::{Change, Interner, WorkloadKey};
use crate::cache::workloads::{DeploymentWire, ReplicaSetWire, WorkloadIndex};

fn decode<T: serde::de::DeserializeOwned>(v: Value) -> T {
    serde_json::from_value(v).expect("fixture decodes")
}

/// Pod `name` of ReplicaSet `<deployment>-abc12` in `ns`.
fn pod(ns: &str, deployment: &str, name: &str) -> PodInfo {
    let wire: PodWire = decode(json!({
        "metadata": {"name": name, "namespace": ns, "uid": format!("uid-{ns}-{name}"),
            "resourceVersion": "1", "labels": {"pod-template-hash": "abc12"},
            "ownerReferences": [{"apiVersion": "apps/v1", "kind": "ReplicaSet",
                "name": format!("{deployment}-abc12"), "uid": "rs", "controller": true}]},
        "spec": {"containers": [{"name": "app"}]},
    }));
    PodInfo::from_wire(wire, &mut Interner::default())
}

/// ReplicaSet `<deployment>-<hash>` of Deployment `deployment` in `ns`.
fn replicaset(ns: &str, deployment: &str, hash: &str) -> ReplicaSetInfo {
    let wire: ReplicaSetWire = decode(json!({
        "metadata": {"name": format!("{deployment}-{hash}"), "namespace": ns,
            "ownerReferences": [{"apiVersion": "apps/v1", "kind": "Deployment",
                "name": deployment, "uid": "d", "controller": true}]},
    }));
    ReplicaSetInfo::from_wire(wire, &mut Interner::default())
}

/// HPA `name` scaling Deployment `name` in `ns`.
fn hpa(ns: &str, name: &str) -> HpaInfo {
    let wire: HpaWire = decode(json!({
        "metadata": {"name": name, "namespace": ns},
        "spec": {"scaleTargetRef": {"apiVersion": "apps/v1", "kind": "Deployment",
            "name": name}, "maxReplicas": 3},
    }));
    HpaInfo::from_wire(wire, &mut Interner::default())
}

/// PDB `name` in `ns`.
fn pdb(ns: &str, name: &str) -> PdbInfo {
    let wire: PdbWire = decode(json!({
        "metadata": {"name": name, "namespace": ns},
        "spec": {"minAvailable": 1},
    }));
    PdbInfo::from_wire(wire, &mut Interner::default())
}

fn deployment_key(ns: &str, name: &str) -> Change {
    Change::Workload(WorkloadKey::new(ns, WorkloadKind::Deployment, name))
}

#[test]
fn a_relist_of_one_namespace_keeps_the_pods_of_the_others_and_reports_the_gone_ones() {
    let mut index = PodIndex::default();
    let mut changes = ChangeSet::new();
    let items = vec![
        pod("a", "web", "web-abc12-1"),
        pod("b", "api", "api-abc12-1"),
    ];
    relist(&mut index, None, items, &mut changes);

    let mut changes = ChangeSet::new();
    relist(&mut index, Some("a"), Vec::new(), &mut changes);
    assert!(index.get("a", "web-abc12-1").is_none());
    assert!(index.owned_by("a", "ReplicaSet", "web-abc12").is_empty());
    assert!(index.get("b", "api-abc12-1").is_some());
    assert_eq!(index.owned_by("b", "ReplicaSet", "api-abc12").len(), 1);
    assert_eq!(changes, ChangeSet::from([deployment_key("a", "web")]));

    let mut changes = ChangeSet::new();
    let items = vec![pod("a", "web", "web-abc12-2"), pod("a", "db", "db-abc12-1")];
    relist(&mut index, Some("a"), items, &mut changes);
    assert_eq!(index.len(), 3);
    assert_eq!(
        changes,
        ChangeSet::from([deployment_key("a", "web"), deployment_key("a", "db")])
    );
}

#[test]
fn a_relist_of_one_namespace_that_finds_the_same_pods_reports_nothing() {
    let mut index = PodIndex::default();
    let items = vec![
        pod("a", "web", "web-abc12-1"),
        pod("b", "api", "api-abc12-1"),
    ];
    relist(&mut index, None, items, &mut ChangeSet::new());
    let mut changes = ChangeSet::new();
    relist(
        &mut index,
        Some("a"),
        vec![pod("a", "web", "web-abc12-1")],
        &mut changes,
    );
    assert!(changes.is_empty(), "{changes:?}");
    assert_eq!(index.owned_by("a", "ReplicaSet", "web-abc12").len(), 1);
    assert_eq!(index.len(), 2);
}

#[test]
fn a_relist_of_one_namespace_keeps_the_replicasets_of_the_others() {
    let mut index = ReplicaSetIndex::default();
    let items = vec![
        replicaset("a", "web", "abc12"),
        replicaset("b", "web", "abc12"),
    ];
    relist(&mut index, None, items, &mut ChangeSet::new());
    let mut changes = ChangeSet::new();
    let items = vec![replicaset("a", "web", "def34")];
    relist(&mut index, Some("a"), items, &mut changes);
    let names = |ns| -> Vec<String> {
        let sets = index.of_deployment(ns, "web");
        sets.iter().map(|rs| rs.name.to_string()).collect()
    };
    assert_eq!(names("a"), ["web-def34"]);
    assert_eq!(names("b"), ["web-abc12"]);
    assert_eq!(changes, ChangeSet::from([deployment_key("a", "web")]));
}

#[test]
fn a_relist_of_one_namespace_keeps_the_hpas_of_the_others() {
    let mut index = ByWorkload::<HpaInfo>::default();
    let items = vec![hpa("a", "web"), hpa("a", "db"), hpa("b", "web")];
    relist(&mut index, None, items, &mut ChangeSet::new());
    let mut changes = ChangeSet::new();
    relist(&mut index, Some("a"), vec![hpa("a", "web")], &mut changes);
    let key = |ns, name| WorkloadKey::new(ns, WorkloadKind::Deployment, name);
    assert_eq!(index.for_workload(&key("a", "web")).len(), 1);
    assert!(index.for_workload(&key("a", "db")).is_empty());
    assert_eq!(index.for_workload(&key("b", "web")).len(), 1);
    assert!(changes.contains(&deployment_key("a", "db")), "{changes:?}");
    assert!(
        !changes.contains(&deployment_key("b", "web")),
        "{changes:?}"
    );
}

#[test]
fn a_relist_of_one_namespace_keeps_the_pdbs_of_the_others() {
    let mut index = PdbIndex::default();
    let items = vec![pdb("a", "web"), pdb("b", "web")];
    relist(&mut index, None, items, &mut ChangeSet::new());
    let mut changes = ChangeSet::new();
    relist(&mut index, Some("a"), Vec::new(), &mut changes);
    assert!(index.in_namespace("a").is_empty());
    assert_eq!(index.in_namespace("b").len(), 1);
    assert_eq!(changes, ChangeSet::from([Change::Namespace("a".into())]));
}

/// Deployment `name` in `ns`.
fn deployment(ns: &str, name: &str) -> crate::cache::WorkloadInfo {
    let wire: DeploymentWire = decode(json!({
        "metadata": {"name": name, "namespace": ns, "uid": format!("uid-{ns}-{name}")},
    }));
    wire.into_info(&mut Interner::default())
}

#[test]
fn a_relist_of_one_kind_in_one_namespace_keeps_the_other_namespaces_and_kinds() {
    let mut index = WorkloadIndex::default();
    let mut changes = ChangeSet::new();
    let items = vec![deployment("a", "web"), deployment("b", "web")];
    index.replace_kind(WorkloadKind::Deployment, items, &mut changes);
    let mut changes = ChangeSet::new();
    index.replace_kind_in(WorkloadKind::StatefulSet, "a", Vec::new(), &mut changes);
    assert_eq!(index.len(), 2, "a relist of StatefulSets keeps Deployments");
    assert!(changes.is_empty(), "{changes:?}");

    let mut changes = ChangeSet::new();
    index.replace_kind_in(WorkloadKind::Deployment, "a", Vec::new(), &mut changes);
    let key = |ns| WorkloadKey::new(ns, WorkloadKind::Deployment, "web");
    assert!(index.get(&key("a")).is_none());
    assert!(index.get(&key("b")).is_some());
    assert_eq!(changes, ChangeSet::from([deployment_key("a", "web")]));
}
