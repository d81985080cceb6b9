//! The dev hub's HTTP routes: the agent's side of the hub API
//! (`docs/contracts/hub-api.yaml`), with bearer auth, strict event validation and faults.

use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::Instant;

use axum::Router;
use axum::body::Body;
use axum::extract::{Path, State};
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post, put};
use kerf_api::hub::{
    ERROR_CODE_FORBIDDEN, ERROR_CODE_INVALID_BODY, ERROR_CODE_RATE_LIMITED, ERROR_CODE_TOO_LARGE,
    ERROR_CODE_UNAUTHORIZED, HubError, Inventory, validate_batch_json,
};
use serde::Serialize;

use super::fault::{self, Endpoint, Fault, FaultRule, RequestRecord};
use super::state::{HubData, etag};
use crate::clock::Clock;

/// State shared by the routes and the [`super::DevHub`] handle.
pub(crate) struct Shared {
    pub data: Mutex<HubData>,
    pub faults: Mutex<Vec<FaultRule>>,
    pub token: Mutex<Option<String>>,
    pub rejected: Mutex<std::collections::HashSet<uuid::Uuid>>,
    pub log: Mutex<Vec<RequestRecord>>,
    pub clock: Clock,
    pub body_limit: usize,
}

/// Locks a mutex, going on with the data of a panicked holder.
pub(crate) fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

/// The router of the four endpoints.
pub(crate) fn router(shared: Arc<Shared>) -> Router {
    Router::new()
        .route(
            "/v1/clusters/{cluster}/recommendations",
            get(recommendations),
        )
        .route("/v1/clusters/{cluster}/config", get(config))
        .route("/v1/clusters/{cluster}/events", post(events))
        .route("/v1/clusters/{cluster}/inventory", put(inventory))
        .with_state(shared)
}

fn error(status: StatusCode, e: HubError) -> Response {
    (status, axum::Json(e)).into_response()
}

fn json<T: Serialize>(status: StatusCode, body: &T) -> Response {
    (status, axum::Json(body)).into_response()
}

/// Applies the slow and error faults and the bearer check. `Err` is the answer to give.
async fn gate(
    s: &Shared,
    endpoint: Endpoint,
    headers: &HeaderMap,
) -> Result<Option<Fault>, Box<Response>> {
    let fault = fault::take(&mut lock(&s.faults), endpoint);
    if let Some(Fault::Slow(d)) = &fault {
        tokio::time::sleep(*d).await;
    }
    match &fault {
        Some(Fault::Unavailable) => {
            return Err(Box::new(error(
                StatusCode::SERVICE_UNAVAILABLE,
                HubError::new("unavailable", "the hub is unavailable"),
            )));
        }
        Some(Fault::ServerError) => {
            return Err(Box::new(error(
                StatusCode::INTERNAL_SERVER_ERROR,
                HubError::new("internal", "internal error"),
            )));
        }
        Some(Fault::RateLimited { retry_after }) => {
            let mut r = error(
                StatusCode::TOO_MANY_REQUESTS,
                HubError::new(ERROR_CODE_RATE_LIMITED, "too many requests"),
            );
            if let Ok(v) = HeaderValue::from_str(retry_after) {
                r.headers_mut().insert(header::RETRY_AFTER, v);
            }
            return Err(Box::new(r));
        }
        Some(Fault::Forbidden) => {
            return Err(Box::new(error(
                StatusCode::FORBIDDEN,
                HubError::new(
                    ERROR_CODE_FORBIDDEN,
                    "the token may not act on this cluster",
                ),
            )));
        }
        _ => {}
    }
    check_token(s, headers).map_err(Box::new)?;
    Ok(fault)
}

#[allow(clippy::result_large_err)]
fn check_token(s: &Shared, headers: &HeaderMap) -> Result<(), Response> {
    let Some(expected) = lock(&s.token).clone() else {
        return Ok(());
    };
    let given = headers
        .get(header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.strip_prefix("Bearer "));
    if given == Some(expected.as_str()) {
        Ok(())
    } else {
        Err(error(
            StatusCode::UNAUTHORIZED,
            HubError::new(ERROR_CODE_UNAUTHORIZED, "missing or invalid bearer token"),
        ))
    }
}

/// The body a malformed-answer fault gives instead of the real one.
fn malformed(fault: &Fault, endpoint: Endpoint) -> Option<Response> {
    let body = match fault {
        Fault::BadJson => "{\"recommendations\": [ this is not json".to_owned(),
        Fault::WrongTypes => match endpoint {
            Endpoint::Recommendations => {
                r#"{"recommendations":"none","generatedAt":42}"#.to_owned()
            }
            Endpoint::Config => r#"{"flags":{"paused":"yes"},"approvals":{}}"#.to_owned(),
            Endpoint::Events | Endpoint::Inventory => r#"{"accepted":"all"}"#.to_owned(),
        },
        Fault::HugeBody(n) => {
            let pad = "x".repeat(*n);
            format!(
                r#"{{"recommendations":[],"generatedAt":"2026-01-01T00:00:00Z","pad":"{pad}"}}"#
            )
        }
        _ => return None,
    };
    Some(
        (
            StatusCode::OK,
            [(header::CONTENT_TYPE, "application/json")],
            body,
        )
            .into_response(),
    )
}

fn record(s: &Shared, endpoint: Endpoint, cluster: &str, at: Instant, r: &Response) {
    lock(&s.log).push(RequestRecord {
        endpoint,
        cluster: cluster.to_owned(),
        status: r.status().as_u16(),
        at,
    });
}

