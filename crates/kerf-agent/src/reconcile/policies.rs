//! RightsizingPolicy status (design D3): `Valid` names every invalid field (a policy that
//! does not convert, or whose selector does not say what it selects, selects no workload;
//! one whose other fields fail validation still takes part, each invalid field counting as
//! its safe value), `matchedWorkloads` counts the workloads its selector matches or that
//! pin it, `governedWorkloads` those it is the selected policy of, `Overlap` names the
//! other policies that match some of the same workloads and which one governs them,
//! `observedGeneration` the generation seen. Only the workloads of the agent's scope are
//! counted: outside it no policy decides. Written only when it differs. A policy that
//! turns invalid, or whose problems or generation change while invalid, also gets one
//! Warning Kubernetes Event with the condition's reason and message.

use std::collections::BTreeMap;

use chrono::{DateTime, SecondsFormat, Utc};
use k8s_openapi::api::core::v1::Event as K8sEvent;
use kerf_api::condition::{Condition, ConditionStatus};
use kerf_api::policy::RightsizingPolicyStatus;
use kerf_api::wellknown as wk;
use kube::api::{Api, ApiResource, DynamicObject, PostParams};
use serde_json::{Value, json};

use kerf_decide::coverage::{PolicyCoverage, coverage, overlap_message};

use crate::cache::{CacheSet, PolicyEntry};
use crate::scope::{Scope, Verdict, in_cache};

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

/// What an invalid policy does, as it is: a policy that does not convert, or whose
/// selector does not say what it selects, selects no workload; one with other invalid
/// fields still takes part, each invalid field counting as its safe value (an invalid
/// freeze window as open).
pub fn invalid_policy_message(converts: bool, selects: bool) -> &'static str {
    match (converts, selects) {
        (false, _) => "policy cannot be read; it selects no workload until fixed",
        (true, false) => {
            "policy's selector does not say what it selects; it selects no workload until fixed"
        }
        (true, true) => {
            "policy has invalid fields; it still applies to the workloads it selects, each invalid field counting as its safe value (an invalid freeze window as open) until fixed"
        }
    }
}

fn log_invalid(name: &str, entry: &PolicyEntry, problems: &str) {
    let converts = entry.policy.is_ok();
    let selects = entry
        .policy
        .as_ref()
        .is_ok_and(|p| kerf_api::validate::selects_explicitly(&p.spec));
    let what = invalid_policy_message(converts, selects);
    tracing::warn!(policy = %name, problems = %problems, "{what}");
}

/// The coverage of every policy that converts, over every workload of the cache in
/// `scope`.
pub fn policy_coverage(cache: &CacheSet, scope: &Scope) -> BTreeMap<String, PolicyCoverage> {
    let policies = super::facts::policies(cache);
    let metas: Vec<_> = cache
        .workloads()
        .iter()
        .filter(|w| in_cache(scope, cache, &w.key) == Verdict::In)
        .map(|w| super::facts::workload_meta(w, cache))
        .collect();
    coverage(&policies, &metas)
}

/// The status a policy should have, built over the one it has. The counts are what
/// selection does, whatever `Valid` says: a policy that selects nothing counts 0.
pub fn desired_status(
    entry: &PolicyEntry,
    previous: &RightsizingPolicyStatus,
    covered: &PolicyCoverage,
    now: DateTime<Utc>,
) -> RightsizingPolicyStatus {
    let mut s = previous.clone();
    s.observed_generation = entry.generation;
    s.matched_workloads = Some(count(covered.matched));
    s.governed_workloads = Some(count(covered.governed));
    let (status, reason, message) = validity(entry);
    let condition = |type_: &str, status, reason: &str, message| Condition {
        type_: type_.to_owned(),
        status,
        reason: reason.to_owned(),
        message,
        last_transition_time: now,
        observed_generation: entry.generation,
    };
    kerf_decide::status::set_condition(
        &mut s.conditions,
        condition(wk::CONDITION_VALID, status, reason, message),
    );
    let overlap = match overlap_message(covered) {
        Some(m) => (ConditionStatus::True, wk::CONDITION_REASON_OVERLAPPING, m),
        None => (
            ConditionStatus::False,
            wk::CONDITION_REASON_NO_OVERLAP,
            String::new(),
        ),
    };
    kerf_decide::status::set_condition(
        &mut s.conditions,
        condition(wk::CONDITION_OVERLAP, overlap.0, overlap.1, overlap.2),
    );
    s
}

fn count(n: u32) -> i32 {
    i32::try_from(n).unwrap_or(i32::MAX)
}

/// Writes the status of every policy whose status differs from the desired one, counting
/// the workloads of `scope`. One failing policy does not stop the others; the errors are
/// returned.
pub async fn sync(
    client: &kube::Client,
    cache: &CacheSet,
    scope: &Scope,
    now: DateTime<Utc>,
) -> Vec<PolicyStatusError> {
    let api: Api<DynamicObject> = Api::all_with(client.clone(), &policy_resource());
    let events: Api<K8sEvent> = Api::namespaced(client.clone(), POLICY_EVENT_NAMESPACE);
    let covered = policy_coverage(cache, scope);
    let none = PolicyCoverage::default();
    let mut errors = Vec::new();
    for entry in cache.policies() {
        let c = covered.get(&*entry.name).unwrap_or(&none);
        if let Err(e) = sync_one(&api, &events, &entry, c, now).await {
            errors.push(e);
        }
    }
    errors
}

