//! Fault switches of the dev hub, for the agent's negative tests.

use std::time::{Duration, Instant};

/// One endpoint of the hub API.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Endpoint {
    /// `GET /v1/clusters/{cluster}/recommendations`.
    Recommendations,
    /// `GET /v1/clusters/{cluster}/config`.
    Config,
    /// `POST /v1/clusters/{cluster}/events`.
    Events,
    /// `PUT /v1/clusters/{cluster}/inventory`.
    Inventory,
}

impl Endpoint {
    /// The endpoint's last path segment.
    pub fn as_str(self) -> &'static str {
        match self {
            Endpoint::Recommendations => "recommendations",
            Endpoint::Config => "config",
            Endpoint::Events => "events",
            Endpoint::Inventory => "inventory",
        }
    }
}

/// A fault the dev hub injects into its answers. Connections refused (the hub is down) is
/// not a fault of an answer: see `DevHub::set_down`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Fault {
    /// Answer normally, after a delay.
    Slow(Duration),
    /// 503 Service Unavailable.
    Unavailable,
    /// 500 Internal Server Error.
    ServerError,
    /// 429 Too Many Requests with this `Retry-After` value (seconds or an HTTP date).
    RateLimited {
        /// The `Retry-After` header value.
        retry_after: String,
    },
    /// 403 Forbidden with the `forbidden` error shape.
    Forbidden,
    /// 200 with a body that is not JSON.
    BadJson,
    /// 200 with JSON of the wrong shape (wrong types).
    WrongTypes,
    /// 200 with a valid JSON body of about this many bytes.
    HugeBody(usize),
}

/// A fault and where and how often it applies.
#[derive(Clone, Debug)]
pub(crate) struct FaultRule {
    pub endpoint: Option<Endpoint>,
    pub fault: Fault,
    /// Answers left to fault; `None` for every answer until cleared.
    pub remaining: Option<u32>,
}

/// Takes the fault for a request to `endpoint`: the first matching rule, used up once.
pub(crate) fn take(rules: &mut Vec<FaultRule>, endpoint: Endpoint) -> Option<Fault> {
    let pos = rules
        .iter()
        .position(|r| r.endpoint.is_none_or(|e| e == endpoint))?;
    let rule = &mut rules[pos];
    let fault = rule.fault.clone();
    if let Some(left) = rule.remaining.as_mut() {
        *left = left.saturating_sub(1);
        if *left == 0 {
            rules.remove(pos);
        }
    }
    Some(fault)
}

/// One request the dev hub answered, for tests that check timing and counts.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RequestRecord {
    /// The endpoint.
    pub endpoint: Endpoint,
    /// The cluster of the path.
    pub cluster: String,
    /// The status answered.
    pub status: u16,
    /// When the request arrived (real time).
    pub at: Instant,
}
