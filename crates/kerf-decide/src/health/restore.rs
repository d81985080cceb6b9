//! What a rollback puts back (rules RB-22 to RB-24, RB-26, RB-35): the previous values of
//! the breached resources only, the writes that restore them in order, and the record of
//! the rollback.

use chrono::{DateTime, Utc};
use kerf_api::rsr::{ChangeRecord, ContainerChange, HpaChange, HpaOrder, RollbackRecord};
use kerf_api::{Resource, ResourceRequirements, Strategy};

use super::BreachReason;
use crate::values::{ContainerResources, only, requirements_cover};

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

/// One write of a rollback's restore.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum RestoreWrite {
    /// Resize every pod still at the change's values back to these values (RB-22).
    ResizeBack(Vec<ContainerResources>),
    /// Apply these values of `resources` to the pod template (RB-23).
    Template {
        /// The values per container.
        back: Vec<ContainerResources>,
        /// The restored resources (the fields `kerf` writes).
        resources: Vec<Resource>,
    },
    /// Write the HPA target back (RB-24).
    Hpa(HpaChange),
}

impl RestoreWrite {
    /// A short, bounded name of the write's kind, for spans and logs.
    pub fn kind(&self) -> &'static str {
        match self {
            RestoreWrite::ResizeBack(_) => "restore_pods",
            RestoreWrite::Template { .. } => "restore_template",
            RestoreWrite::Hpa(_) => "restore_hpa",
        }
    }
}

/// The writes that restore `restore`, in order, with the strategy that carried the change
/// (after a fallback, rollout): in place the pods are resized back; a rollout's template
/// gets the old values, with a higher HPA target back before it and a lower one after.
/// Nothing to restore is no write.
pub fn restore_writes(change: &ChangeRecord, restore: &[Resource]) -> Vec<RestoreWrite> {
    let back: Vec<ContainerResources> = restore_values(change, restore)
        .into_iter()
        .map(|c| (c.name, only(&c.to, restore)))
        .collect();
    if back.is_empty() {
        return Vec::new();
    }
    match change.strategy {
        Strategy::InPlace => vec![RestoreWrite::ResizeBack(back)],
        Strategy::Rollout | Strategy::Deferred => {
            let hpa = restore_hpa(change, restore);
            let at = |order: HpaOrder| {
                hpa.clone()
                    .filter(|h| h.order == order)
                    .map(RestoreWrite::Hpa)
            };
            let template = RestoreWrite::Template {
                back,
                resources: restore.to_vec(),
            };
            at(HpaOrder::Before)
                .into_iter()
                .chain([template])
                .chain(at(HpaOrder::After))
                .collect()
        }
    }
}

/// The values of `back` a pod whose spec is `spec` does not hold yet: a pod already back
/// gets no resize, so a resumed rollback sends only what is missing (RB-22, RB-28).
/// Containers the pod lacks are left out.
pub fn pod_restore(
    spec: &[(String, ResourceRequirements)],
    back: &[ContainerResources],
) -> Vec<ContainerResources> {
    back.iter()
        .filter(|(name, want)| {
            spec.iter()
                .any(|(n, have)| n == name && !requirements_cover(want, have))
        })
        .cloned()
        .collect()
}
