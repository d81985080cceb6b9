//! Hub answers as the agent decodes them (`kerf_agent::hub::decode`) and what it makes of
//! them: a recommendation list becomes rsr specs and names (`rsr_sync`) and parsed
//! quantities; a configuration's default layers and overrides go through the effective
//! policy; an events answer and an error answer decode.
//!
//! Input: the first byte picks the answer (`r` recommendations, `c` config, `e` events,
//! anything else an error answer); the rest is the body.

use chrono::DateTime;
use kerf_agent::hub::{HubEndpoint, decode};
use kerf_agent::rsr_sync::{MAX_NAME_LEN, rsr_name, spec_for};
use kerf_api::hub::{ClusterConfig, EventBatchResponse, HubError, RecommendationList};
use kerf_api::{Resource, WorkloadKind};
use kerf_decide::effective::{PolicyInputs, effective_policy};
use kerf_decide::select::WorkloadMeta;

fn recommendations(body: &[u8]) {
    let Ok(list) = decode::<RecommendationList>(HubEndpoint::Recommendations, body) else {
        return;
    };
    let now = DateTime::from_timestamp(1_774_744_200, 0).unwrap_or_default();
    for rec in &list.recommendations {
        let Some(kind) = WorkloadKind::parse(&rec.workload.kind) else {
            continue;
        };
        let name = rsr_name(kind, &rec.workload.name, |n| n.len() % 2 == 0);
        assert!(name.len() <= MAX_NAME_LEN, "{name:?}");
        let spec = spec_for(rec, kind, "uid", &[], &[], now);
        assert!(serde_json::to_value(&spec).is_ok());
        for c in &spec.containers {
            for r in [Resource::Cpu, Resource::Memory] {
                for q in [c.requests.get(r), c.limits.get(r)].into_iter().flatten() {
                    let _ = kerf_decide::quantity::parse(r, q);
                }
            }
        }
    }
}

fn config(body: &[u8]) {
    let Ok(config) = decode::<ClusterConfig>(HubEndpoint::Config, body) else {
        return;
    };
    let meta = WorkloadMeta {
        namespace: "demo".to_owned(),
        namespace_labels: Default::default(),
        kind: WorkloadKind::Deployment,
        name: "web".to_owned(),
        labels: Default::default(),
        annotations: Default::default(),
    };
    let overrides = config.overrides.iter().map(|o| Some(&o.spec));
    for hub_override in std::iter::once(None).chain(overrides) {
        let ep = effective_policy(&PolicyInputs {
            workload: &meta,
            policies: &[],
            hub_fleet: Some(&config.defaults.fleet),
            hub_cluster: Some(&config.defaults.cluster),
            cluster_defaults: None,
            hub_override,
        });
        let _ = ep.values_hash();
    }
}

/// One input of the target.
pub fn run(data: &[u8]) {
    let Some((&which, body)) = data.split_first() else {
        return;
    };
    match which {
        b'r' => recommendations(body),
        b'c' => config(body),
        b'e' => {
            let _ = decode::<EventBatchResponse>(HubEndpoint::Events, body);
        }
        _ => {
            let _ = decode::<HubError>(HubEndpoint::Events, body);
        }
    }
}
