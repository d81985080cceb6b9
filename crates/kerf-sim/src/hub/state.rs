//! What the dev hub holds: per cluster its recommendations, configuration, inventory and
//! the events it stored. Pure data, no I/O: the routes lock it, read or change it, and
//! answer.

use std::collections::{BTreeMap, HashSet};

use chrono::{DateTime, Utc};
use kerf_api::event::{Event, EventType};
use kerf_api::hub::{
    ClusterConfig, EventBatch, EventBatchResponse, Inventory, PauseScope, Recommendation,
    RecommendationList,
};
use serde::Deserialize;
use sha2::{Digest, Sha256};

/// One cluster as the dev hub knows it.
#[derive(Clone, Debug, Default)]
pub struct ClusterState {
    /// The current recommendation list.
    pub recommendations: Vec<Recommendation>,
    /// When the list was last set (its `generatedAt`).
    pub generated_at: DateTime<Utc>,
    /// The cluster's configuration.
    pub config: ClusterConfig,
    /// The last inventory the agent put.
    pub inventory: Option<Inventory>,
    /// Stored events, in the order they were first received.
    pub events: Vec<Event>,
    ids: HashSet<uuid::Uuid>,
    /// Stored events per type.
    pub counts: BTreeMap<EventType, usize>,
    /// Duplicate deliveries ignored.
    pub duplicates: usize,
}

impl ClusterState {
    /// The list as served, with its `generatedAt`.
    pub fn list(&self) -> RecommendationList {
        RecommendationList {
            recommendations: self.recommendations.clone(),
            generated_at: self.generated_at,
        }
    }

    /// Stores the events of an accepted batch; an id already stored is ignored.
    pub fn store(&mut self, batch: EventBatch) -> EventBatchResponse {
        let mut answer = EventBatchResponse::default();
        for event in batch.events {
            if self.ids.insert(event.id) {
                *self.counts.entry(event.type_).or_default() += 1;
                self.events.push(event);
                answer.accepted += 1;
            } else {
                self.duplicates += 1;
                answer.duplicates += 1;
            }
        }
        answer
    }

    /// Sets or clears the pause flag.
    pub fn pause(&mut self, scope: Option<PauseScope>) {
        self.config.flags.paused = scope.is_some();
        self.config.flags.pause_scope = scope;
    }
}

/// The ETag of a recommendation list: a hash of its JSON, quoted.
pub fn etag(list: &RecommendationList) -> String {
    let body = serde_json::to_vec(list).unwrap_or_default();
    let digest = Sha256::digest(&body);
    format!("\"{}\"", hex::encode(&digest[..12]))
}

/// The dev hub's YAML file: recommendations and configuration per cluster.
///
/// ```yaml
/// clusters:
///   dev:
///     config: {flags: {paused: false}}
///     recommendations:
///       - workload: {namespace: shop, kind: Deployment, name: web}
///         recommendationID: r-1
///         ...
/// ```
#[derive(Clone, Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct HubFile {
    /// Clusters by name.
    #[serde(default)]
    pub clusters: BTreeMap<String, HubFileCluster>,
}

/// One cluster of [`HubFile`].
#[derive(Clone, Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct HubFileCluster {
    /// The cluster's recommendations.
    #[serde(default)]
    pub recommendations: Vec<Recommendation>,
    /// The cluster's configuration.
    #[serde(default)]
    pub config: ClusterConfig,
}

/// All clusters; a cluster that is asked for and not known starts empty.
#[derive(Debug, Default)]
pub struct HubData {
    /// Clusters by name.
    pub clusters: BTreeMap<String, ClusterState>,
}

impl HubData {
    /// The cluster, created empty (generated at `now`) when it is not known yet.
    pub fn cluster(&mut self, name: &str, now: DateTime<Utc>) -> &mut ClusterState {
        self.clusters
            .entry(name.to_owned())
            .or_insert_with(|| ClusterState {
                generated_at: now,
                ..ClusterState::default()
            })
    }

    /// Loads the clusters of a hub file.
    pub fn load(&mut self, file: HubFile, now: DateTime<Utc>) {
        for (name, c) in file.clusters {
            let cluster = self.cluster(&name, now);
            cluster.recommendations = c.recommendations;
            cluster.config = c.config;
            cluster.generated_at = now;
        }
    }
}
