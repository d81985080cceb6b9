//! The hub client (design section 9, `docs/contracts/hub-api.md`): recommendations with
//! ETag, the cluster configuration, event batches and the inventory, with bearer auth,
//! timeouts, retries with backoff and jitter, `Retry-After`, a 16 MiB answer cap, and the
//! hub state the reconciler reads for staleness (design D26).

mod client;
pub mod metrics;
pub mod persist;
pub mod retry;
pub mod scoped;
pub mod state;
pub mod token;

use std::path::PathBuf;
use std::sync::{Mutex, MutexGuard, PoisonError};
use std::time::Duration;

pub use client::{Fetch, HubClient, decode};
pub use metrics::HubMetrics;
pub use state::{HubState, LastGood};

/// Largest hub answer the agent reads (design D28).
pub const MAX_BODY_BYTES: usize = 16 << 20;

/// The hub endpoints, as metric labels.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum HubEndpoint {
    /// `GET /v1/clusters/{cluster}/recommendations`.
    Recommendations,
    /// `GET /v1/clusters/{cluster}/config`.
    Config,
    /// `POST /v1/clusters/{cluster}/events`.
    Events,
    /// `PUT /v1/clusters/{cluster}/inventory`.
    Inventory,
}

impl HubEndpoint {
    /// The endpoint's path segment and metric label.
    pub fn as_str(self) -> &'static str {
        match self {
            HubEndpoint::Recommendations => "recommendations",
            HubEndpoint::Config => "config",
            HubEndpoint::Events => "events",
            HubEndpoint::Inventory => "inventory",
        }
    }
}

/// How the client reaches the hub.
#[derive(Clone, Debug)]
pub struct HubClientConfig {
    /// Base URL of the hub, for example `https://hub.example.com`.
    pub url: String,
    /// The cluster's name in the hub.
    pub cluster: String,
    /// File holding the bearer token (a mounted Secret); `None` sends no token.
    pub token_file: Option<PathBuf>,
    /// TCP connect timeout.
    pub connect_timeout: Duration,
    /// Timeout of one request, answer included.
    pub request_timeout: Duration,
    /// Attempts of one call to the GET and PUT endpoints (at least 1).
    pub attempts: u32,
    /// First backoff ceiling between attempts.
    pub backoff_base: Duration,
    /// Largest backoff ceiling.
    pub backoff_max: Duration,
    /// Longest `Retry-After` waited inside one call; a longer one fails the call, and no
    /// request goes out before it has passed.
    pub max_retry_wait: Duration,
    /// After a 401 or 403, no request goes out for this long (the poll interval) unless
    /// the token file changes.
    pub auth_backoff: Duration,
    /// `hub.staleAfter`: how long after the last good fetch the hub state stays fresh.
    pub stale_after: Duration,
    /// Largest answer body read.
    pub max_body: usize,
    /// `scope.namespaces`: the recommendations for other namespaces are left out as the
    /// list is read ([`scoped`]); empty keeps every one.
    pub scope_namespaces: Vec<String>,
}

impl HubClientConfig {
    /// The defaults for a hub URL and cluster.
    pub fn new(url: impl Into<String>, cluster: impl Into<String>) -> HubClientConfig {
        HubClientConfig {
            url: url.into(),
            cluster: cluster.into(),
            token_file: None,
            connect_timeout: Duration::from_secs(5),
            request_timeout: Duration::from_secs(30),
            attempts: 3,
            backoff_base: Duration::from_millis(500),
            backoff_max: Duration::from_secs(30),
            max_retry_wait: Duration::from_secs(60),
            auth_backoff: Duration::from_secs(60),
            stale_after: Duration::from_secs(30 * 60),
            max_body: MAX_BODY_BYTES,
            scope_namespaces: Vec::new(),
        }
    }
}

