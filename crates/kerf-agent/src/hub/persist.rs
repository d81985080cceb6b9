//! The last good hub configuration kept across restarts (design D26): the ConfigMap
//! `kerf-hub-state` in the agent's namespace holds the configuration, its fetch time and
//! the cluster it belongs to. It is written only when the configuration (or the cluster)
//! changed, never because time passed, so an agent with nothing new writes nothing. It is
//! read when a leader starts and used until `hub.staleAfter` after the recorded fetch time.
//!
//! The recorded fetch time is therefore when the configuration as kept was first fetched:
//! after a restart, a configuration unchanged for longer than `staleAfter` is not used and
//! the agent fails closed until the hub answers. The kept configuration goes stale early
//! at worst, never late.
//!
//! Data keys: `cluster` (the cluster name), `config` (the `ClusterConfig` as JSON) and
//! `fetchedAt` (RFC 3339).

use std::collections::BTreeMap;

use chrono::{DateTime, SecondsFormat, Utc};
use k8s_openapi::api::core::v1::ConfigMap;
use kerf_api::hub::ClusterConfig;
use kube::Api;
use kube::api::{ObjectMeta, PostParams};

/// Name of the ConfigMap.
pub const CONFIG_MAP_NAME: &str = "kerf-hub-state";
/// Data key of the cluster name.
pub const KEY_CLUSTER: &str = "cluster";
/// Data key of the configuration (JSON).
pub const KEY_CONFIG: &str = "config";
/// Data key of the fetch time (RFC 3339).
pub const KEY_FETCHED_AT: &str = "fetchedAt";

/// Errors reading or writing the hub state ConfigMap.
#[derive(Debug, thiserror::Error)]
pub enum PersistError {
    /// The API server refused or failed the read or the write.
    #[error("ConfigMap {CONFIG_MAP_NAME}: {0}")]
    Kube(#[from] kube::Error),
    /// The ConfigMap's content is not a hub state: the key and the problem.
    #[error("ConfigMap {CONFIG_MAP_NAME}: {key}: {message}")]
    Invalid {
        /// The data key.
        key: &'static str,
        /// What is wrong with it.
        message: String,
    },
}

/// The configuration as kept in the ConfigMap.
#[derive(Clone, Debug, PartialEq)]
pub struct Persisted {
    /// The cluster the configuration belongs to.
    pub cluster: String,
    /// The last good configuration.
    pub config: ClusterConfig,
    /// When it was fetched.
    pub fetched_at: DateTime<Utc>,
}

impl Persisted {
    /// The ConfigMap data of this state.
    pub fn to_data(&self) -> Result<BTreeMap<String, String>, PersistError> {
        let config = serde_json::to_string(&self.config).map_err(|e| PersistError::Invalid {
            key: KEY_CONFIG,
            message: e.to_string(),
        })?;
        Ok(BTreeMap::from([
            (KEY_CLUSTER.to_owned(), self.cluster.clone()),
            (KEY_CONFIG.to_owned(), config),
            (
                KEY_FETCHED_AT.to_owned(),
                self.fetched_at.to_rfc3339_opts(SecondsFormat::Millis, true),
            ),
        ]))
    }

    /// Reads the state from ConfigMap data; every problem names its key.
    pub fn from_data(data: &BTreeMap<String, String>) -> Result<Persisted, PersistError> {
        let get = |key: &'static str| {
            data.get(key).ok_or(PersistError::Invalid {
                key,
                message: "missing".to_owned(),
            })
        };
        let config = serde_json::from_str(get(KEY_CONFIG)?).map_err(|e| PersistError::Invalid {
            key: KEY_CONFIG,
            message: e.to_string(),
        })?;
        let fetched_at = DateTime::parse_from_rfc3339(get(KEY_FETCHED_AT)?)
            .map_err(|e| PersistError::Invalid {
                key: KEY_FETCHED_AT,
                message: e.to_string(),
            })?
            .with_timezone(&Utc);
        Ok(Persisted {
            cluster: get(KEY_CLUSTER)?.clone(),
            config,
            fetched_at,
        })
    }

    /// Whether `current` must be written over this stored state: there is none, or the
    /// cluster or the configuration differ. A later fetch of the same configuration is no
    /// reason to write (design D26: written only when it changes).
    pub fn needs_write(stored: Option<&Persisted>, current: &Persisted) -> bool {
        stored.is_none_or(|s| s.cluster != current.cluster || s.config != current.config)
    }

    /// The configuration to restore for `cluster` at `now`: none for another cluster; a
    /// fetch time in the future counts as `now`, so a skewed clock never extends it.
    pub fn usable_for(
        self,
        cluster: &str,
        now: DateTime<Utc>,
    ) -> Option<(ClusterConfig, DateTime<Utc>)> {
        (self.cluster == cluster).then(|| (self.config, self.fetched_at.min(now)))
    }
}

