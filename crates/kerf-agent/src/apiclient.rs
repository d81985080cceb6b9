//! The agent's Kubernetes client: every request passes through one layer that records
//! whether the API server answers ([`health`]) and holds actuating writes to the rate of
//! the client-side limit ([`limiter`]).
//!
//! An actuating write is one that changes what runs: a write to a pod (a resize, an
//! eviction), to a Deployment, StatefulSet or DaemonSet (the template), or to an HPA. Writes
//! of the agent's own records (rsrs and their status, policy status, Events, the Lease, the
//! hub state ConfigMap) are not held back, and neither is a dry run.
//!
//! While the server counts as down ([`ApiHealth::is_up`]), an actuating write is not sent:
//! it fails at once as a refused connection would, and is counted as `held`
//! ([`metrics::ApiMetrics`]). Passes do not start then either; the guard here also covers a
//! pass that was already running when the server went away.

pub mod health;
pub mod limiter;
pub mod metrics;

use std::sync::Arc;

use http::{Method, Request};
use kube::client::Body;

pub use health::{ApiHealth, Outcome};
pub use limiter::{WriteLimiter, WriteRate};
pub use metrics::{ApiMetrics, WriteOutcome};

/// The fail point (a switch) that turns the guard off, for tests that show it matters.
pub const WRITE_GUARD_OFF: &str = "write-guard-off";

/// The error of an actuating write the guard held back.
#[derive(Debug, thiserror::Error)]
#[error("actuating write not sent: the API server is unavailable")]
pub struct WriteHeld;

/// Kinds whose writes change what runs.
const ACTUATED: [&str; 5] = [
    "pods",
    "deployments",
    "statefulsets",
    "daemonsets",
    "horizontalpodautoscalers",
];

/// Whether a request with this method, path and query is an actuating write.
pub fn is_actuating(method: &Method, path: &str, query: Option<&str>) -> bool {
    if matches!(*method, Method::GET | Method::HEAD | Method::OPTIONS) {
        return false;
    }
    let dry_run = query.is_some_and(|q| q.split('&').any(|kv| kv.starts_with("dryRun=")));
    if dry_run {
        return false;
    }
    let segs: Vec<&str> = path.trim_matches('/').split('/').collect();
    // /api/v1/namespaces/ns/kind/name[/sub] or /apis/group/version/namespaces/ns/kind/name[/sub]
    let rest = match segs.as_slice() {
        ["api", _, "namespaces", _, rest @ ..] => rest,
        ["apis", _, _, "namespaces", _, rest @ ..] => rest,
        _ => return false,
    };
    match rest {
        [kind, _name] => ACTUATED.contains(kind),
        ["pods", _name, sub] => matches!(*sub, "resize" | "eviction"),
        _ => false,
    }
}

/// What the layer shares with the rest of the agent.
#[derive(Clone, Debug)]
pub struct Guard {
    /// The API server's availability.
    pub health: ApiHealth,
    /// The limit on actuating writes.
    pub limiter: Arc<WriteLimiter>,
    /// Actuating writes sent and held.
    pub metrics: ApiMetrics,
}

impl Guard {
    /// A guard with a full bucket of `rate`, counting into `metrics`.
    pub fn new(rate: WriteRate, metrics: ApiMetrics) -> Guard {
        Guard {
            health: ApiHealth::default(),
            limiter: Arc::new(WriteLimiter::new(rate)),
            metrics,
        }
    }

    /// `client` with every request passing through this guard.
    pub fn wrap(&self, client: kube::Client) -> kube::Client {
        let namespace = client.default_namespace().to_owned();
        let guard = self.clone();
        let service = tower::service_fn(move |req: Request<Body>| {
            let inner = client.clone();
            let guard = guard.clone();
            async move { guard.send(&inner, req).await }
        });
        kube::Client::new(service, namespace)
    }

    async fn send(
        &self,
        inner: &kube::Client,
        req: Request<Body>,
    ) -> Result<http::Response<Body>, kube::Error> {
        if is_actuating(req.method(), req.uri().path(), req.uri().query()) {
            self.limiter.acquire().await;
            // Checked after the wait: the server may have gone away meanwhile.
            if !self.health.is_up() && !crate::failpoints::is_set(WRITE_GUARD_OFF) {
                self.metrics
                    .actuating
                    .get_or_create(&WriteOutcome::held())
                    .inc();
                return Err(kube::Error::Service(Box::new(WriteHeld)));
            }
            self.metrics
                .actuating
                .get_or_create(&WriteOutcome::sent())
                .inc();
        }
        let pending = self.health.start();
        let res = inner.send(req).await;
        pending.finish(match &res {
            Ok(r) => Outcome::of_status(r.status().as_u16()),
            Err(_) => Outcome::Unavailable,
        });
        res
    }
}

/// How often the API server is asked while its last answer was an outage.
pub const PROBE_EVERY: std::time::Duration = std::time::Duration::from_secs(2);

/// While the last answer was an outage, asks `GET /version` every [`PROBE_EVERY`] through
/// `client` (a client of [`Guard::wrap`]), so the server's return shows even when nothing
/// else sends a request. Runs until `shutdown`.
pub async fn probe_while_down(
    client: kube::Client,
    health: ApiHealth,
    mut shutdown: tokio::sync::watch::Receiver<bool>,
) {
    let mut up = health.subscribe();
    loop {
        tokio::select! {
            r = up.wait_for(|u| !*u) => if r.is_err() { return },
            _ = shutdown.wait_for(|s| *s) => return,
        }
        while !*up.borrow() {
            tokio::select! {
                _ = tokio::time::sleep(PROBE_EVERY) => {}
                _ = shutdown.wait_for(|s| *s) => return,
            }
            let _ = tokio::time::timeout(PROBE_EVERY, client.apiserver_version()).await;
        }
    }
}