/// Errors of the hub client. None of them carries the token.
#[derive(Debug, thiserror::Error)]
pub enum HubClientError {
    /// The HTTP client could not be built.
    #[error("cannot build the hub client: {0}")]
    Build(#[source] reqwest::Error),
    /// The token file could not be read.
    #[error("cannot read the hub token file: {0}")]
    Token(#[source] std::io::Error),
    /// No answer: connection refused, reset or timed out.
    #[error("{endpoint}: no answer from the hub: {source}")]
    Transport {
        /// The endpoint.
        endpoint: &'static str,
        /// The cause.
        #[source]
        source: reqwest::Error,
    },
    /// 401 or 403: the hub refused the token. Requests pause for `retry_in`.
    #[error("{endpoint}: the hub refused the agent's token ({status}); next try in {retry_in:?}")]
    Unauthorized {
        /// The endpoint.
        endpoint: &'static str,
        /// 401 or 403.
        status: u16,
        /// When a request may go out again.
        retry_in: Duration,
    },
    /// 429: too many requests.
    #[error("{endpoint}: rate limited by the hub (retry after {retry_after:?})")]
    RateLimited {
        /// The endpoint.
        endpoint: &'static str,
        /// The hub's `Retry-After`.
        retry_after: Option<Duration>,
    },
    /// 400 `invalid_item`: one event of the batch was refused; nothing was stored.
    #[error("events: item {index:?} ({id:?}) refused by the hub: {message}")]
    InvalidItem {
        /// Index of the item in the batch.
        index: Option<usize>,
        /// Id of the item.
        id: Option<String>,
        /// The hub's message.
        message: String,
    },
    /// 413: the request body is too large for the hub.
    #[error("{endpoint}: request too large for the hub")]
    TooLarge {
        /// The endpoint.
        endpoint: &'static str,
    },
    /// Any other status.
    #[error("{endpoint}: hub answered {status}: {message}")]
    Status {
        /// The endpoint.
        endpoint: &'static str,
        /// The status code.
        status: u16,
        /// The hub's message, or the start of its body.
        message: String,
    },
    /// The answer is over the size limit.
    #[error("{endpoint}: hub answer over {limit} bytes")]
    BodyTooLarge {
        /// The endpoint.
        endpoint: &'static str,
        /// The limit.
        limit: usize,
    },
    /// The answer is not JSON or has the wrong shape.
    #[error("{endpoint}: invalid hub answer: {message}")]
    Decode {
        /// The endpoint.
        endpoint: &'static str,
        /// The path and the problem, for example `recommendations: invalid type`.
        message: String,
    },
}

impl HubClientError {
    /// A short, bounded name for metric labels and logs.
    pub fn category(&self) -> &'static str {
        match self {
            HubClientError::Build(_) => "build",
            HubClientError::Token(_) => "token",
            HubClientError::Transport { .. } => "transport",
            HubClientError::Unauthorized { .. } => "unauthorized",
            HubClientError::RateLimited { .. } => "rate_limited",
            HubClientError::InvalidItem { .. } => "invalid_item",
            HubClientError::TooLarge { .. } => "too_large",
            HubClientError::Status { .. } => "status",
            HubClientError::BodyTooLarge { .. } => "body_too_large",
            HubClientError::Decode { .. } => "decode",
        }
    }

    /// Whether the same request may succeed when sent again soon.
    pub fn is_transient(&self) -> bool {
        match self {
            HubClientError::Transport { .. } | HubClientError::RateLimited { .. } => true,
            HubClientError::Status { status, .. } => *status >= 500 || *status == 408,
            _ => false,
        }
    }

    /// The least time to wait before the next request, when the hub said so.
    pub fn retry_after(&self) -> Option<Duration> {
        match self {
            HubClientError::RateLimited { retry_after, .. } => *retry_after,
            HubClientError::Unauthorized { retry_in, .. } => Some(*retry_in),
            _ => None,
        }
    }
}

/// Locks a mutex, going on with the data of a panicked holder.
pub(crate) fn lock_unpoisoned<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(PoisonError::into_inner)
}
