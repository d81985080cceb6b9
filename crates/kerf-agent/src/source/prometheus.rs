//! The `prometheus` source (docs/sources.md, docs/prometheus-source.md): at start and then
//! every `hub.pollInterval` but at most every [`MIN_INTERVAL`] (each read asks for weeks of
//! samples) and at least twice per `hub.staleAfter` ([`after_read`]), the recommendations of every workload a policy selects are computed
//! from the cluster's Prometheus (`health.metricsURL`, the endpoint the throttling check
//! reads) by [`crate::prom_recommend`], with the recommender settings of each workload's
//! policy. A Prometheus that cannot be used publishes nothing: the last recommendations
//! stay and turn stale after `hub.staleAfter` (`SourceUnavailable`), and each failed read
//! logs one WARN line naming the cause; the next try comes after `hub.pollInterval`.

use std::time::Duration;

use chrono::{DateTime, Utc};
use kerf_api::hub::HubWorkload;
use tokio::sync::watch;

use super::{Read, publish};
use crate::cache::CacheSet;
use crate::context::Context;
use crate::hub::HubState;
use crate::prom_recommend::{PromError, PromSettings, Target, recommend};
use crate::reconcile::facts;
use crate::reconcile::hub_sync::recommendation_settings;
use crate::settings::Settings;

/// The shortest time between two successful reads, whatever `hub.pollInterval` says.
pub const MIN_INTERVAL: Duration = Duration::from_secs(300);

/// The shortest time before a try after a failed read.
const MIN_RETRY: Duration = Duration::from_secs(1);

/// Reads Prometheus at start and then as the module says, and publishes what it recommends until
/// shutdown. `first_read` turns true after the first successful read.
pub async fn run(ctx: Context, tx: watch::Sender<HubState>, first_read: watch::Sender<bool>) {
    let Some(url) = ctx.settings.health.metrics_url.clone() else {
        tracing::error!("the prometheus source needs health.metricsURL; nothing is read");
        return;
    };
    let client = match prometheus_http_query::Client::try_from(url.as_str()) {
        Ok(c) => c,
        Err(e) => {
            tracing::error!(url = %url, error = %e, "the prometheus source cannot use health.metricsURL; nothing is read");
            return;
        }
    };
    let base = PromSettings::default();
    let poll = ctx.settings.hub.poll_interval;
    let mut shutdown = ctx.shutdown.clone();
    let mut wait = Duration::ZERO;
    loop {
        tokio::select! {
            _ = tokio::time::sleep(wait) => {}
            _ = async { let _ = shutdown.wait_for(|s| *s).await; } => return,
        }
        wait = poll.max(MIN_RETRY);
        let now = ctx.clock.now();
        let hub = tx.borrow().clone();
        let groups = targets(&ctx.cache, &ctx.settings, &hub, &base);
        match read(&client, &groups, now).await {
            Ok(read) => {
                tracing::debug!(
                    recommendations = read.recommendations.len(),
                    "Prometheus read"
                );
                publish(&tx, read, now, ctx.settings.hub.stale_after);
                first_read.send_replace(true);
                wait = after_read(poll, ctx.settings.hub.stale_after);
            }
            Err(e) => {
                tracing::warn!(error = %e, category = e.category(), "Prometheus recommendations not computed; the last ones stay");
            }
        }
    }
}

/// The wait after a successful read: `hub.pollInterval`, at least [`MIN_INTERVAL`], and at
/// most half of `hub.staleAfter`, so that reads that succeed never let the state turn stale.
pub fn after_read(poll: Duration, stale_after: Duration) -> Duration {
    poll.max(MIN_INTERVAL).min(stale_after / 2).max(MIN_RETRY)
}

/// The workloads of the agent's scope a policy selects, grouped by the recommender
/// settings their policy gives (in the order first met): Prometheus is asked about no
/// other.
pub fn targets(
    cache: &CacheSet,
    settings: &Settings,
    hub: &HubState,
    base: &PromSettings,
) -> Vec<(PromSettings, Vec<Target>)> {
    let policies = facts::policies(cache);
    let mut groups: Vec<(PromSettings, Vec<Target>)> = Vec::new();
    for w in cache.workloads().iter() {
        if crate::scope::in_cache(&settings.scope, cache, &w.key) != crate::scope::Verdict::In {
            continue;
        }
        let p = facts::policy_for(w, cache, &policies, hub, settings);
        if p.policy_name.is_none() {
            continue;
        }
        let s = base.with_policy(&recommendation_settings(&p));
        let target = Target {
            workload: HubWorkload {
                namespace: w.key.namespace.to_string(),
                kind: w.key.kind.as_str().to_owned(),
                name: w.key.name.to_string(),
            },
            containers: w.containers.iter().map(|c| c.name.to_string()).collect(),
        };
        match groups.iter_mut().find(|(g, _)| *g == s) {
            Some((_, list)) => list.push(target),
            None => groups.push((s, vec![target])),
        }
    }
    groups
}

/// The recommendations of every group; the first failure fails the read (nothing partial
/// is published).
pub async fn read(
    client: &prometheus_http_query::Client,
    groups: &[(PromSettings, Vec<Target>)],
    now: DateTime<Utc>,
) -> Result<Read, PromError> {
    let mut out = Read::default();
    for (settings, list) in groups {
        out.recommendations
            .extend(recommend(client, list, settings, now).await?);
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_are_five_minutes_apart_at_least_but_never_let_the_state_turn_stale() {
        let s = Duration::from_secs;
        assert_eq!(after_read(s(60), s(1800)), s(300));
        assert_eq!(after_read(s(900), s(1800)), s(900));
        assert_eq!(after_read(s(900), s(600)), s(300));
        assert_eq!(after_read(s(60), s(120)), s(60));
        assert_eq!(after_read(s(1), s(1)), MIN_RETRY);
    }
}
