//! The leader's hub poll (design section 9, D26): restore the last good configuration
//! from `kerf-hub-state`, fetch the configuration and the recommendations every poll
//! interval, keep the configuration in `kerf-hub-state` when it changed, and put the
//! inventory when it changed (or every [`INVENTORY_EVERY_POLLS`] polls).

use std::sync::Arc;
use std::time::Duration;

use kerf_api::GoDuration;
use kerf_api::hub::{Inventory, InventoryContainer, InventoryWorkload};
use kerf_api::policy::RecommendationSettings;
use kerf_api::rsr::EffectiveModes;
use kerf_decide::duration::format_go_duration;
use kerf_decide::effective::EffectivePolicy;

use crate::cache::{CacheSet, WorkloadInfo};
use crate::context::Context;
use crate::hub::persist::{self, Persisted};
use crate::hub::{HubClient, HubState};
use crate::scope::{Verdict, in_cache};
use crate::settings::Settings;

/// An unchanged inventory is put again after this many polls, so a hub that lost it gets
/// it back.
pub const INVENTORY_EVERY_POLLS: u32 = 10;
/// Longest wait for the ConfigMap read at start.
const RESTORE_TIMEOUT: Duration = Duration::from_secs(10);

/// What the poll loop keeps between polls.
pub struct HubSync {
    client: Arc<HubClient>,
    ctx: Context,
    /// The state as last read from or written to the ConfigMap.
    persisted: Option<Persisted>,
    /// The digest of the inventory the hub last accepted (the inventory itself is about
    /// 1 KB a workload: 10 MB at 10,000 kept for one comparison a poll).
    inventory_sent: Option<InventoryDigest>,
    /// Polls since the inventory was last put.
    polls_since_inventory: u32,
}

impl HubSync {
    /// A poll loop state for `client`.
    pub fn new(client: Arc<HubClient>, ctx: Context) -> HubSync {
        HubSync {
            client,
            ctx,
            persisted: None,
            inventory_sent: None,
            polls_since_inventory: 0,
        }
    }

    /// Seeds the hub state with the configuration kept in `kerf-hub-state`, with its
    /// original fetch time (design D26). No ConfigMap, an unreadable one or one of another
    /// cluster leaves the state empty: every workload stays blocked `HubUnreachable` until
    /// a configuration is fetched (fail closed).
    pub async fn restore(&mut self) {
        let ns = &self.ctx.settings.namespace;
        let read = tokio::time::timeout(RESTORE_TIMEOUT, persist::load(&self.ctx.client, ns));
        let stored = match read.await {
            Ok(Ok(Some(p))) => p,
            Ok(Ok(None)) => {
                tracing::info!(namespace = %ns, "no kept hub configuration; waiting for the hub");
                return;
            }
            Ok(Err(e)) => {
                tracing::warn!(error = %e, "kept hub configuration not used");
                return;
            }
            Err(_) => {
                tracing::warn!("kept hub configuration not read in time; waiting for the hub");
                return;
            }
        };
        self.persisted = Some(stored.clone());
        let now = self.ctx.clock.now();
        match stored.usable_for(&self.ctx.settings.cluster_name, now) {
            Some((config, fetched_at)) => {
                tracing::info!(fetched_at = %kerf_decide::duration::Rfc3339(fetched_at), paused = config.flags.paused, "hub configuration restored from {}", persist::CONFIG_MAP_NAME);
                self.client.restore_config(config, fetched_at);
            }
            None => tracing::warn!("kept hub configuration belongs to another cluster; not used"),
        }
    }

    /// One poll: configuration, recommendations, then the ConfigMap and the inventory.
    pub async fn poll_once(&mut self) {
        let config_ok = match self.client.fetch_config().await {
            Ok(_) => true,
            Err(e) => {
                tracing::warn!(error = %e, "hub config fetch failed");
                false
            }
        };
        let recs_ok = match self.client.fetch_recommendations().await {
            Ok(_) => true,
            Err(e) => {
                tracing::warn!(error = %e, "hub recommendations fetch failed");
                false
            }
        };
        if config_ok {
            self.persist().await;
        }
        if config_ok || recs_ok {
            self.report_inventory().await;
        }
    }

    /// Writes `kerf-hub-state` when the configuration changed (never while idle).
    async fn persist(&mut self) {
        let Some(good) = self.client.state().last_good_config else {
            return;
        };
        let current = Persisted {
            cluster: self.ctx.settings.cluster_name.clone(),
            config: (*good.value).clone(),
            fetched_at: good.fetched_at,
        };
        if !Persisted::needs_write(self.persisted.as_ref(), &current) {
            return;
        }
        let ns = &self.ctx.settings.namespace;
        match persist::save(&self.ctx.client, ns, &current).await {
            Ok(()) => self.persisted = Some(current),
            Err(e) => tracing::warn!(error = %e, "hub configuration not kept"),
        }
    }

