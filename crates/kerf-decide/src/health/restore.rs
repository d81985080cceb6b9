//! What a rollback puts back (rules RB-24, RB-26, RB-35): the previous values of the
//! breached resources only, and the record of the rollback.

use chrono::{DateTime, Utc};
use kerf_api::Resource;
use kerf_api::rsr::{ChangeRecord, ContainerChange, HpaChange, HpaOrder, RollbackRecord};

use super::BreachReason;

/// Per container, the values a rollback writes: `from` is what the change applied (the
/// values the rollback replaces), `to` the same with the breached resources' requests and
/// limits back at their values before the change. Other resources keep the change's values
/// (RB-35). Containers with nothing to restore are left out.
pub fn restore_values(change: &ChangeRecord, restore: &[Resource]) -> Vec<ContainerChange> {
    change
        .containers
        .iter()
        .filter_map(|c| {
            let mut to = c.to.clone();
            for r in restore {
                to.requests.set(*r, c.from.requests.get(*r).cloned());
                to.limits.set(*r, c.from.limits.get(*r).cloned());
            }
            (to != c.to).then(|| ContainerChange {
                name: c.name.clone(),
                from: c.to.clone(),
                to,
            })
        })
        .collect()
}

/// The HPA target a rollback writes back, when the change coordinated an HPA on a restored
/// resource (RB-24): `from` the change's target, `to` the previous one. A lower target goes
/// back after the template (the previous one was higher), a higher one before.
pub fn restore_hpa(change: &ChangeRecord, restore: &[Resource]) -> Option<HpaChange> {
    let hpa = change.hpa.as_ref()?;
    if !restore.contains(&hpa.resource) || hpa.from == hpa.to {
        return None;
    }
    let order = if hpa.from < hpa.to {
        HpaOrder::Before
    } else {
        HpaOrder::After
    };
    Some(HpaChange {
        name: hpa.name.clone(),
        resource: hpa.resource,
        from: hpa.to,
        to: hpa.from,
        order,
        written: false,
    })
}

/// The `status.lastRollback` record of a rollback at `now`.
pub fn rollback_record(
    change: &ChangeRecord,
    reason: BreachReason,
    restore: &[Resource],
    now: DateTime<Utc>,
) -> RollbackRecord {
    RollbackRecord {
        time: now,
        reason: reason.as_str().to_owned(),
        resources: restore.to_vec(),
        change_id: change.id.clone(),
    }
}