/// Reads the hub state ConfigMap of `namespace`: `None` when there is none.
pub async fn load(
    client: &kube::Client,
    namespace: &str,
) -> Result<Option<Persisted>, PersistError> {
    let api: Api<ConfigMap> = Api::namespaced(client.clone(), namespace);
    let Some(cm) = api.get_opt(CONFIG_MAP_NAME).await? else {
        return Ok(None);
    };
    Persisted::from_data(&cm.data.unwrap_or_default()).map(Some)
}

/// Writes the hub state ConfigMap of `namespace`: created when absent, else replaced
/// (the Role allows `create`, and `get`/`update` on this name only).
pub async fn save(
    client: &kube::Client,
    namespace: &str,
    state: &Persisted,
) -> Result<(), PersistError> {
    let api: Api<ConfigMap> = Api::namespaced(client.clone(), namespace);
    let data = state.to_data()?;
    let pp = PostParams {
        field_manager: Some("kerf".to_owned()),
        ..PostParams::default()
    };
    match api.get_opt(CONFIG_MAP_NAME).await? {
        Some(mut cm) => {
            cm.data = Some(data);
            cm.metadata.managed_fields = None;
            api.replace(CONFIG_MAP_NAME, &pp, &cm).await?;
        }
        None => {
            let cm = ConfigMap {
                metadata: ObjectMeta {
                    name: Some(CONFIG_MAP_NAME.to_owned()),
                    namespace: Some(namespace.to_owned()),
                    labels: Some(BTreeMap::from([(
                        "app.kubernetes.io/name".to_owned(),
                        "kerf-agent".to_owned(),
                    )])),
                    ..ObjectMeta::default()
                },
                data: Some(data),
                ..ConfigMap::default()
            };
            api.create(&pp, &cm).await?;
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use kerf_api::hub::PauseScope;

    use super::*;

    fn at(s: &str) -> DateTime<Utc> {
        DateTime::parse_from_rfc3339(s).unwrap().with_timezone(&Utc)
    }

    fn paused(fetched_at: &str) -> Persisted {
        let mut config = ClusterConfig::default();
        config.flags.paused = true;
        config.flags.pause_scope = Some(PauseScope::Cluster);
        Persisted {
            cluster: "prod".to_owned(),
            config,
            fetched_at: at(fetched_at),
        }
    }

    // rule: design D26
    #[test]
    fn the_state_round_trips_through_configmap_data() {
        let p = paused("2026-01-01T10:00:00Z");
        let data = p.to_data().unwrap();
        assert_eq!(data[KEY_FETCHED_AT], "2026-01-01T10:00:00.000Z");
        assert!(data[KEY_CONFIG].contains("\"pauseScope\":\"cluster\""));
        assert_eq!(Persisted::from_data(&data).unwrap(), p);
        let mut bad = data.clone();
        bad.insert(KEY_FETCHED_AT.to_owned(), "yesterday".to_owned());
        let e = Persisted::from_data(&bad).unwrap_err().to_string();
        assert!(e.contains("fetchedAt"), "{e}");
        bad.remove(KEY_CONFIG);
        let e = Persisted::from_data(&bad).unwrap_err().to_string();
        assert!(e.contains("config: missing"), "{e}");
    }

    // rule: design D26
    #[test]
    fn written_only_when_the_config_or_the_cluster_changes() {
        let stored = paused("2026-01-01T10:00:00Z");
        assert!(Persisted::needs_write(None, &stored));
        // The same configuration fetched again, however much later: no write.
        for later in [
            "2026-01-01T10:01:00Z",
            "2026-01-01T12:00:00Z",
            "2026-02-01T10:00:00Z",
        ] {
            assert!(
                !Persisted::needs_write(Some(&stored), &paused(later)),
                "{later}"
            );
        }
        let mut resumed = paused("2026-01-01T10:01:00Z");
        resumed.config.flags = Default::default();
        assert!(Persisted::needs_write(Some(&stored), &resumed));
        let mut other = paused("2026-01-01T10:01:00Z");
        other.cluster = "dev".to_owned();
        assert!(Persisted::needs_write(Some(&stored), &other));
    }

    // rule: design D26
    #[test]
    fn another_clusters_state_or_a_future_fetch_time_is_not_trusted() {
        let now = at("2026-01-01T10:00:00Z");
        assert!(
            paused("2026-01-01T09:00:00Z")
                .usable_for("dev", now)
                .is_none()
        );
        let (config, fetched) = paused("2026-01-01T11:00:00Z")
            .usable_for("prod", now)
            .unwrap();
        assert!(config.flags.paused);
        assert_eq!(fetched, now);
    }
}