/// Runs the gate, the handler and the malformed faults, and records the answer.
async fn answer(
    s: &Shared,
    endpoint: Endpoint,
    cluster: &str,
    headers: &HeaderMap,
    handler: impl Future<Output = Response>,
) -> Response {
    let at = Instant::now();
    let r = match gate(s, endpoint, headers).await {
        Err(r) => *r,
        Ok(fault) => {
            let r = handler.await;
            match fault.as_ref().and_then(|f| malformed(f, endpoint)) {
                Some(bad) if r.status().is_success() => bad,
                _ => r,
            }
        }
    };
    record(s, endpoint, cluster, at, &r);
    r
}

/// [`answer`] for a request with a JSON body (`req`: endpoint, cluster and headers):
/// `handler` gets the body once it is read.
async fn answer_json(
    s: &Shared,
    req: (Endpoint, &str, &HeaderMap),
    body: Body,
    handler: impl FnOnce(serde_json::Value) -> Response,
) -> Response {
    let (endpoint, cluster, headers) = req;
    answer(s, endpoint, cluster, headers, async {
        match read_json(s, body).await {
            Ok(value) => handler(value),
            Err(r) => r,
        }
    })
    .await
}

async fn recommendations(
    State(s): State<Arc<Shared>>,
    Path(cluster): Path<String>,
    headers: HeaderMap,
) -> Response {
    let now = s.clock.now();
    answer(&s, Endpoint::Recommendations, &cluster, &headers, async {
        let list = lock(&s.data).cluster(&cluster, now).list();
        let tag = etag(&list);
        let matches = headers
            .get(header::IF_NONE_MATCH)
            .and_then(|v| v.to_str().ok())
            .is_some_and(|v| v.split(',').any(|t| t.trim() == tag));
        let mut r = if matches {
            StatusCode::NOT_MODIFIED.into_response()
        } else {
            json(StatusCode::OK, &list)
        };
        if let Ok(v) = HeaderValue::from_str(&tag) {
            r.headers_mut().insert(header::ETAG, v);
        }
        r
    })
    .await
}

async fn config(
    State(s): State<Arc<Shared>>,
    Path(cluster): Path<String>,
    headers: HeaderMap,
) -> Response {
    let now = s.clock.now();
    answer(&s, Endpoint::Config, &cluster, &headers, async {
        let config = lock(&s.data).cluster(&cluster, now).config.clone();
        json(StatusCode::OK, &config)
    })
    .await
}

/// Reads a JSON body up to the limit: 413 `too_large` above it, 400 `invalid_body` when it
/// is not JSON.
#[allow(clippy::result_large_err)]
async fn read_json(s: &Shared, body: Body) -> Result<serde_json::Value, Response> {
    let bytes = axum::body::to_bytes(body, s.body_limit)
        .await
        .map_err(|_| {
            error(
                StatusCode::PAYLOAD_TOO_LARGE,
                HubError::new(
                    ERROR_CODE_TOO_LARGE,
                    format!("body over {} bytes", s.body_limit),
                ),
            )
        })?;
    serde_json::from_slice(&bytes).map_err(|e| {
        error(
            StatusCode::BAD_REQUEST,
            HubError::new(ERROR_CODE_INVALID_BODY, format!("not JSON: {e}")),
        )
    })
}

async fn events(
    State(s): State<Arc<Shared>>,
    Path(cluster): Path<String>,
    headers: HeaderMap,
    body: Body,
) -> Response {
    let now = s.clock.now();
    let req = (Endpoint::Events, cluster.as_str(), &headers);
    answer_json(&s, req, body, |value| {
        // Nothing of a batch with an invalid item is stored (design D28).
        match validate_batch_json(&value) {
            Err(e) => error(StatusCode::BAD_REQUEST, e),
            Ok(batch) => {
                if let Some(e) = refused(&s, &batch) {
                    return error(StatusCode::BAD_REQUEST, e);
                }
                let stored = lock(&s.data).cluster(&cluster, now).store(batch);
                json(StatusCode::OK, &stored)
            }
        }
    })
    .await
}

/// An item the test handle marked as refused, as the hub's validation would name it.
fn refused(s: &Shared, batch: &kerf_api::hub::EventBatch) -> Option<HubError> {
    let rejected = lock(&s.rejected);
    let (index, e) = batch
        .events
        .iter()
        .enumerate()
        .find(|(_, e)| rejected.contains(&e.id))?;
    Some(HubError {
        code: kerf_api::hub::ERROR_CODE_INVALID_ITEM.to_owned(),
        message: "refused by the hub".to_owned(),
        index: Some(index),
        id: Some(e.id.to_string()),
    })
}

async fn inventory(
    State(s): State<Arc<Shared>>,
    Path(cluster): Path<String>,
    headers: HeaderMap,
    body: Body,
) -> Response {
    let now = s.clock.now();
    let req = (Endpoint::Inventory, cluster.as_str(), &headers);
    answer_json(&s, req, body, |value| {
        match serde_json::from_value::<Inventory>(value) {
            Err(e) => error(
                StatusCode::BAD_REQUEST,
                HubError::new(ERROR_CODE_INVALID_BODY, format!("not an inventory: {e}")),
            ),
            Ok(inv) => {
                lock(&s.data).cluster(&cluster, now).inventory = Some(inv);
                StatusCode::NO_CONTENT.into_response()
            }
        }
    })
    .await
}
