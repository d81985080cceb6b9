//! HPA coordination of a change (design D22, rules AP-22, EV-60, RB-24).
//!
//! The decision puts the HPA change in the intent (`status.change.hpa`). A lower target
//! (order Before) is written before the template apply, a higher one (order After) once
//! the rollout completed (when is [`kerf_decide::pass::hpa_after_due`]); either is marked `written` in the intent. Leaving auto-patch
//! writes the old target back. Every write goes through
//! [`write_hpa_target`](crate::executor::hpa::write_hpa_target), which tests the value it
//! replaces: a target someone else changed meanwhile is left alone. Each step starts from
//! the HPA as the cache shows it, so a resumed change writes nothing twice.

use kerf_api::rsr::{HpaChange, HpaOrder, RightsizingRecommendationStatus};

use super::pass::{Pass, hpa_metric as metric};
use super::step::ActError;
use crate::executor::hpa::{HpaError, MetricSource, write_hpa_target};

/// What a target write found.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TargetWrite {
    /// The target was `old` and is now `new`.
    Written,
    /// The target already is `new` (a resumed step).
    AlreadyThere,
    /// The HPA or its metric is gone, or someone else set another target: left alone.
    LeftAlone,
}

/// Moves the target of `h`'s HPA from `old` to `new` if it still is `old`.
pub async fn write_target(
    c: &Pass<'_>,
    h: &HpaChange,
    old: i32,
    new: i32,
) -> Result<TargetWrite, ActError> {
    let Some(info) = c.hpas.iter().find(|i| i.name == h.name) else {
        return Ok(TargetWrite::LeftAlone);
    };
    let Some(m) = metric(info, h) else {
        return Ok(TargetWrite::LeftAlone);
    };
    if m.average_utilization == Some(new) {
        return Ok(TargetWrite::AlreadyThere);
    }
    if m.average_utilization != Some(old) {
        tracing::warn!(hpa = %h.name, target = ?m.average_utilization, expected = old, "HPA target changed by someone else: left alone");
        return Ok(TargetWrite::LeftAlone);
    }
    if !c.may_write() {
        return Err(ActError::NotLeader);
    }
    let source = if m.container.is_some() {
        MetricSource::ContainerResource
    } else {
        MetricSource::Resource
    };
    let res = write_hpa_target(
        c.ctx.client.clone(),
        &info.namespace,
        &info.name,
        m.index,
        source,
        old,
        new,
    )
    .await;
    c.metrics().observe("hpa_patch", &res);
    match res {
        Ok(written) => {
            c.wrote_hpa(&info.name, written.resource_version);
            Ok(TargetWrite::Written)
        }
        Err(HpaError::NotFound { .. }) => Ok(TargetWrite::LeftAlone),
        Err(HpaError::Invalid { message }) => {
            tracing::warn!(hpa = %h.name, %message, "HPA target changed by someone else: left alone");
            Ok(TargetWrite::LeftAlone)
        }
        Err(e) => Err(ActError::Hpa(e)),
    }
}

/// Writes the change's HPA target if it is due in `order` and not written yet, and marks
/// it `written`.
pub async fn write_due(
    s: &mut RightsizingRecommendationStatus,
    c: &Pass<'_>,
    order: HpaOrder,
) -> Result<(), ActError> {
    let Some(h) = s.change.as_ref().and_then(|ch| ch.hpa.clone()) else {
        return Ok(());
    };
    if h.order != order || h.written || h.from == h.to {
        return Ok(());
    }
    write_and_note(s, c, &h, true).await
}

/// Writes the old target back when a change leaves auto-patch (D22, RB-24).
pub async fn restore(
    s: &mut RightsizingRecommendationStatus,
    c: &Pass<'_>,
) -> Result<(), ActError> {
    let Some(h) = s.change.as_ref().and_then(|ch| ch.hpa.clone()) else {
        return Ok(());
    };
    if !h.written {
        return Ok(());
    }
    write_and_note(s, c, &h, false).await
}

/// Writes the change's target (`written`) or the old one back, and notes in the change
/// which one stands unless the HPA was left alone.
async fn write_and_note(
    s: &mut RightsizingRecommendationStatus,
    c: &Pass<'_>,
    h: &HpaChange,
    written: bool,
) -> Result<(), ActError> {
    let (old, new) = if written {
        (h.from, h.to)
    } else {
        (h.to, h.from)
    };
    let done = write_target(c, h, old, new).await?;
    if done != TargetWrite::LeftAlone
        && let Some(hpa) = s.change.as_mut().and_then(|ch| ch.hpa.as_mut())
    {
        hpa.written = written;
    }
    Ok(())
}
