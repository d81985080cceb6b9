//! RightsizingPolicy status (design D3): `Valid` names every invalid field (a policy that
//! does not convert selects no workload; one whose fields fail validation still takes
//! part, each invalid field counting as its safe value), `matchedWorkloads` counts the
//! workloads it is the effective policy of, `observedGeneration` the generation seen.
//! Written only when it differs. A policy that turns invalid, or whose problems or
//! generation change while invalid, also gets one Warning Kubernetes Event with the
//! condition's reason and message.

use std::collections::BTreeMap;

use chrono::{DateTime, SecondsFormat, Utc};
use k8s_openapi::api::core::v1::Event as K8sEvent;
use kerf_api::condition::{Condition, ConditionStatus};
use kerf_api::policy::RightsizingPolicyStatus;
use kerf_api::wellknown as wk;
use kube::api::{Api, ApiResource, DynamicObject, PostParams};
use serde_json::{Value, json};

use crate::cache::{CacheSet, PolicyEntry};
use crate::hub::HubState;
use crate::settings::Settings;

/// Errors of a policy status write.
#[derive(Debug, thiserror::Error)]
pub enum PolicyStatusError {
    /// The API server refused or failed the read or the write (409 included).
    #[error("policy {name}: {source}")]
    Kube {
        /// The policy.
        name: String,
        /// The cause.
        #[source]
        source: kube::Error,
    },
    /// The status could not be serialized.
    #[error("policy {name}: cannot serialize the status: {source}")]
    Encode {
        /// The policy.
        name: String,
        /// The cause.
        #[source]
        source: serde_json::Error,
    },
}

/// The `ApiResource` of RightsizingPolicies, for dynamic access.
pub fn policy_resource() -> ApiResource {
    ApiResource {
        group: wk::API_GROUP.to_owned(),
        version: wk::API_VERSION.to_owned(),
        api_version: wk::API_GROUP_VERSION.to_owned(),
        kind: "RightsizingPolicy".to_owned(),
        plural: "rightsizingpolicies".to_owned(),
    }
}

/// The Valid condition's status, reason and message for a policy entry: every problem,
/// `; `-separated, each naming its field.
pub fn validity(entry: &PolicyEntry) -> (ConditionStatus, &'static str, String) {
    let problems: Vec<String> = match &entry.policy {
        Err(e) => vec![e.to_string()],
        Ok(p) => kerf_api::validate::validate_policy(&p.spec)
            .iter()
            .map(ToString::to_string)
            .collect(),
    };
    if problems.is_empty() {
        (
            ConditionStatus::True,
            wk::CONDITION_REASON_VALID,
            String::new(),
        )
    } else {
        (
            ConditionStatus::False,
            wk::CONDITION_REASON_INVALID_SPEC,
            problems.join("; "),
        )
    }
}

/// What an invalid policy does, as it is: a policy that does not convert selects no
/// workload; one with invalid fields still takes part, each invalid field counting as its
/// safe value (an invalid freeze window as open).
pub fn invalid_policy_message(converts: bool) -> &'static str {
    if converts {
        "policy has invalid fields; it still applies to the workloads it selects, each invalid field counting as its safe value (an invalid freeze window as open) until fixed"
    } else {
        "policy cannot be read; it selects no workload until fixed"
    }
}

fn log_invalid(name: &str, converts: bool, problems: &str) {
    tracing::warn!(policy = %name, problems = %problems, "{}", invalid_policy_message(converts));
}

/// How many workloads each policy is the effective policy of.
pub fn matched_counts(
    cache: &CacheSet,
    hub: &HubState,
    settings: &Settings,
) -> BTreeMap<String, i32> {
    let policies = super::facts::policies(cache);
    let mut out = BTreeMap::new();
    for w in cache.workloads() {
        let p = super::facts::policy_for(&w, cache, &policies, hub, settings);
        if let Some(name) = p.policy_name {
            *out.entry(name).or_insert(0) += 1;
        }
    }
    out
}

/// The status a policy should have, built over the one it has.
pub fn desired_status(
    entry: &PolicyEntry,
    previous: &RightsizingPolicyStatus,
    matched: i32,
    now: DateTime<Utc>,
) -> RightsizingPolicyStatus {
    let mut s = previous.clone();
    s.observed_generation = entry.generation;
    let valid = matches!(validity(entry).0, ConditionStatus::True);
    s.matched_workloads = Some(if valid { matched } else { 0 });
    let (status, reason, message) = validity(entry);
    crate::status::set_condition(
        &mut s.conditions,
        Condition {
            type_: wk::CONDITION_VALID.to_owned(),
            status,
            reason: reason.to_owned(),
            message,
            last_transition_time: now,
            observed_generation: entry.generation,
        },
    );
    s
}

/// Writes the status of every policy whose status differs from the desired one. One
/// failing policy does not stop the others; the errors are returned.
pub async fn sync(
    client: &kube::Client,
    cache: &CacheSet,
    hub: &HubState,
    settings: &Settings,
    now: DateTime<Utc>,
) -> Vec<PolicyStatusError> {
    let api: Api<DynamicObject> = Api::all_with(client.clone(), &policy_resource());
    let events: Api<K8sEvent> = Api::namespaced(client.clone(), POLICY_EVENT_NAMESPACE);
    let counts = matched_counts(cache, hub, settings);
    let mut errors = Vec::new();
    for entry in cache.policies() {
        let matched = counts.get(&*entry.name).copied().unwrap_or(0);
        if let Err(e) = sync_one(&api, &events, &entry, matched, now).await {
            errors.push(e);
        }
    }
    errors
}