async fn sync_one(
    api: &Api<DynamicObject>,
    events: &Api<K8sEvent>,
    entry: &PolicyEntry,
    covered: &PolicyCoverage,
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
    let desired = desired_status(entry, &previous, covered, now);
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
        log_invalid(&name, entry, &c.message);
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

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use kerf_api::RightsizingPolicy;
    use kerf_api::policy::{SELECTOR_NO_TERM_MESSAGE, WorkloadKind};
    use kerf_decide::select::WorkloadMeta;

    use super::*;

    fn entry(name: &str, spec_yaml: &str) -> PolicyEntry {
        let spec = serde_yaml::from_str(spec_yaml).unwrap_or_else(|e| panic!("{e}"));
        PolicyEntry {
            name: name.into(),
            generation: Some(2),
            resource_version: "1".into(),
            policy: Ok(RightsizingPolicy::new(name, spec)),
        }
    }

    fn workload(name: &str) -> WorkloadMeta {
        WorkloadMeta {
            namespace: "shop".into(),
            namespace_labels: BTreeMap::new(),
            kind: WorkloadKind::Deployment,
            name: name.into(),
            labels: BTreeMap::new(),
            annotations: BTreeMap::new(),
        }
    }

    fn condition<'a>(s: &'a RightsizingPolicyStatus, type_: &str) -> &'a Condition {
        s.conditions
            .iter()
            .find(|c| c.type_ == type_)
            .unwrap_or_else(|| panic!("no {type_} condition in {s:?}"))
    }

    fn statuses(entries: &[PolicyEntry]) -> Vec<RightsizingPolicyStatus> {
        let policies: Vec<_> = entries
            .iter()
            .filter_map(|e| e.policy.clone().ok())
            .collect();
        let covered = coverage(&policies, &[workload("checkout"), workload("cart")]);
        let now = DateTime::<Utc>::UNIX_EPOCH;
        entries
            .iter()
            .map(|e| {
                desired_status(
                    e,
                    &RightsizingPolicyStatus::default(),
                    &covered[&*e.name],
                    now,
                )
            })
            .collect()
    }

    // A workload outside the agent's scope is governed by no policy.
    #[test]
    fn the_counts_cover_only_the_workloads_of_the_scope() {
        use crate::cache::workloads::DeploymentWire;
        let cache = CacheSet::new();
        for ns in ["a", "b"] {
            let wire: DeploymentWire = serde_json::from_value(json!({
                "metadata": {"name": "web", "namespace": ns, "uid": ns},
                "spec": {"template": {"spec": {"containers": [{"name": "app"}]}}},
            }))
            .unwrap();
            cache.apply_workload(wire.into_info(&mut crate::cache::Interner::default()));
        }
        cache.apply_policy(entry("both", "selector: {namespaces: [a, b]}"));
        let governed = |scope: &Scope| policy_coverage(&cache, scope)["both"].governed;
        assert_eq!(governed(&Scope::default()), 2);
        let only_a = Scope {
            namespaces: vec!["a".to_owned()],
            ..Scope::default()
        };
        assert_eq!(governed(&only_a), 1);
    }

    // Issue 32: a policy stored without a term (before the CRD had the rule) never acts wider.
    #[test]
    fn a_policy_without_a_term_is_invalid_naming_the_selector_and_governs_nothing() {
        let s = statuses(&[entry("pruned", "selector: {}")]);
        let valid = condition(&s[0], wk::CONDITION_VALID);
        assert_eq!(valid.status, ConditionStatus::False);
        assert_eq!(valid.reason, wk::CONDITION_REASON_INVALID_SPEC);
        assert_eq!(
            valid.message,
            format!("spec.selector: {SELECTOR_NO_TERM_MESSAGE}")
        );
        assert_eq!(
            (s[0].matched_workloads, s[0].governed_workloads),
            (Some(0), Some(0))
        );
        assert_eq!(
            invalid_policy_message(true, false),
            "policy's selector does not say what it selects; it selects no workload until fixed"
        );
    }

    #[test]
    fn both_overlapping_policies_name_each_other_and_the_winner() {
        let s = statuses(&[
            entry("shop", "{priority: 10, selector: {namespaces: [shop]}}"),
            entry("everything", "selector: {all: true}"),
        ]);
        assert_eq!(
            (s[0].matched_workloads, s[0].governed_workloads),
            (Some(2), Some(2))
        );
        assert_eq!(
            (s[1].matched_workloads, s[1].governed_workloads),
            (Some(2), Some(0))
        );
        let shop = condition(&s[0], wk::CONDITION_OVERLAP);
        assert_eq!(shop.status, ConditionStatus::True);
        assert_eq!(shop.reason, wk::CONDITION_REASON_OVERLAPPING);
        assert_eq!(
            shop.message,
            "policy everything (priority 0) also matches 2 workloads: this policy governs 2 \
             (this policy has the higher priority)"
        );
        let everything = condition(&s[1], wk::CONDITION_OVERLAP);
        assert_eq!(
            everything.message,
            "policy shop (priority 10) also matches 2 workloads: shop governs 2 \
             (shop has the higher priority)"
        );
    }

    #[test]
    fn a_policy_alone_on_its_workloads_has_overlap_false() {
        let s = statuses(&[entry("shop", "selector: {namespaces: [shop]}")]);
        let overlap = condition(&s[0], wk::CONDITION_OVERLAP);
        assert_eq!(overlap.status, ConditionStatus::False);
        assert_eq!(overlap.reason, wk::CONDITION_REASON_NO_OVERLAP);
        assert_eq!(
            condition(&s[0], wk::CONDITION_VALID).status,
            ConditionStatus::True
        );
    }
}
