//! The hub state the reconciler reads (design D26): the last good recommendations and
//! configuration, when each was fetched (200 or 304), and until when they count as fresh.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use chrono::{DateTime, Utc};
use kerf_api::hub::{ClusterConfig, RecommendationList};
use kerf_api::rsr::RecommendationSource;

use crate::cache::WorkloadKey;

/// A value from the last successful fetch.
#[derive(Clone, Debug, PartialEq)]
pub struct LastGood<T> {
    /// The value.
    pub value: Arc<T>,
    /// When it was last fetched successfully (200, or 304 for an unchanged list).
    pub fetched_at: DateTime<Utc>,
}

impl<T: PartialEq> LastGood<T> {
    /// Records `value` in `slot` as the last good answer, fetched at `now`; returns whether
    /// it equals the one it replaces.
    pub fn record(slot: &mut Option<LastGood<T>>, value: T, now: DateTime<Utc>) -> bool {
        let same = slot.as_ref().is_some_and(|g| *g.value == value);
        *slot = Some(LastGood {
            value: Arc::new(value),
            fetched_at: now,
        });
        same
    }
}

/// What the agent knows of the hub, or of the recommendation source that stands in for it. A failed fetch, a malformed answer or an answer over
/// the size limit leaves it unchanged.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct HubState {
    /// The last good recommendation list (with `scope.namespaces`, its recommendations
    /// for those namespaces only).
    pub last_good_recommendations: Option<LastGood<RecommendationList>>,
    /// The recommendations of that list for namespaces outside `scope.namespaces`, by
    /// workload and id, until the reconciler takes them: each is reported once as
    /// `OutOfScope`.
    pub outside_scope: Arc<super::scoped::OutsideScopeHandoff>,
    /// The ETag of that list.
    pub etag: Option<String>,
    /// The last good cluster configuration.
    pub last_good_config: Option<LastGood<ClusterConfig>>,
    /// The older of both fetch times plus `hub.staleAfter`; `None` until both were fetched.
    pub fresh_until: Option<DateTime<Utc>>,
    /// Where the recommendations come from (`crate::source` for the sources other than
    /// the hub, which read rather than fetch, and set the configuration themselves).
    pub source: RecommendationSource,
    /// Workloads the source holds, with why (`VPAActive`); the hub holds none.
    pub holds: Arc<BTreeMap<WorkloadKey, String>>,
}

impl HubState {
    /// Whether both recommendations and configuration are fresh at `now`. When not, every
    /// change is blocked with `HubUnreachable` (rule EV-37).
    pub fn is_fresh(&self, now: DateTime<Utc>) -> bool {
        self.fresh_until.is_some_and(|until| now < until)
    }

    /// Applies what a fetch brought (`update` tells whether a value changed) and tells
    /// whether subscribers must hear of it: a value changed, or the state turned fresh
    /// (it was stale or not yet complete). A fetch that only moves a fetch time moves
    /// `fresh_until` silently: readers that time staleness read it when they set their
    /// timer, and nothing has to be decided again for it.
    pub fn apply_fetch(
        &mut self,
        now: DateTime<Utc>,
        stale_after: Duration,
        update: impl FnOnce(&mut HubState) -> bool,
    ) -> bool {
        let was_fresh = self.is_fresh(now);
        let changed = update(self);
        self.refresh(stale_after);
        changed || (!was_fresh && self.is_fresh(now))
    }

    /// Computes `fresh_until` again.
    pub fn refresh(&mut self, stale_after: Duration) {
        let stale = chrono::Duration::from_std(stale_after).unwrap_or(chrono::Duration::MAX);
        self.fresh_until = match (&self.last_good_recommendations, &self.last_good_config) {
            (Some(r), Some(c)) => r.fetched_at.min(c.fetched_at).checked_add_signed(stale),
            _ => None,
        };
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(s: &str) -> DateTime<Utc> {
        DateTime::parse_from_rfc3339(s).unwrap().with_timezone(&Utc)
    }

    // rule: EV-37
    #[test]
    fn staleness_runs_from_the_older_of_both_fetches() {
        let mut s = HubState {
            last_good_recommendations: Some(LastGood {
                value: Arc::new(RecommendationList {
                    recommendations: vec![],
                    generated_at: at("2020-01-01T00:00:00Z"),
                }),
                fetched_at: at("2026-01-01T10:00:00Z"),
            }),
            ..HubState::default()
        };
        s.refresh(Duration::from_secs(1800));
        assert_eq!(s.fresh_until, None);
        assert!(!s.is_fresh(at("2026-01-01T10:00:00Z")));
        s.last_good_config = Some(LastGood {
            value: Arc::new(ClusterConfig::default()),
            fetched_at: at("2026-01-01T09:50:00Z"),
        });
        s.refresh(Duration::from_secs(1800));
        assert_eq!(s.fresh_until, Some(at("2026-01-01T10:20:00Z")));
        assert!(s.is_fresh(at("2026-01-01T10:19:59Z")));
        assert!(!s.is_fresh(at("2026-01-01T10:20:00Z")));
    }
}