    /// Puts the inventory when it changed since the hub last accepted it, or when
    /// [`INVENTORY_EVERY_POLLS`] polls passed.
    async fn report_inventory(&mut self) {
        self.polls_since_inventory = self.polls_since_inventory.saturating_add(1);
        let inv = inventory(&self.ctx.cache, &self.client.state(), &self.ctx.settings);
        let due = self.polls_since_inventory >= INVENTORY_EVERY_POLLS;
        let digest = inventory_digest(&inv);
        if !due && digest.is_some() && self.inventory_sent == digest {
            return;
        }
        match self.client.put_inventory(&inv).await {
            Ok(()) => {
                tracing::debug!(workloads = inv.workloads.len(), "inventory put");
                self.inventory_sent = digest;
                self.polls_since_inventory = 0;
            }
            Err(e) => {
                tracing::warn!(error = %e, category = e.category(), "inventory not put");
                self.inventory_sent = None;
            }
        }
    }
}

/// The SHA-256 of an inventory's JSON.
type InventoryDigest = [u8; 32];

/// The digest of `inv` (none if it does not serialize: then it is always put).
fn inventory_digest(inv: &Inventory) -> Option<InventoryDigest> {
    use sha2::{Digest, Sha256};
    let json = serde_json::to_vec(inv).ok()?;
    Some(Sha256::digest(&json).into())
}

/// The inventory of every workload of the agent's scope in the caches, sorted by
/// namespace, kind and name: the pod template's current values, the effective mode and
/// strategy, and the effective recommender settings (an unset field is left to the hub's
/// default).
pub fn inventory(cache: &CacheSet, hub: &HubState, settings: &Settings) -> Inventory {
    let policies = super::facts::policies(cache);
    let mut workloads: Vec<InventoryWorkload> = cache
        .workloads()
        .iter()
        .filter(|w| in_cache(&settings.scope, cache, &w.key) == Verdict::In)
        .map(|w| {
            let p = super::facts::policy_for(w, cache, &policies, hub, settings);
            inventory_workload(w, &p)
        })
        .collect();
    workloads
        .sort_by(|a, b| (&a.namespace, &a.kind, &a.name).cmp(&(&b.namespace, &b.kind, &b.name)));
    Inventory { workloads }
}

/// One workload of the inventory under its effective policy.
pub fn inventory_workload(w: &WorkloadInfo, p: &EffectivePolicy) -> InventoryWorkload {
    InventoryWorkload {
        namespace: w.key.namespace.to_string(),
        kind: w.key.kind.as_str().to_owned(),
        name: w.key.name.to_string(),
        uid: w.uid.clone(),
        containers: w
            .containers
            .iter()
            .map(|c| InventoryContainer {
                name: c.name.to_string(),
                requests: c.requests.clone(),
                limits: c.limits.clone(),
            })
            .collect(),
        mode: EffectiveModes {
            cpu: p.mode.cpu.value,
            memory: p.mode.memory.value,
        },
        strategy: p.strategy.value,
        settings: recommendation_settings(p),
    }
}

/// The effective recommender settings of `p` (an unset field is left to the source's
/// default).
pub fn recommendation_settings(p: &EffectivePolicy) -> RecommendationSettings {
    let rec = &p.recommendation;
    RecommendationSettings {
        window: rec
            .window
            .as_ref()
            .map(|w| GoDuration(format_go_duration(w.value))),
        cpu_percentile: rec.cpu_percentile.as_ref().map(|v| v.value),
        memory_percentile: rec.memory_percentile.as_ref().map(|v| v.value),
        headroom_percent: rec.headroom_percent.as_ref().map(|v| v.value),
        limits: rec.limits.as_ref().map(|v| v.value),
    }
}

#[cfg(test)]
mod tests {
    use clap::Parser;

    use super::*;
    use crate::cache::Interner;
    use crate::cache::workloads::DeploymentWire;
    use crate::cli::{Cli, Command};

    fn settings(flags: &[&str]) -> Settings {
        let mut argv = vec!["kerf-agent", "run", "--cluster-name", "c"];
        argv.extend_from_slice(&["--namespace", "kerf", "--leader-identity", "t"]);
        argv.extend_from_slice(flags);
        let Command::Run(args) = Cli::try_parse_from(argv).unwrap().command else {
            panic!("not run");
        };
        Settings::from_args(&args, &|_| None).unwrap()
    }

    #[test]
    fn the_inventory_holds_the_workloads_of_the_scope_only() {
        let cache = CacheSet::new();
        for ns in ["a", "b"] {
            let wire: DeploymentWire = serde_json::from_value(serde_json::json!({
                "metadata": {"name": "web", "namespace": ns, "uid": ns},
                "spec": {"template": {"spec": {"containers": [{"name": "app"}]}}},
            }))
            .unwrap();
            cache.apply_workload(wire.into_info(&mut Interner::default()));
        }
        let hub = HubState::default();
        let namespaces = |inv: Inventory| -> Vec<String> {
            inv.workloads.into_iter().map(|w| w.namespace).collect()
        };
        assert_eq!(
            namespaces(inventory(&cache, &hub, &settings(&[]))),
            ["a", "b"]
        );
        let scoped = settings(&["--scope-namespaces", "a"]);
        assert_eq!(namespaces(inventory(&cache, &hub, &scoped)), ["a"]);
    }
}
