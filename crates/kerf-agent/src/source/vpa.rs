//! The `vpa` source's watch (docs/sources.md): lists and watches every
//! VerticalPodAutoscaler (`autoscaling.k8s.io/v1`), keeps the fields [`Vpa`] reads, and
//! after each change (and every `hub.pollInterval`) publishes the recommendations of the
//! VPAs whose target Kerf manages ([`read`]). A watch that fails publishes nothing: the
//! last recommendations stay and turn stale after `hub.staleAfter` (`SourceUnavailable`).

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use chrono::{DateTime, Utc};
use futures::StreamExt;
use kerf_api::policy::LimitsHandling;
use kube::api::{Api, ApiResource, DynamicObject, GroupVersionKind};
use kube::runtime::WatchStreamExt;
use kube::runtime::watcher::{self, Event};
use tokio::sync::watch;

use super::vpa_map::{CurrentValues, Vpa, recommendation};
use super::{Read, publish};
use crate::cache::{CacheSet, WorkloadKey};
use crate::context::Context;
use crate::hub::HubState;
use crate::reconcile::facts;
use crate::settings::Settings;

/// The VerticalPodAutoscaler resource.
pub fn vpa_resource() -> ApiResource {
    let gvk = GroupVersionKind::gvk("autoscaling.k8s.io", "v1", "VerticalPodAutoscaler");
    ApiResource::from_gvk_with_plural(&gvk, "verticalpodautoscalers")
}

/// The VPAs as last listed and watched, by namespace and name.
type Store = BTreeMap<(String, String), Vpa>;

/// Watches VPAs and publishes what they recommend until shutdown. `first_read` turns true
/// after the first successful publication.
pub async fn run(ctx: Context, tx: watch::Sender<HubState>, first_read: watch::Sender<bool>) {
    let api: Api<DynamicObject> = Api::all_with(ctx.client.clone(), &vpa_resource());
    let stream =
        watcher::watcher(api, watcher::Config::default()).backoff(crate::cache::watch_backoff());
    let mut stream = std::pin::pin!(stream);
    let mut store = Store::new();
    let mut listing = Store::new();
    let mut listed = false;
    let mut health = WatchHealth::default();
    let interval = ctx
        .settings
        .hub
        .poll_interval
        .max(Duration::from_millis(100));
    let mut tick = tokio::time::interval(interval);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let mut shutdown = ctx.shutdown.clone();
    loop {
        let changed = tokio::select! {
            ev = stream.next() => match ev {
                Some(Ok(ev)) => {
                    health.answered();
                    apply(&mut store, &mut listing, &mut listed, ev)
                }
                Some(Err(e)) => {
                    health.failed(Instant::now());
                    tracing::warn!(error = %e, "VerticalPodAutoscaler watch failed; the last recommendations stay");
                    false
                }
                None => return,
            },
            _ = tick.tick() => true,
            _ = async { let _ = shutdown.wait_for(|s| *s).await; } => return,
        };
        if changed && listed && health.is_healthy(Instant::now()) {
            let now = ctx.clock.now();
            let hub = tx.borrow().clone();
            let read = read(&ctx.cache, &ctx.settings, &hub, &store, now);
            publish(&tx, read, now, ctx.settings.hub.stale_after);
            first_read.send_replace(true);
        }
    }
}

/// A watch that failed this recently may still be failing: its retries come at most
/// about 12.5 s apart (`cache::watch_backoff`), so a failing list or watch fails again
/// within this time.
pub const FAILING_FOR: Duration = Duration::from_secs(30);

/// Whether the watch reads VPAs: after an answer, or [`FAILING_FOR`] after its last error
/// (a watch that resumed after an error says nothing until a VPA changes).
#[derive(Clone, Copy, Debug, Default)]
pub struct WatchHealth {
    last_error: Option<Instant>,
}

impl WatchHealth {
    /// The watch answered (a listed or changed VPA).
    pub fn answered(&mut self) {
        self.last_error = None;
    }

    /// The list or watch failed at `at`.
    pub fn failed(&mut self, at: Instant) {
        self.last_error = Some(at);
    }

    /// Whether what was read counts as current at `now`.
    pub fn is_healthy(&self, now: Instant) -> bool {
        self.last_error
            .is_none_or(|t| now.saturating_duration_since(t) >= FAILING_FOR)
    }
}

/// Applies one watch event; returns whether the store changed in a way to publish.
fn apply(
    store: &mut Store,
    listing: &mut Store,
    listed: &mut bool,
    ev: Event<DynamicObject>,
) -> bool {
    match ev {
        Event::Init => {
            listing.clear();
            false
        }
        Event::InitApply(o) => {
            if let Some((key, vpa)) = decode(o) {
                listing.insert(key, vpa);
            }
            false
        }
        Event::InitDone => {
            *store = std::mem::take(listing);
            *listed = true;
            true
        }
        Event::Apply(o) => {
            decode(o).is_some_and(|(key, vpa)| store.insert(key, vpa.clone()) != Some(vpa))
        }
        Event::Delete(o) => decode(o).is_some_and(|(key, _)| store.remove(&key).is_some()),
    }
}

