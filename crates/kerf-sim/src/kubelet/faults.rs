//! Injected container faults (OOM kill, restart, CPU throttling) and the plain-HTTP control
//! listener that exposes them and the cAdvisor counters:
//!
//! - `POST /sim/faults` with a JSON [`Fault`], e.g.
//!   `{"kind": "OomKill", "namespace": "demo", "pod": "web-0", "container": "app"}` or
//!   `{"kind": "Throttle", "namespace": "demo", "pod": "web-0", "container": "app", "ratio": 0.4}`:
//!   204 when applied, 404 for an unknown pod or container, 400 for a bad body;
//! - `GET /metrics/cadvisor[?node=NAME]`: the CFS counters in Prometheus text format;
//! - `GET /healthz`: `ok`.

use std::collections::HashMap;
use std::net::SocketAddr;

use axum::Router;
use axum::extract::{Query, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::actuation::restart_entry;
use super::{MANAGER, render_cadvisor};
use crate::context::SimContext;
use crate::store::gvr;

/// A fault to inject into a running container.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind")]
pub enum Fault {
    /// The container is OOM-killed and restarted: `lastState.terminated.reason` OOMKilled,
    /// exit code 137, restartCount + 1.
    OomKill {
        /// Namespace of the pod.
        namespace: String,
        /// Pod name.
        pod: String,
        /// Container name.
        container: String,
    },
    /// The container exits with an error and is restarted (reason Error, exit code 1).
    Restart {
        /// Namespace of the pod.
        namespace: String,
        /// Pod name.
        pod: String,
        /// Container name.
        container: String,
    },
    /// From now on, `ratio` of the container's CFS periods are throttled.
    Throttle {
        /// Namespace of the pod.
        namespace: String,
        /// Pod name.
        pod: String,
        /// Container name.
        container: String,
        /// Throttled share of the CFS periods, 0 to 1.
        ratio: f64,
    },
}

/// Why a fault could not be injected.
#[derive(Debug, thiserror::Error)]
pub enum FaultError {
    /// No such pod.
    #[error("pod {0}/{1} not found")]
    PodNotFound(String, String),
    /// The pod has no running container of that name.
    #[error("container {0} of pod {1}/{2} is not running")]
    ContainerNotRunning(String, String, String),
    /// The ratio is not a number between 0 and 1.
    #[error("ratio must be between 0 and 1, got {0}")]
    BadRatio(f64),
    /// The status write failed.
    #[error("writing the pod status: {0}")]
    Store(String),
}

/// Injects a fault.
pub fn inject(ctx: &SimContext, fault: Fault) -> Result<(), FaultError> {
    match fault {
        Fault::OomKill {
            namespace,
            pod,
            container,
        } => kill(ctx, &namespace, &pod, &container, 137, "OOMKilled"),
        Fault::Restart {
            namespace,
            pod,
            container,
        } => kill(ctx, &namespace, &pod, &container, 1, "Error"),
        Fault::Throttle {
            namespace,
            pod,
            container,
            ratio,
        } => {
            if !(0.0..=1.0).contains(&ratio) {
                return Err(FaultError::BadRatio(ratio));
            }
            if ctx.store.get(&gvr::PODS, Some(&namespace), &pod).is_none() {
                return Err(FaultError::PodNotFound(namespace, pod));
            }
            let pods = ctx.store.list(&gvr::PODS, None).0;
            let now = ctx.clock.now();
            ctx.state.kubelet.with(|s| {
                s.counters.advance(&pods, now);
                s.counters
                    .set_ratio((namespace, pod, container), ratio, now);
            });
            Ok(())
        }
    }
}

/// Restarts a running container, retrying when a concurrent kubelet write wins the race.
fn kill(
    ctx: &SimContext,
    ns: &str,
    pod: &str,
    container: &str,
    code: i64,
    reason: &str,
) -> Result<(), FaultError> {
    let once = || kill_once(ctx, [ns, pod, container], code, reason);
    let mut last = once();
    for _ in 0..3 {
        match &last {
            Err(FaultError::Store(_)) => last = once(),
            _ => break,
        }
    }
    last
}

/// One attempt of [`kill`] on container `[namespace, pod, container]`.
fn kill_once(
    ctx: &SimContext,
    target: [&str; 3],
    code: i64,
    reason: &str,
) -> Result<(), FaultError> {
    let [ns, pod, container] = target;
    let Some(mut obj) = ctx.store.get(&gvr::PODS, Some(ns), pod) else {
        return Err(FaultError::PodNotFound(ns.into(), pod.into()));
    };
    let uid = crate::controllers::common::uid(&obj).to_string();
    let now = ctx.clock.now();
    let mut found = false;
    for key in ["containerStatuses", "initContainerStatuses"] {
        let list = obj
            .pointer_mut(&format!("/status/{key}"))
            .and_then(Value::as_array_mut);
        for entry in list.into_iter().flatten() {
            let running = entry.pointer("/state/running").is_some();
            if running && entry.get("name").and_then(Value::as_str) == Some(container) {
                restart_entry(entry, &uid, code, reason, now);
                found = true;
            }
        }
    }
    if !found {
        return Err(FaultError::ContainerNotRunning(
            container.into(),
            ns.into(),
            pod.into(),
        ));
    }
    ctx.store
        .update_status(&gvr::PODS, obj, MANAGER)
        .map(|_| ())
        .map_err(|e| FaultError::Store(e.message))
}

/// Starts the plain-HTTP control listener on `addr` and returns the bound address.
pub async fn serve_control(ctx: &SimContext, addr: SocketAddr) -> std::io::Result<SocketAddr> {
    let listener = tokio::net::TcpListener::bind(addr).await?;
    let local = listener.local_addr()?;
    let app = Router::new()
        .route("/sim/faults", post(post_fault))
        .route(
            "/sim/outage",
            post(
                |State(ctx): State<SimContext>, body: axum::body::Bytes| async move {
                    crate::api::outage::post_outage(&ctx.state.outage, &body)
                },
            ),
        )
        .route("/metrics/cadvisor", get(get_cadvisor))
        .route("/healthz", get(|| async { "ok" }))
        .with_state(ctx.clone());
    tokio::spawn(async move {
        if let Err(e) = axum::serve(listener, app).await {
            tracing::warn!(error = %e, "control listener stopped");
        }
    });
    Ok(local)
}

async fn post_fault(State(ctx): State<SimContext>, body: axum::body::Bytes) -> Response {
    let fault: Fault = match serde_json::from_slice(&body) {
        Ok(f) => f,
        Err(e) => return (StatusCode::BAD_REQUEST, format!("bad fault: {e}\n")).into_response(),
    };
    match inject(&ctx, fault) {
        Ok(()) => StatusCode::NO_CONTENT.into_response(),
        Err(e @ (FaultError::PodNotFound(..) | FaultError::ContainerNotRunning(..))) => {
            (StatusCode::NOT_FOUND, format!("{e}\n")).into_response()
        }
        Err(e @ FaultError::BadRatio(_)) => {
            (StatusCode::BAD_REQUEST, format!("{e}\n")).into_response()
        }
        Err(e) => (StatusCode::INTERNAL_SERVER_ERROR, format!("{e}\n")).into_response(),
    }
}

async fn get_cadvisor(
    State(ctx): State<SimContext>,
    Query(q): Query<HashMap<String, String>>,
) -> Response {
    let body = render_cadvisor(&ctx, q.get("node").map(String::as_str));
    ([("content-type", "text/plain; version=0.0.4")], body).into_response()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn faults_parse_from_the_documented_json() {
        let f: Fault = serde_json::from_str(
            r#"{"kind":"Throttle","namespace":"d","pod":"p","container":"c","ratio":0.4}"#,
        )
        .unwrap();
        assert_eq!(
            f,
            Fault::Throttle {
                namespace: "d".into(),
                pod: "p".into(),
                container: "c".into(),
                ratio: 0.4
            }
        );
        let f: Fault =
            serde_json::from_str(r#"{"kind":"OomKill","namespace":"d","pod":"p","container":"c"}"#)
                .unwrap();
        assert!(matches!(f, Fault::OomKill { .. }));
    }
}
