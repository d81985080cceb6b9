//! Single-replica arithmetic (design D12; AP-44, AP-45, AP-48, AP-49, AP-50).

use kerf_api::policy::WorkloadKind;
use kerf_decide::replicas::{
    IntOrPercent, PdbInput, ReplicaInput, is_single_replica, pdb_allows_no_disruption,
    resolved_rolling_update, rollout_keeps_a_ready_pod,
};

fn s(v: &str) -> Option<String> {
    Some(v.to_owned())
}

fn deployment(replicas: i64) -> ReplicaInput {
    ReplicaInput {
        kind: WorkloadKind::Deployment,
        replicas: Some(replicas),
        ..ReplicaInput::default()
    }
}

fn pdb(min_available: Option<&str>, max_unavailable: Option<&str>, expected: i64) -> PdbInput {
    PdbInput {
        name: "pdb".into(),
        min_available: min_available.map(str::to_owned),
        max_unavailable: max_unavailable.map(str::to_owned),
        expected_pods: expected,
    }
}

// rule: AP-44
#[test]
fn ap_44_one_replica_deployments_and_statefulsets_are_single() {
    assert!(is_single_replica(&deployment(1)));
    assert!(!is_single_replica(&deployment(2)));
    let sts = ReplicaInput {
        kind: WorkloadKind::StatefulSet,
        replicas: Some(1),
        ..ReplicaInput::default()
    };
    assert!(is_single_replica(&sts));
    // spec.replicas defaults to 1.
    let unset = ReplicaInput {
        kind: WorkloadKind::StatefulSet,
        replicas: None,
        ..ReplicaInput::default()
    };
    assert!(is_single_replica(&unset));
    // A DaemonSet counts only through a PDB.
    let ds = ReplicaInput {
        kind: WorkloadKind::DaemonSet,
        desired_number_scheduled: 1,
        ..ReplicaInput::default()
    };
    assert!(!is_single_replica(&ds));
}

// rule: AP-45
#[test]
fn ap_45_a_pdb_that_allows_no_disruption_makes_a_workload_single() {
    let blocking = [
        pdb(None, Some("0"), 5),
        pdb(None, Some("0%"), 5),
        pdb(Some("5"), None, 5),
        pdb(Some("6"), None, 5),
        pdb(Some("100%"), None, 5),
        pdb(Some("81%"), None, 5),  // 4.05 rounds up to 5
        pdb(None, Some("many"), 5), // unparsable: no disruption
    ];
    for p in blocking {
        assert!(pdb_allows_no_disruption(&p), "{p:?}");
        let w = ReplicaInput {
            pdbs: vec![p],
            ..deployment(5)
        };
        assert!(is_single_replica(&w));
    }
    let allowing = [
        pdb(None, Some("1"), 5),
        pdb(None, Some("10%"), 5), // 0.5 rounds up to 1
        pdb(Some("4"), None, 5),
        pdb(Some("80%"), None, 5),
        pdb(None, None, 5),
    ];
    for p in allowing {
        assert!(!pdb_allows_no_disruption(&p), "{p:?}");
        let w = ReplicaInput {
            pdbs: vec![p],
            ..deployment(5)
        };
        assert!(!is_single_replica(&w));
    }
}

// rule: AP-48
#[test]
fn ap_48_a_rollout_qualifies_with_surge_and_no_unavailability() {
    // The API defaults (25 % / 25 %) on one replica: surge 1 (up), unavailable 0 (down).
    assert_eq!(resolved_rolling_update(&deployment(1)), Some((1, 0)));
    assert!(rollout_keeps_a_ready_pod(&deployment(1)));
    let explicit = ReplicaInput {
        max_surge: s("1"),
        max_unavailable: s("0"),
        ..deployment(1)
    };
    assert!(rollout_keeps_a_ready_pod(&explicit));
    let no_surge = ReplicaInput {
        max_surge: s("0"),
        max_unavailable: s("0"),
        ..deployment(1)
    };
    // Both 0: the controller makes unavailable 1.
    assert_eq!(resolved_rolling_update(&no_surge), Some((0, 1)));
    assert!(!rollout_keeps_a_ready_pod(&no_surge));
    let unavailable = ReplicaInput {
        max_surge: s("1"),
        max_unavailable: s("1"),
        ..deployment(1)
    };
    assert!(!rollout_keeps_a_ready_pod(&unavailable));
    // 25 % of 4 replicas: one may be unavailable.
    assert!(!rollout_keeps_a_ready_pod(&deployment(4)));
    let bad = ReplicaInput {
        max_surge: s("lots"),
        ..deployment(1)
    };
    assert!(!rollout_keeps_a_ready_pod(&bad));
}

// rule: AP-48
#[test]
fn ap_48_daemonsets_resolve_against_desired_number_scheduled() {
    let ds = |surge: Option<String>, unavailable: Option<String>, desired: i64| ReplicaInput {
        kind: WorkloadKind::DaemonSet,
        max_surge: surge,
        max_unavailable: unavailable,
        desired_number_scheduled: desired,
        ..ReplicaInput::default()
    };
    // Defaults: maxSurge 0, maxUnavailable 1.
    assert!(!rollout_keeps_a_ready_pod(&ds(None, None, 1)));
    assert!(rollout_keeps_a_ready_pod(&ds(s("1"), s("0"), 1)));
    assert!(rollout_keeps_a_ready_pod(&ds(s("10%"), s("0"), 3))); // 0.3 rounds up
    assert!(!rollout_keeps_a_ready_pod(&ds(s("10%"), s("0"), 0)));
    let on_delete = ReplicaInput {
        strategy_type: s("OnDelete"),
        ..ds(s("1"), s("0"), 1)
    };
    assert!(!rollout_keeps_a_ready_pod(&on_delete));
}

// rule: AP-49
#[test]
fn ap_49_recreate_never_qualifies() {
    let w = ReplicaInput {
        strategy_type: s("Recreate"),
        max_surge: s("1"),
        max_unavailable: s("0"),
        ..deployment(1)
    };
    assert!(!rollout_keeps_a_ready_pod(&w));
}

// rule: AP-50
#[test]
fn ap_50_statefulsets_never_qualify() {
    let w = ReplicaInput {
        kind: WorkloadKind::StatefulSet,
        replicas: Some(1),
        max_surge: s("1"),
        max_unavailable: s("0"),
        ..ReplicaInput::default()
    };
    assert!(!rollout_keeps_a_ready_pod(&w));
}

#[test]
fn int_or_percent_parses_and_resolves() {
    assert_eq!(IntOrPercent::parse("3").ok(), Some(IntOrPercent::Int(3)));
    assert_eq!(
        IntOrPercent::parse("25%").ok(),
        Some(IntOrPercent::Percent(25))
    );
    for bad in ["", "%", "-1", "1.5", "a%"] {
        assert!(IntOrPercent::parse(bad).is_err(), "{bad:?}");
    }
    assert_eq!(IntOrPercent::Percent(25).resolve(1, true), 1);
    assert_eq!(IntOrPercent::Percent(25).resolve(1, false), 0);
    assert_eq!(IntOrPercent::Percent(50).resolve(4, false), 2);
    assert_eq!(IntOrPercent::Int(2).resolve(100, false), 2);
}
