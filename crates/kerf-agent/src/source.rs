//! Recommendation sources other than the hub (docs/sources.md): one per agent, chosen by
//! `recommendations.source`. A source produces the same recommendations the hub would
//! send (`kerf_api::hub::Recommendation`), published as the [`HubState`] the reconciler
//! reads, so guardrails, strategies, the health watch, canaries, explain and the report
//! work unchanged.
//!
//! Without a hub, the cluster configuration the hub would send comes from the agent's
//! own settings (clusterDefaults, freeze): it is the empty [`ClusterConfig`], recorded
//! at each successful read of the source, so only the source itself can make the state
//! stale (`SourceUnavailable` after `hub.staleAfter` without a successful read; the last
//! recommendations stay). Pause and approvals have in-cluster forms in every source: the
//! cluster-wide freeze, the `kerf.getkerf.dev/mode` annotation and the
//! `kerf.getkerf.dev/approve` annotation.
//!
//! Adding a source: a variant of `kerf_api::rsr::RecommendationSource` and an arm in
//! [`start`] spawning its task, which calls [`publish`] after each successful read.

pub mod prometheus;
pub mod vpa;
pub mod vpa_map;

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use chrono::{DateTime, Utc};
use kerf_api::hub::{ClusterConfig, Recommendation, RecommendationList};
use kerf_api::rsr::RecommendationSource;
use tokio::sync::watch;
use tokio::task::JoinSet;

use crate::cache::WorkloadKey;
use crate::context::Context;
use crate::hub::HubState;
use crate::hub::state::LastGood;

/// What one successful read of a source brought.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Read {
    /// The recommendations, one per workload.
    pub recommendations: Vec<Recommendation>,
    /// The workloads the source holds, with why (`VPAActive`).
    pub holds: BTreeMap<WorkloadKey, String>,
}

/// Starts the task of `source` (not the hub) for one leader term. Returns the state the
/// reconciler reads and a channel that turns true after the first successful read.
pub fn start(
    ctx: &Context,
    source: RecommendationSource,
    tasks: &mut JoinSet<()>,
) -> (watch::Receiver<HubState>, watch::Receiver<bool>) {
    let (tx, rx) = watch::channel(empty_state(source));
    let (read_tx, read_rx) = watch::channel(false);
    match source {
        RecommendationSource::Hub => {
            tracing::error!("the hub is not a local source; nothing is read");
        }
        RecommendationSource::Vpa => {
            tasks.spawn(vpa::run(ctx.clone(), tx, read_tx));
        }
        RecommendationSource::Prometheus => {
            tasks.spawn(prometheus::run(ctx.clone(), tx, read_tx));
        }
    }
    (rx, read_rx)
}

/// The state of `source` before its first read: no recommendation, no configuration.
pub fn empty_state(source: RecommendationSource) -> HubState {
    HubState {
        source,
        ..HubState::default()
    }
}

/// Records a successful read at `now` and tells the reconciler when something changed
/// (the recommendations, the holds, or the state turned fresh); a read that changed
/// nothing only moves the read time.
pub fn publish(tx: &watch::Sender<HubState>, read: Read, now: DateTime<Utc>, stale: Duration) {
    tx.send_if_modified(|state| state.apply_fetch(now, stale, |s| record(s, read, now)));
}

/// Applies `read` to `s`; returns whether a value changed.
pub fn record(s: &mut HubState, read: Read, now: DateTime<Utc>) -> bool {
    let generated_at = read
        .recommendations
        .iter()
        .map(|r| r.generated_at)
        .max()
        .unwrap_or(DateTime::<Utc>::UNIX_EPOCH);
    let list = RecommendationList {
        recommendations: read.recommendations,
        generated_at,
    };
    let same_list = LastGood::record(&mut s.last_good_recommendations, list, now);
    let same_config = LastGood::record(&mut s.last_good_config, ClusterConfig::default(), now);
    let same_holds = *s.holds == read.holds;
    if !same_holds {
        s.holds = Arc::new(read.holds);
    }
    !(same_list && same_config && same_holds)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(s: &str) -> DateTime<Utc> {
        DateTime::parse_from_rfc3339(s).unwrap().with_timezone(&Utc)
    }

    #[test]
    fn a_local_source_is_fresh_after_a_read_and_stale_after_stale_after_without_one() {
        let mut s = empty_state(RecommendationSource::Vpa);
        let stale = Duration::from_secs(1800);
        assert!(!s.is_fresh(at("2026-01-01T10:00:00Z")));
        let t0 = at("2026-01-01T10:00:00Z");
        assert!(s.apply_fetch(t0, stale, |s| record(s, Read::default(), t0)));
        assert!(s.is_fresh(at("2026-01-01T10:29:59Z")));
        // An unchanged read moves the read time without telling anyone.
        let t1 = at("2026-01-01T10:20:00Z");
        assert!(!s.apply_fetch(t1, stale, |s| record(s, Read::default(), t1)));
        assert!(s.is_fresh(at("2026-01-01T10:49:59Z")));
        assert!(!s.is_fresh(at("2026-01-01T10:50:00Z")));
        // A new hold is a change.
        let key = WorkloadKey::new("shop", kerf_api::WorkloadKind::Deployment, "web");
        let read = Read {
            holds: BTreeMap::from([(key.clone(), "VPA".to_owned())]),
            ..Read::default()
        };
        assert!(s.apply_fetch(t1, stale, |s| record(s, read, t1)));
        assert_eq!(s.holds.get(&key).map(String::as_str), Some("VPA"));
        assert_eq!(s.source, RecommendationSource::Vpa);
    }
}
