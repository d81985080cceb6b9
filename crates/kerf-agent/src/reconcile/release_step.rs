//! Leaving auto-patch, per resource (design D21, AP-21, AP-35, EV-39, EV-46).
//!
//! When a resource the last applied change touched leaves auto-patch (an approved change:
//! when its mode becomes `off`, design D27), that resource alone is released: a rollout
//! hands its fields over (design section 13) while `kerf` keeps the others; in-place takes
//! it out of `live` and leaves the running pods alone. A partial release keeps the change
//! `Applied` for the resources still held and drops the released one from the record; the
//! last release marks it `Released`. Each release records `released ModeChanged` naming
//! its resources.
//!
//! When a release is due and what it reports while a freeze or a pause holds it are
//! decided in [`kerf_decide::pass`].

use kerf_api::Resource;
use kerf_api::rsr::{ChangeState, LiveValues, RightsizingRecommendationStatus};
use kerf_decide::pass::Release;
use uuid::Uuid;

use super::pass::Pass;
use super::step::{ActError, StepResult, event_workload, workload_id};
use crate::executor::rollout;
use crate::intent;

/// Hands the template's fields of `resources` back to their owner (AP-21): one
/// server-side apply, field manager `kerf`.
pub async fn release_template(c: &Pass<'_>, resources: &[Resource]) -> Result<(), ActError> {
    if !c.may_write() {
        return Err(ActError::NotLeader);
    }
    let res = rollout::release(c.ctx.client.clone(), &workload_id(&c.workload), resources).await;
    c.metrics().observe("release", &res);
    if let Some(rv) = res?.resource_version {
        c.wrote_workload(Some(rv));
    }
    Ok(())
}

/// Records the release `rel` in `s` (EV-46): `live` without its resources, the change
/// `Released` or the resources dropped from it, and the `released` (or `reverted`) event,
/// pending in status and in `out`.
pub fn mark_released(
    s: &mut RightsizingRecommendationStatus,
    c: &Pass<'_>,
    rel: &Release,
    out: &mut StepResult,
) {
    let Some(change) = s.change.clone() else {
        return;
    };
    s.live = s.live.take().and_then(|l| without(l, &rel.resources));
    let whole = change.resources.iter().all(|r| rel.resources.contains(r));
    // A whole release records its id in the change, with the status write before the
    // event (D25); a partial release's event carries an id of its own.
    let id = match s.change.as_mut() {
        Some(ch) if whole => intent::allocate(&mut ch.event_ids.released),
        _ => Uuid::new_v4(),
    };
    let e = if change.revert {
        intent::reverted_event(&change, event_workload(&c.workload), id, c.now)
    } else {
        intent::released_event(
            &change,
            event_workload(&c.workload),
            &rel.resources,
            id,
            (rel.previous.as_str(), rel.new.as_str()),
            c.now,
        )
    };
    if let Some(ch) = s.change.as_mut() {
        if whole {
            ch.state = ChangeState::Released;
        } else {
            intent::drop_resources(ch, &rel.resources);
        }
    }
    intent::add_pending(s, &e);
    out.events.push(e);
    out.finished = true;
}

/// `live` without `resources`: each goes back to the container's `base`; `None` when
/// nothing differs from `base` any more (design D20, D21).
pub fn without(mut live: LiveValues, resources: &[Resource]) -> Option<LiveValues> {
    for c in &mut live.containers {
        for r in resources {
            c.requests.set(*r, c.base.requests.get(*r).cloned());
            c.limits.set(*r, c.base.limits.get(*r).cloned());
        }
    }
    live.containers
        .retain(|c| c.requests != c.base.requests || c.limits != c.base.limits);
    (!live.containers.is_empty()).then_some(live)
}

#[cfg(test)]
mod tests {
    use super::*;
    use kerf_api::rsr::LiveContainer;
    use kerf_api::{Quantity, ResourceRequirements, ResourceValues};

    fn values(cpu: &str, memory: &str) -> ResourceValues {
        ResourceValues {
            cpu: Some(Quantity(cpu.into())),
            memory: Some(Quantity(memory.into())),
        }
    }

    fn live() -> LiveValues {
        LiveValues {
            containers: vec![LiveContainer {
                name: "app".into(),
                requests: values("150m", "200Mi"),
                limits: ResourceValues::default(),
                base: ResourceRequirements {
                    requests: values("200m", "256Mi"),
                    limits: ResourceValues::default(),
                },
            }],
        }
    }

    // rule: design D21
    #[test]
    fn releasing_one_resource_puts_it_back_at_base_in_live() {
        let l = without(live(), &[Resource::Cpu]).unwrap();
        assert_eq!(l.containers[0].requests, values("200m", "200Mi"));
        assert!(without(l, &[Resource::Memory]).is_none());
        assert!(without(live(), &Resource::ALL).is_none());
    }
}
