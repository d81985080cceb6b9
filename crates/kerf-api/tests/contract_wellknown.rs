//! The well-known names: reasons, their types and the Kubernetes Event types.

use std::collections::BTreeSet;

use kerf_api::EventType;
use kerf_api::wellknown::{
    self, CONDITION_REASONS, DETAIL_KEYS, REASONS, is_camel_case, k8s_event_type, reasons_for,
};

// rule: EV-20
#[test]
fn ev_20_every_reason_is_camel_case() {
    for reason in REASONS.iter().chain(CONDITION_REASONS) {
        assert!(is_camel_case(reason), "{reason} is not CamelCase");
    }
    assert!(!is_camel_case("modeOff"));
    assert!(!is_camel_case("Mode_Off"));
    assert!(!is_camel_case("MODE"));
    assert!(!is_camel_case(""));
}

// rule: EV-09
#[test]
fn ev_09_each_reason_belongs_to_exactly_one_type_and_reasons_lists_them_all() {
    let mut by_type = Vec::new();
    for t in EventType::ALL {
        by_type.extend_from_slice(reasons_for(t));
    }
    let unique: BTreeSet<&str> = by_type.iter().copied().collect();
    assert_eq!(
        unique.len(),
        by_type.len(),
        "a reason is listed for two types"
    );
    let all: BTreeSet<&str> = REASONS.iter().copied().collect();
    assert_eq!(all.len(), REASONS.len(), "REASONS lists a reason twice");
    assert_eq!(unique, all);
    assert_eq!(REASONS.len(), 37);
}

// rule: EV-09
#[test]
fn ev_09_reasons_of_each_type_are_the_contracts() {
    assert_eq!(
        reasons_for(EventType::Applied),
        ["RecommendationApplied", "ApprovedOnce"]
    );
    assert_eq!(
        reasons_for(EventType::Skipped),
        [
            "ModeOff",
            "ModeAudit",
            "NoSignificantChange",
            "RecommendationStale",
            "RevertRequested",
            "OutOfScope"
        ]
    );
    assert_eq!(
        reasons_for(EventType::Fallback),
        ["ResizeInfeasible", "ResizeDeferredTimeout"]
    );
    assert_eq!(
        reasons_for(EventType::RolledBack),
        ["OOMKills", "Restarts", "Throttling"]
    );
    assert_eq!(
        reasons_for(EventType::Released),
        ["ModeChanged", "Reverted"]
    );
    assert_eq!(
        reasons_for(EventType::Failed),
        ["ApplyError", "ResizeError", "RollbackError", "ReleaseError"]
    );
    let blocked = reasons_for(EventType::Blocked);
    assert_eq!(blocked.len(), 18);
    for r in [
        "Paused",
        "SingleReplicaUnsafe",
        "PodDisruptionBudget",
        "WebhookCertificateUnusable",
        "HPACoupled",
        "SourceUnavailable",
        "VPAActive",
    ] {
        assert!(blocked.contains(&r), "{r} missing from blocked");
    }
    assert!(wellknown::is_reason_of(EventType::Blocked, "Cooldown"));
    assert!(!wellknown::is_reason_of(EventType::Skipped, "Cooldown"));
}

// rule: EV-22
#[test]
fn ev_22_condition_only_reasons_stay_out_of_the_event_reasons() {
    for r in CONDITION_REASONS {
        assert!(
            !REASONS.contains(r),
            "{r} is both an event and a condition-only reason"
        );
    }
    for r in [
        "Watching",
        "Healthy",
        "NotBlocked",
        "InvalidAnnotation",
        "Valid",
    ] {
        assert!(CONDITION_REASONS.contains(&r), "{r} missing");
    }
}

// rule: EV-08
#[test]
fn ev_08_warning_for_failed_rolled_back_and_fallback_normal_otherwise() {
    for t in EventType::ALL {
        let expected = match t {
            EventType::Failed | EventType::RolledBack | EventType::Fallback => "Warning",
            _ => "Normal",
        };
        assert_eq!(k8s_event_type(t), expected, "{t}");
    }
}

// rule: EV-61
#[test]
fn ev_61_well_known_detail_keys_are_spelled_as_the_contract() {
    let expected = [
        "oomKills",
        "restarts",
        "throttlingRatio",
        "watchDuration",
        "resizeStatus",
        "previousMode",
        "newMode",
        "error",
        "hpa",
        "hpaResource",
        "hpaTargetFrom",
        "hpaTargetTo",
        "approvalId",
        "approvedBy",
        "pauseScope",
        "fallbackReason",
        "pod",
        "canary",
        "pods",
    ];
    assert_eq!(DETAIL_KEYS, expected);
}

#[test]
fn names_of_annotations_labels_and_managers() {
    assert_eq!(wellknown::ANNOTATION_MODE, "kerf.getkerf.dev/mode");
    assert_eq!(wellknown::ANNOTATION_STRATEGY, "kerf.getkerf.dev/strategy");
    assert_eq!(
        wellknown::ANNOTATION_ALLOW_DISRUPTION,
        "kerf.getkerf.dev/allow-disruption"
    );
    assert_eq!(wellknown::ANNOTATION_POLICY, "kerf.getkerf.dev/policy");
    assert_eq!(
        wellknown::LABEL_WORKLOAD_KIND,
        "kerf.getkerf.dev/workload-kind"
    );
    assert_eq!(
        wellknown::LABEL_WORKLOAD_NAME,
        "kerf.getkerf.dev/workload-name"
    );
    assert_eq!(
        wellknown::API_GROUP_VERSION,
        format!("{}/{}", wellknown::API_GROUP, wellknown::API_VERSION)
    );
    let managers = [
        wellknown::FIELD_MANAGER,
        wellknown::FIELD_MANAGER_RELEASED,
        wellknown::FIELD_MANAGER_HPA,
    ];
    assert_eq!(managers, ["kerf", "kerf-released", "kerf-hpa"]);
}

#[test]
fn crd_group_and_version_match_the_well_known_names() {
    use kube::CustomResourceExt;
    let crd = kerf_api::RightsizingPolicy::crd();
    assert_eq!(crd.spec.group, wellknown::API_GROUP);
    assert_eq!(
        kerf_api::RightsizingPolicy::api_resource().api_version,
        wellknown::API_GROUP_VERSION
    );
}
