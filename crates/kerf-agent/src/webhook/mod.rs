//! The admission webhooks: the mutating pod webhook (design section 8, D20) and the
//! validating policy webhook ([`policy`]).
//!
//! On a pod CREATE whose workload has live values (an applied in-place change), it
//! answers with a JSON patch that sets those values on every container still at the
//! template's values at the change (`base`); otherwise it allows the pod unchanged. It
//! never denies and never calls the Kubernetes API while answering: it reads a
//! [`SharedIndex`] the caches keep up to date.
//!
//! - [`index`]: the in-memory index (live values, ReplicaSet -> Deployment);
//! - [`review`]: the pure decision, AdmissionReview in, AdmissionReview out;
//! - [`tls`]: the HTTPS server and its certificate, reloaded when the files change;
//! - [`feed`]: keeps the index in step with the caches; [`spawn`] starts it all;
//! - [`policy`]: refuses a RightsizingPolicy the agent would mark `Valid=False`;
//! - [`router`]: `POST /mutate` and `POST /validate-policy` with request metrics.

pub mod feed;
pub mod index;
pub mod policy;
pub mod review;
pub mod tls;

use std::time::Instant;

use axum::Router;
use axum::body::Bytes;
use axum::extract::{DefaultBodyLimit, State};
use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::post;
use prometheus_client::metrics::histogram::exponential_buckets;
use prometheus_client::registry::Registry;

pub use feed::spawn;
pub use index::{LiveIndex, SharedIndex, WorkloadLive};
pub use policy::{VALIDATE_POLICY_PATH, answer_policy};
pub use review::{Answer, Outcome, SlimPod, answer, encode};
pub use tls::{ReloadingCert, serve};

use crate::metrics::{ResultLabel, WebhookMetrics};

/// The path the API server posts AdmissionReviews to.
pub const MUTATE_PATH: &str = "/mutate";

/// Largest request body read (the API server caps objects well below this).
const BODY_LIMIT: usize = 8 << 20;

