//! A RightsizingPolicy written in YAML and a workload's annotations, through the agent's
//! conversion (`policy_from_value`), validation (`validate_policy`) and the effective
//! policy (`effective_policy`, which also selects the policy and reads the annotations).
//!
//! Input: a YAML stream; the first document is the policy object, the second (optional) the
//! workload: `namespace`, `kind`, `name`, `labels`, `annotations`, `namespaceLabels`.

use std::collections::BTreeMap;

use kerf_api::wellknown::{ANNOTATION_ALLOW_DISRUPTION, ANNOTATION_MODE};
use kerf_api::{Mode, Resource, WorkloadKind};
use kerf_decide::effective::{PolicyInputs, effective_policy};
use kerf_decide::select::WorkloadMeta;
use serde_json::Value;

fn strings(v: &Value, key: &str) -> BTreeMap<String, String> {
    serde_json::from_value(v[key].clone()).unwrap_or_default()
}

fn workload(v: &Value) -> WorkloadMeta {
    let text = |key: &str| v[key].as_str().unwrap_or_default().to_owned();
    WorkloadMeta {
        namespace: text("namespace"),
        namespace_labels: strings(v, "namespaceLabels"),
        kind: WorkloadKind::parse(&text("kind")).unwrap_or(WorkloadKind::Deployment),
        name: text("name"),
        labels: strings(v, "labels"),
        annotations: strings(v, "annotations"),
    }
}

/// One input of the target.
pub fn run(data: &[u8]) {
    let mut docs = Vec::new();
    for doc in serde_yaml::Deserializer::from_slice(data).take(2) {
        match serde::Deserialize::deserialize(doc) {
            Ok(v) => docs.push(v),
            Err(_) => return,
        }
    }
    let Some(policy) = docs.first() else {
        return;
    };
    let policies: Vec<_> = kerf_api::validate::policy_from_value(policy)
        .into_iter()
        .collect();
    for p in &policies {
        let _ = kerf_api::validate::validate_policy(&p.spec);
    }
    let meta = workload(docs.get(1).unwrap_or(&Value::Null));
    let inputs = PolicyInputs {
        workload: &meta,
        policies: &policies,
        hub_fleet: None,
        hub_cluster: None,
        cluster_defaults: None,
        hub_override: None,
    };
    let ep = effective_policy(&inputs);
    let _ = ep.values_hash();
    // An annotation the agent cannot read never widens what it may do.
    let a = &meta.annotations;
    if a.get(ANNOTATION_MODE)
        .is_some_and(|m| Mode::parse(m.trim()).is_none())
    {
        for r in [Resource::Cpu, Resource::Memory] {
            assert_eq!(ep.mode_of(r), Mode::Off, "invalid mode annotation {a:?}");
        }
    }
    if ep.allow_disruption {
        let v = a.get(ANNOTATION_ALLOW_DISRUPTION).map(|v| v.trim());
        assert_eq!(v, Some("true"), "disruption allowed by {a:?}");
    }
}
