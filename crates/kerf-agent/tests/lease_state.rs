//! Leader election as a pure state machine: given the Lease and `now`, what to do.

use std::time::Duration;

use chrono::{DateTime, TimeZone, Utc};
use kerf_agent::lease::{LeaderState, LeaseRecord, Step, desired_spec, must_step_down, next_step};

fn t(secs: i64) -> DateTime<Utc> {
    Utc.timestamp_opt(1_750_000_000 + secs, 0).unwrap()
}

fn held_by(holder: &str, renewed: i64) -> LeaseRecord {
    LeaseRecord {
        holder: Some(holder.into()),
        renew_time: Some(t(renewed)),
        acquire_time: Some(t(renewed - 100)),
        lease_duration_seconds: Some(15),
        transitions: 4,
    }
}

#[test]
fn a_missing_lease_is_created() {
    assert_eq!(next_step(None, "a", t(0)), Step::Create);
}

#[test]
fn a_free_lease_is_acquired() {
    let free = LeaseRecord {
        holder: None,
        ..held_by("x", 0)
    };
    assert_eq!(next_step(Some(&free), "a", t(1)), Step::Acquire);
}

#[test]
fn our_own_lease_is_renewed() {
    assert_eq!(next_step(Some(&held_by("a", 0)), "a", t(5)), Step::Renew);
}

#[test]
fn another_holders_valid_lease_is_waited_on() {
    let step = next_step(Some(&held_by("b", 0)), "a", t(14));
    assert_eq!(
        step,
        Step::Wait {
            holder: "b".into(),
            until: Some(t(15))
        }
    );
}

#[test]
fn an_expired_lease_is_taken_over_with_a_new_transition() {
    let rec = held_by("b", 0);
    let step = next_step(Some(&rec), "a", t(15));
    assert_eq!(step, Step::Acquire);
    let spec = desired_spec(Some(&rec), &step, "a", Duration::from_secs(15), t(15)).unwrap();
    assert_eq!(spec.holder_identity.as_deref(), Some("a"));
    assert_eq!(spec.lease_transitions, Some(5));
    assert_eq!(spec.lease_duration_seconds, Some(15));
}

#[test]
fn renewing_keeps_acquire_time_and_transitions() {
    let rec = held_by("a", 0);
    let spec = desired_spec(Some(&rec), &Step::Renew, "a", Duration::from_secs(15), t(2)).unwrap();
    assert_eq!(spec.lease_transitions, Some(4));
    let acquire = spec.acquire_time.unwrap().0.as_second();
    let renew = spec.renew_time.unwrap().0.as_second();
    assert_eq!(acquire, t(-100).timestamp());
    assert_eq!(renew, t(2).timestamp());
    assert!(
        desired_spec(
            Some(&rec),
            &Step::Wait {
                holder: "b".into(),
                until: None
            },
            "a",
            Duration::from_secs(15),
            t(2)
        )
        .is_none()
    );
}

#[test]
fn the_local_check_stops_two_seconds_before_the_lease_ends() {
    let s = LeaderState::Leader {
        renewed_at: t(0),
        lease_duration: Duration::from_secs(15),
    };
    assert!(s.is_leader_at(t(12)));
    assert!(!s.is_leader_at(t(13)));
    assert!(!LeaderState::Follower { holder: None }.is_leader_at(t(0)));
    assert!(LeaderState::Always.is_leader_at(t(1_000_000)));
}

#[test]
fn a_leader_steps_down_after_the_renew_deadline() {
    assert!(!must_step_down(t(0), Duration::from_secs(10), t(9)));
    assert!(must_step_down(t(0), Duration::from_secs(10), t(10)));
}