/// The fields read of one VPA; one that does not decode is left out and logged.
fn decode(o: DynamicObject) -> Option<((String, String), Vpa)> {
    let name = o.metadata.name.clone().unwrap_or_default();
    let namespace = o.metadata.namespace.clone().unwrap_or_default();
    let value = serde_json::to_value(&o).ok()?;
    match serde_json::from_value::<Vpa>(value) {
        Ok(vpa) => Some(((namespace, name), vpa)),
        Err(e) => {
            tracing::warn!(vpa = %name, namespace = %namespace, error = %e, "VerticalPodAutoscaler not read: a field has an unexpected shape");
            None
        }
    }
}

/// What the VPAs in `store` recommend at `now` for the workloads in the caches: per
/// workload, the first of its VPAs by name in `Off` or `Initial` mode (else the first),
/// and a hold when any of them updates the pods itself.
pub fn read(
    cache: &CacheSet,
    settings: &Settings,
    hub: &HubState,
    store: &Store,
    now: DateTime<Utc>,
) -> Read {
    let mut by_workload: BTreeMap<WorkloadKey, Vec<&Vpa>> = BTreeMap::new();
    for ((namespace, _), vpa) in store {
        if let Some((kind, name)) = vpa.target() {
            let key = WorkloadKey::new(namespace, kind, name);
            by_workload.entry(key).or_default().push(vpa);
        }
    }
    let policies = facts::policies(cache);
    let mut out = Read::default();
    for (key, vpas) in by_workload {
        let (Some(w), Some(first)) = (cache.workload(&key), vpas.first()) else {
            continue;
        };
        if let Some(hold) = vpas.iter().find_map(|v| v.hold()) {
            out.holds.insert(key.clone(), hold);
        }
        let chosen = vpas.iter().find(|v| v.hold().is_none()).unwrap_or(first);
        let policy = facts::policy_for(&w, cache, &policies, hub, settings);
        let limits = policy
            .recommendation
            .limits
            .as_ref()
            .map_or(LimitsHandling::Keep, |l| l.value);
        let current = w
            .containers
            .iter()
            .map(|c| {
                let values = CurrentValues {
                    requests: c.requests.clone(),
                    limits: c.limits.clone(),
                };
                (c.name.to_string(), values)
            })
            .collect();
        out.recommendations
            .push(recommendation(chosen, key.kind, &current, limits, now));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn obj(name: &str, mode: &str) -> DynamicObject {
        serde_json::from_value(serde_json::json!({
            "apiVersion": "autoscaling.k8s.io/v1", "kind": "VerticalPodAutoscaler",
            "metadata": {"name": name, "namespace": "shop"},
            "spec": {"targetRef": {"kind": "Deployment", "name": "web"},
                     "updatePolicy": {"updateMode": mode}},
        }))
        .unwrap()
    }

    #[test]
    fn a_listing_replaces_the_store_only_once_done_and_unchanged_objects_change_nothing() {
        let (mut store, mut listing, mut listed) = (Store::new(), Store::new(), false);
        let mut ev = |e| apply(&mut store, &mut listing, &mut listed, e);
        assert!(!ev(Event::Init));
        assert!(!ev(Event::InitApply(obj("a", "Off"))));
        assert!(ev(Event::InitDone));
        assert!(ev(Event::Apply(obj("b", "Off"))));
        assert!(!ev(Event::Apply(obj("b", "Off"))), "the same VPA again");
        assert!(ev(Event::Apply(obj("b", "Auto"))));
        assert!(ev(Event::Delete(obj("a", "Off"))));
        assert!(!ev(Event::Delete(obj("a", "Off"))));
        assert!(listed);
        let names: Vec<&str> = store.keys().map(|(_, n)| n.as_str()).collect();
        assert_eq!(names, ["b"]);
        // A relist that is not done leaves the store as it was.
        let mut ev = |e| apply(&mut store, &mut listing, &mut listed, e);
        assert!(!ev(Event::Init));
        assert!(!ev(Event::InitApply(obj("c", "Off"))));
        assert_eq!(store.len(), 1);
    }

    #[test]
    fn a_failed_watch_is_unhealthy_until_it_answers_or_has_not_failed_for_a_while() {
        let t0 = Instant::now();
        let mut h = WatchHealth::default();
        assert!(h.is_healthy(t0));
        h.failed(t0);
        assert!(!h.is_healthy(t0 + Duration::from_secs(29)));
        assert!(h.is_healthy(t0 + FAILING_FOR));
        h.failed(t0 + Duration::from_secs(40));
        assert!(!h.is_healthy(t0 + Duration::from_secs(41)));
        h.answered();
        assert!(h.is_healthy(t0 + Duration::from_secs(41)));
    }
}