async fn sync_one(
    api: &Api<DynamicObject>,
    events: &Api<K8sEvent>,
    entry: &PolicyEntry,
    matched: i32,
    now: DateTime<Utc>,
) -> Result<(), PolicyStatusError> {
    let name = entry.name.to_string();
    let kube_err = |source| PolicyStatusError::Kube {
        name: name.clone(),
        source,
    };
    let Some(mut obj) = api.get_opt(&name).await.map_err(kube_err)? else {
        return Ok(());
    };
    let previous: RightsizingPolicyStatus = obj
        .data
        .get("status")
        .and_then(|v| serde_json::from_value(v.clone()).ok())
        .unwrap_or_default();
    let desired = desired_status(entry, &previous, matched, now);
    if desired == previous {
        return Ok(());
    }
    obj.data["status"] =
        serde_json::to_value(&desired).map_err(|source| PolicyStatusError::Encode {
            name: name.clone(),
            source,
        })?;
    obj.metadata.managed_fields = None;
    api.replace_subresource::<Value>(
        "status",
        &name,
        &PostParams::default(),
        &serde_json::to_value(&obj).map_err(|source| PolicyStatusError::Encode {
            name: name.clone(),
            source,
        })?,
    )
    .await
    .map_err(kube_err)?;
    if let Some(c) = invalid_valid(&desired) {
        log_invalid(&name, entry.policy.is_ok(), &c.message);
    }
    if let Some(c) = invalid_news(&previous, &desired) {
        let body = policy_warning(&name, obj.metadata.uid.as_deref(), c, now);
        create_event(events, &name, body).await;
    }
    Ok(())
}

/// Namespace of the Events on policies: a policy is cluster-scoped, and Kubernetes
/// records the events of cluster-scoped objects in `default` (`kubectl describe rsp`
/// finds them there).
pub const POLICY_EVENT_NAMESPACE: &str = "default";

/// The Valid condition of `status` when it is False.
fn invalid_valid(status: &RightsizingPolicyStatus) -> Option<&Condition> {
    status
        .conditions
        .iter()
        .find(|c| c.type_ == wk::CONDITION_VALID && c.status == ConditionStatus::False)
}

/// The Valid=False condition of `desired` when it is news: `previous` was not invalid
/// with the same message for the same generation. One Warning Event per generation and
/// message, not one per status write.
pub fn invalid_news<'a>(
    previous: &RightsizingPolicyStatus,
    desired: &'a RightsizingPolicyStatus,
) -> Option<&'a Condition> {
    let now = invalid_valid(desired)?;
    let seen = invalid_valid(previous).is_some_and(|before| {
        before.message == now.message && before.observed_generation == now.observed_generation
    });
    (!seen).then_some(now)
}

/// The Warning Kubernetes Event on policy `name` for its Valid=False `condition`. Its
/// name derives from the generation and message, so a second write of the same news
/// (another leader, a retry) makes no second Event.
pub fn policy_warning(
    name: &str,
    uid: Option<&str>,
    condition: &Condition,
    now: DateTime<Utc>,
) -> Value {
    let key = format!(
        "{}/{}",
        condition.observed_generation.unwrap_or(0),
        condition.message
    );
    json!({
        "apiVersion": "v1",
        "kind": "Event",
        "metadata": {
            "name": format!("{name}.{:016x}", fnv1a(key.as_bytes())),
            "namespace": POLICY_EVENT_NAMESPACE,
        },
        "involvedObject": {
            "apiVersion": wk::API_GROUP_VERSION,
            "kind": "RightsizingPolicy",
            "name": name,
            "uid": uid,
        },
        "reason": condition.reason,
        "type": "Warning",
        "message": kerf_api::event::cut_message(&condition.message),
        "action": "validate",
        "source": {"component": super::report::COMPONENT},
        "reportingComponent": super::report::COMPONENT,
        "reportingInstance": super::report::COMPONENT,
        "firstTimestamp": now.to_rfc3339_opts(SecondsFormat::Secs, true),
        "lastTimestamp": now.to_rfc3339_opts(SecondsFormat::Secs, true),
        "eventTime": now.to_rfc3339_opts(SecondsFormat::Micros, true),
        "count": 1,
    })
}

/// 64-bit FNV-1a: a hash that is the same in every process (std's is seeded).
fn fnv1a(bytes: &[u8]) -> u64 {
    bytes.iter().fold(0xcbf2_9ce4_8422_2325, |h, b| {
        (h ^ u64::from(*b)).wrapping_mul(0x0100_0000_01b3)
    })
}

/// Creates the Event; one that exists already (409) is the same news.
async fn create_event(events: &Api<K8sEvent>, policy: &str, body: Value) {
    let event = match serde_json::from_value::<K8sEvent>(body) {
        Ok(e) => e,
        Err(e) => {
            tracing::warn!(policy, error = %e, "policy Event not encoded");
            return;
        }
    };
    match events.create(&PostParams::default(), &event).await {
        Ok(_) => {}
        Err(kube::Error::Api(s)) if s.code == 409 => {}
        Err(e) => tracing::warn!(policy, error = %e, "cannot write the policy's Kubernetes Event"),
    }
}