/// Whether the API server lists `pods/resize` in the discovery of `/api/v1` (design D19).
/// When discovery cannot be read the subresource is assumed served: a resize that then
/// answers 404 or 405 is refused by the executor.
pub async fn resize_subresource_served(client: &kube::Client) -> bool {
    match client.list_core_api_resources("v1").await {
        Ok(list) => {
            let served = list.resources.iter().any(|r| r.name == "pods/resize");
            if !served {
                tracing::warn!(
                    "the API server has no pods/resize: in-place changes are blocked UnsupportedNode"
                );
            }
            served
        }
        Err(e) => {
            tracing::warn!(error = %e, "cannot read API discovery; assuming pods/resize is served");
            true
        }
    }
}

#[cfg(test)]
mod tests {
    use kube::api::{Api, Patch, PatchParams};

    /// A guarded client of a port nothing listens on, and its counters.
    fn refused() -> (kube::Client, Guard) {
        let _ = rustls::crypto::ring::default_provider().install_default();
        let url = "http://127.0.0.1:9".parse().expect("url");
        let inner = kube::Client::try_from(kube::Config::new(url)).expect("client");
        let rate = WriteRate {
            per_second: 100,
            burst: 100,
        };
        let guard = Guard::new(rate, ApiMetrics::default());
        (guard.wrap(inner), guard)
    }

    fn count(guard: &Guard, outcome: WriteOutcome) -> u64 {
        guard.metrics.actuating.get_or_create(&outcome).get()
    }

    // rule: design D25
    #[tokio::test]
    async fn an_actuating_write_is_not_sent_once_the_server_is_known_down() {
        let (client, guard) = refused();
        let pods: Api<k8s_openapi::api::core::v1::Pod> = Api::namespaced(client, "a");
        let (pp, body) = (
            PatchParams::default(),
            Patch::Merge(serde_json::json!({"spec": {}})),
        );
        let patch = || pods.patch("p", &pp, &body);
        // The first write goes out (nothing is known yet) and finds the server down.
        assert!(patch().await.is_err());
        assert_eq!(count(&guard, WriteOutcome::sent()), 1);
        assert!(!guard.health.is_up());
        // The next ones are held: not sent, failed at once.
        for _ in 0..3 {
            let err = patch().await.expect_err("held");
            assert!(err.to_string().contains("not sent"), "{err}");
        }
        assert_eq!(count(&guard, WriteOutcome::sent()), 1);
        assert_eq!(count(&guard, WriteOutcome::held()), 3);
        // Reads still go out: they are how the server's return shows.
        assert!(pods.get("p").await.is_err());
        assert_eq!(count(&guard, WriteOutcome::held()), 3);
    }
    use super::*;

    #[test]
    fn actuating_writes_are_the_writes_that_change_what_runs() {
        let yes = [
            (Method::PATCH, "/api/v1/namespaces/a/pods/p/resize", None),
            (Method::POST, "/api/v1/namespaces/a/pods/p/eviction", None),
            (Method::PATCH, "/api/v1/namespaces/a/pods/p", None),
            (
                Method::PATCH,
                "/apis/apps/v1/namespaces/a/deployments/d",
                Some("fieldManager=kerf&force=true"),
            ),
            (
                Method::PATCH,
                "/apis/apps/v1/namespaces/a/statefulsets/s",
                None,
            ),
            (Method::PUT, "/apis/apps/v1/namespaces/a/daemonsets/d", None),
            (
                Method::PATCH,
                "/apis/autoscaling/v2/namespaces/a/horizontalpodautoscalers/h",
                None,
            ),
        ];
        for (m, p, q) in yes {
            assert!(is_actuating(&m, p, q), "{m} {p}");
        }
        let no = [
            (Method::GET, "/api/v1/namespaces/a/pods/p", None),
            (
                Method::GET,
                "/apis/apps/v1/namespaces/a/deployments",
                Some("watch=true"),
            ),
            (
                Method::PATCH,
                "/apis/apps/v1/namespaces/a/deployments/d",
                Some("dryRun=All"),
            ),
            (
                Method::PATCH,
                "/apis/apps/v1/namespaces/a/deployments/d/status",
                None,
            ),
            (
                Method::PUT,
                "/apis/kerf.dev/v1alpha1/namespaces/a/rightsizingrecommendations/r/status",
                None,
            ),
            (
                Method::PATCH,
                "/apis/kerf.dev/v1alpha1/namespaces/a/rightsizingrecommendations/r",
                None,
            ),
            (Method::POST, "/api/v1/namespaces/a/events", None),
            (
                Method::PUT,
                "/apis/coordination.k8s.io/v1/namespaces/a/leases/kerf-agent",
                None,
            ),
            (
                Method::PUT,
                "/api/v1/namespaces/a/configmaps/kerf-hub-state",
                None,
            ),
            (
                Method::PUT,
                "/apis/kerf.dev/v1alpha1/rightsizingpolicies/p/status",
                None,
            ),
        ];
        for (m, p, q) in no {
            assert!(!is_actuating(&m, p, q), "{m} {p}");
        }
    }
}
