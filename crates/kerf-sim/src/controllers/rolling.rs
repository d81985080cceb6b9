//! The pure arithmetic of a Deployment's RollingUpdate, as kube-controller-manager does it.

/// One ReplicaSet as the rollout sees it.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct RsCount {
    /// `spec.replicas`.
    pub replicas: i64,
    /// Available pods, at most `replicas`.
    pub available: i64,
}

/// `maxSurge` and `maxUnavailable` resolved against the desired replica count: surge rounds
/// up, unavailable rounds down, and both being zero makes unavailable 1.
pub fn resolve_surge_unavailable(
    max_surge: Option<&serde_json::Value>,
    max_unavailable: Option<&serde_json::Value>,
    desired: i64,
) -> (i64, i64) {
    use super::common::scaled_value;
    let default = serde_json::Value::String("25%".into());
    let surge = scaled_value(Some(max_surge.unwrap_or(&default)), desired, true, 0).max(0);
    let unavailable =
        scaled_value(Some(max_unavailable.unwrap_or(&default)), desired, false, 0).max(0);
    if surge == 0 && unavailable == 0 {
        (0, 1)
    } else {
        (surge, unavailable.min(desired))
    }
}

/// One reconcile step of a rolling update: the new `spec.replicas` of the new ReplicaSet and
/// of each old ReplicaSet (oldest first, same order as `old`).
pub fn rolling_step(
    desired: i64,
    max_surge: i64,
    max_unavailable: i64,
    new: RsCount,
    old: &[RsCount],
) -> (i64, Vec<i64>) {
    let mut new_replicas = new.replicas;
    let mut old_replicas: Vec<i64> = old.iter().map(|r| r.replicas).collect();
    let total: i64 = new_replicas + old_replicas.iter().sum::<i64>();
    if new_replicas > desired {
        new_replicas = desired;
    } else if total < desired + max_surge {
        new_replicas += (desired + max_surge - total).min(desired - new_replicas);
    }

    let all = new_replicas + old_replicas.iter().sum::<i64>();
    let min_available = desired - max_unavailable;
    let new_unavailable = (new_replicas - new.available).max(0);
    let max_scaled_down = all - min_available - new_unavailable;
    if max_scaled_down <= 0 {
        return (new_replicas, old_replicas);
    }
    // First remove old pods that are not available: that costs no availability.
    let mut cleaned = 0;
    let mut available: Vec<i64> = old.iter().map(|r| r.available.min(r.replicas)).collect();
    for (i, r) in old_replicas.iter_mut().enumerate() {
        let unhealthy = (*r - available[i]).max(0);
        let step = unhealthy.min(max_scaled_down - cleaned);
        *r -= step;
        cleaned += step;
        available[i] = available[i].min(*r);
    }
    // Then scale down available old pods as far as minAvailable allows.
    let total_available = new.available.min(new_replicas) + available.iter().sum::<i64>();
    let mut budget = (total_available - min_available).min(max_scaled_down - cleaned);
    for r in old_replicas.iter_mut() {
        if budget <= 0 {
            break;
        }
        let step = (*r).min(budget);
        *r -= step;
        budget -= step;
    }
    (new_replicas, old_replicas)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn defaults_are_25_percent_surge_up_unavailable_down() {
        assert_eq!(resolve_surge_unavailable(None, None, 3), (1, 0));
        assert_eq!(resolve_surge_unavailable(None, None, 10), (3, 2));
        assert_eq!(
            resolve_surge_unavailable(Some(&json!(0)), Some(&json!("0%")), 3),
            (0, 1)
        );
        assert_eq!(
            resolve_surge_unavailable(Some(&json!("50%")), Some(&json!(1)), 3),
            (2, 1)
        );
    }

    /// Simulates a whole rollout where every scheduled pod becomes available between steps,
    /// A ReplicaSet count of `replicas` pods, `available` of them available.
    fn rs(replicas: i64, available: i64) -> RsCount {
        RsCount {
            replicas,
            available,
        }
    }

    /// checking the surge and availability bounds at every step.
    fn simulate(desired: i64, surge: i64, unavailable: i64) -> usize {
        let mut new = RsCount::default();
        let mut old = vec![rs(desired, desired)];
        for step in 0..100 {
            let (n, o) = rolling_step(desired, surge, unavailable, new, &old);
            let total = n + o.iter().sum::<i64>();
            assert!(total <= desired + surge, "surge exceeded at step {step}");
            let available = new.available.min(n) + o.iter().sum::<i64>();
            assert!(available >= desired - unavailable, "too few available");
            new = rs(n, n);
            old = o.iter().map(|&r| rs(r, r)).collect();
            if n == desired && old.iter().all(|r| r.replicas == 0) {
                return step;
            }
        }
        usize::MAX
    }

    #[test]
    fn rollouts_finish_within_bounds() {
        assert!(simulate(3, 1, 0) < 10);
        assert!(simulate(3, 0, 1) < 10);
        assert!(simulate(10, 3, 2) < 10);
        assert!(simulate(1, 1, 0) < 10);
    }

    #[test]
    fn surge_only_waits_for_new_pods_to_become_available() {
        let old = [rs(3, 3)];
        let (n, o) = rolling_step(3, 1, 0, RsCount::default(), &old);
        assert_eq!((n, o.clone()), (1, vec![3]));
        // The new pod is not available yet: nothing old may go.
        let (n, o) = rolling_step(3, 1, 0, rs(1, 0), &old);
        assert_eq!((n, o), (1, vec![3]));
        let (n, o) = rolling_step(3, 1, 0, rs(1, 1), &old);
        assert_eq!((n, o), (1, vec![2]));
    }

    #[test]
    fn unavailable_only_removes_first() {
        let old = [rs(3, 3)];
        let (n, o) = rolling_step(3, 0, 1, RsCount::default(), &old);
        assert_eq!((n, o), (0, vec![2]));
    }
}