/// Why the webhook could not use an input, or could not start.
#[derive(Debug, thiserror::Error)]
pub enum WebhookError {
    /// An rsr without namespace or name cannot be indexed.
    #[error("the rsr has no namespace or name")]
    UnnamedRsr,
    /// An rsr's live values do not parse; its workload gets no live values.
    #[error("live values of container {container:?}: {source}")]
    InvalidLiveValues {
        /// Container name.
        container: String,
        /// The quantity error.
        #[source]
        source: kerf_decide::quantity::QuantityError,
    },
    /// The body is not an AdmissionReview.
    #[error("cannot read the AdmissionReview at {path}: {message}")]
    Decode {
        /// Where decoding failed (`request.object.spec.containers[0]...`).
        path: String,
        /// What was wrong there.
        message: String,
    },
    /// The AdmissionReview has no request.
    #[error("the AdmissionReview has no request")]
    NoRequest,
    /// The request has an empty uid.
    #[error("the AdmissionReview request has no uid")]
    NoUid,
    /// apiVersion or kind is not admission.k8s.io/v1 AdmissionReview.
    #[error("expected admission.k8s.io/v1/AdmissionReview, got {0}")]
    WrongType(String),
    /// A pod CREATE without the pod.
    #[error("the request has no object")]
    NoObject,
    /// A container of the incoming pod has a quantity that does not parse.
    #[error("container {container:?} {field}.{resource}: {source}")]
    PodQuantity {
        /// Container name.
        container: String,
        /// `requests` or `limits`.
        field: &'static str,
        /// CPU or memory.
        resource: kerf_api::Resource,
        /// The quantity error.
        #[source]
        source: kerf_decide::quantity::QuantityError,
    },
    /// The patch could not be encoded.
    #[error("encoding the patch: {0}")]
    Patch(#[source] kube::core::admission::SerializePatchError),
    /// A value of the patch could not be encoded.
    #[error("encoding the patch: {0}")]
    Encode(#[source] serde_json::Error),
    /// A certificate or key file cannot be read.
    #[error("reading {path}: {source}")]
    Io {
        /// The file.
        path: String,
        /// The I/O error.
        #[source]
        source: std::io::Error,
    },
    /// The certificate and key do not make a usable pair.
    #[error("certificate {cert} and key {key}: {message}")]
    Certificate {
        /// Certificate file.
        cert: String,
        /// Key file.
        key: String,
        /// What is wrong.
        message: String,
    },
    /// The TLS configuration cannot be built.
    #[error("TLS configuration: {0}")]
    Tls(#[source] rustls::Error),
}

impl WebhookError {
    /// A short label for metrics and logs.
    pub fn category(&self) -> &'static str {
        match self {
            WebhookError::UnnamedRsr | WebhookError::InvalidLiveValues { .. } => "InvalidRsr",
            WebhookError::Decode { .. }
            | WebhookError::NoRequest
            | WebhookError::NoUid
            | WebhookError::WrongType(_)
            | WebhookError::NoObject => "InvalidReview",
            WebhookError::PodQuantity { .. } => "InvalidQuantity",
            WebhookError::Patch(_) | WebhookError::Encode(_) => "EncodeError",
            WebhookError::Io { .. } | WebhookError::Certificate { .. } | WebhookError::Tls(_) => {
                "TlsError"
            }
        }
    }
}

/// Declares the webhook metrics in `registry` (a sub-registry, typically under the
/// prefix `kerf_agent_webhook`): `requests_total{result}` and
/// `request_duration_seconds`, with buckets from 10µs.
pub fn register_metrics(registry: &mut Registry) -> WebhookMetrics {
    WebhookMetrics::register_with(registry, exponential_buckets(0.000_01, 2.0, 18))
}

/// What the handler shares.
#[derive(Clone, Debug)]
struct WebhookState {
    index: SharedIndex,
    metrics: WebhookMetrics,
}

/// The webhook's routes: `POST /mutate` (pods) and `POST /validate-policy` (policies).
pub fn router(index: SharedIndex, metrics: WebhookMetrics) -> Router {
    Router::new()
        .route(MUTATE_PATH, post(mutate))
        .route(VALIDATE_POLICY_PATH, post(validate_policy))
        .layer(DefaultBodyLimit::max(BODY_LIMIT))
        .with_state(WebhookState { index, metrics })
}

async fn mutate(State(state): State<WebhookState>, body: Bytes) -> Response {
    let start = Instant::now();
    let answer = review::answer(&state.index.read(), &body);
    counted(&state, start, answer)
}

async fn validate_policy(State(state): State<WebhookState>, body: Bytes) -> Response {
    let start = Instant::now();
    counted(&state, start, policy::answer_policy(&body))
}

/// The HTTP response of `answer`, counted by result and timed from `start`.
fn counted(state: &WebhookState, start: Instant, answer: Answer) -> Response {
    let (response, outcome) = respond(answer);
    let label = ResultLabel {
        result: outcome.as_str().to_owned(),
    };
    state.metrics.requests.get_or_create(&label).inc();
    state
        .metrics
        .duration
        .observe(start.elapsed().as_secs_f64());
    response
}

fn respond(answer: Answer) -> (Response, Outcome) {
    match answer {
        Answer::Review(review, outcome) => match review::encode(&review) {
            Ok(json) => {
                let headers = [(header::CONTENT_TYPE, "application/json")];
                ((headers, json).into_response(), outcome)
            }
            Err(e) => {
                let message = WebhookError::Encode(e).to_string();
                tracing::warn!(%message, "admission answer not encoded");
                let response = (StatusCode::INTERNAL_SERVER_ERROR, message).into_response();
                (response, Outcome::Error)
            }
        },
        Answer::BadRequest(message) => {
            tracing::debug!(%message, "admission request rejected");
            (
                (StatusCode::BAD_REQUEST, message).into_response(),
                Outcome::Error,
            )
        }
    }
}
