//! The HTTP side of the hub client: one attempt, retries, answer classification.

use std::sync::Mutex;

use kerf_api::event::Event;
use kerf_api::hub::{
    ClusterConfig, ERROR_CODE_INVALID_ITEM, EventBatch, EventBatchResponse, HubError, Inventory,
    RecommendationList,
};
use reqwest::header::{AUTHORIZATION, CONTENT_TYPE, ETAG, IF_NONE_MATCH, RETRY_AFTER};
use reqwest::{Method, StatusCode};
use serde::de::DeserializeOwned;
use tokio::sync::watch;
use tokio::time::Instant;

use super::retry::{Backoff, parse_retry_after};
use super::state::{HubState, LastGood};
use super::token::TokenSource;
use super::{HubClientConfig, HubClientError, HubEndpoint, HubMetrics, lock_unpoisoned as lock};
use crate::clock::SharedClock;

/// What a fetch did to the hub state.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Fetch {
    /// A new value (200).
    Updated,
    /// Unchanged since the last good fetch (a 304, or the same value again); its fetch
    /// time moved.
    Unchanged,
}

#[derive(Debug, Default)]
struct Gate {
    /// After a 401/403: the status, the token version refused and the end of the pause.
    refused: Option<(u16, u64, Instant)>,
    /// After a 429 with `Retry-After`: no request before this.
    not_before: Option<Instant>,
}

/// One request to the hub: the endpoint, the method, the JSON body and `If-None-Match`.
#[derive(Clone)]
struct Request<'a> {
    endpoint: HubEndpoint,
    method: Method,
    body: Option<Vec<u8>>,
    etag: Option<&'a str>,
}

impl<'a> Request<'a> {
    fn get(endpoint: HubEndpoint, etag: Option<&'a str>) -> Self {
        let (method, body) = (Method::GET, None);
        Request {
            endpoint,
            method,
            body,
            etag,
        }
    }

    fn with_body(endpoint: HubEndpoint, method: Method, body: Vec<u8>) -> Self {
        let (body, etag) = (Some(body), None);
        Request {
            endpoint,
            method,
            body,
            etag,
        }
    }
}

struct Answer {
    status: StatusCode,
    etag: Option<String>,
    body: Vec<u8>,
}

/// The agent's hub client. Cheap to share behind an `Arc`.
pub struct HubClient {
    http: reqwest::Client,
    /// For the recommendations only: a connection of its own for each fetch, closed once
    /// the answer is read. hyper grows an HTTP/1 connection's read buffer up to about
    /// 400 KiB for a large body, and a connection kept for reuse keeps that buffer while
    /// it waits: for a list of a few thousand recommendations, fetched once a
    /// `hub.pollInterval`, that is more than the new connection costs
    /// (docs/benchmarks.md, "The cluster around the scope").
    http_once: reqwest::Client,
    cfg: HubClientConfig,
    base: String,
    token: TokenSource,
    clock: SharedClock,
    metrics: HubMetrics,
    state: watch::Sender<HubState>,
    gate: Mutex<Gate>,
}

impl std::fmt::Debug for HubClient {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("HubClient")
            .field("base", &self.base)
            .finish()
    }
}

impl HubClient {
    /// A client for `cfg`, registering nothing: pass the metrics from
    /// [`HubMetrics::register`].
    pub fn new(
        cfg: HubClientConfig,
        metrics: HubMetrics,
        clock: SharedClock,
    ) -> Result<HubClient, HubClientError> {
        let builder = || {
            reqwest::Client::builder()
                .connect_timeout(cfg.connect_timeout)
                .timeout(cfg.request_timeout)
        };
        let http = builder().build().map_err(HubClientError::Build)?;
        let http_once = builder()
            .pool_max_idle_per_host(0)
            .build()
            .map_err(HubClientError::Build)?;
        let base = format!(
            "{}/v1/clusters/{}/",
            cfg.url.trim_end_matches('/'),
            cfg.cluster
        );
        Ok(HubClient {
            http,
            http_once,
            token: TokenSource::new(cfg.token_file.clone()),
            cfg,
            base,
            clock,
            metrics,
            state: watch::Sender::new(HubState::default()),
            gate: Mutex::new(Gate::default()),
        })
    }

    /// The current hub state.
    pub fn state(&self) -> HubState {
        self.state.borrow().clone()
    }

    /// A receiver that sees every change of the hub state.
    pub fn subscribe(&self) -> watch::Receiver<HubState> {
        self.state.subscribe()
    }

    /// Seeds the last good configuration after a restart (design D26: the ConfigMap
    /// `kerf-hub-state`), keeping its original fetch time.
    pub fn restore_config(&self, config: ClusterConfig, fetched_at: chrono::DateTime<chrono::Utc>) {
        let stale = self.cfg.stale_after;
        self.state.send_modify(|s| {
            LastGood::record(&mut s.last_good_config, config, fetched_at);
            s.refresh(stale);
        });
    }

    /// `GET .../recommendations` with `If-None-Match`. A 304 keeps the last good list and
    /// counts as a successful fetch; an error leaves the state as it was.
    pub async fn fetch_recommendations(&self) -> Result<Fetch, HubClientError> {
        let endpoint = HubEndpoint::Recommendations;
        let etag = {
            let s = self.state.borrow();
            s.last_good_recommendations.as_ref().and(s.etag.clone())
        };
        let answer = self.call(Request::get(endpoint, etag.as_deref())).await?;
        let now = self.clock.now();
        let stale = self.cfg.stale_after;
        if answer.status == StatusCode::NOT_MODIFIED {
            let mut touched = false;
            self.state.send_if_modified(|s| {
                s.apply_fetch(now, stale, |s| {
                    if let Some(good) = s.last_good_recommendations.as_mut() {
                        good.fetched_at = now;
                        touched = true;
                    }
                    false
                })
            });
            return if touched {
                Ok(Fetch::Unchanged)
            } else {
                Err(status_error(endpoint, &answer))
            };
        }
        let (mut list, outside) = if self.cfg.scope_namespaces.is_empty() {
            let list: RecommendationList = decode(endpoint, &answer.body)?;
            (list, super::scoped::OutsideScopeList::default())
        } else {
            let scoped = super::scoped::decode(&answer.body, &self.cfg.scope_namespaces).map_err(
                |message| HubClientError::Decode {
                    endpoint: endpoint.as_str(),
                    message,
                },
            )?;
            (scoped.list, scoped.outside)
        };
        // Kept until the hub's next answer: without the room the decoding grew into (a JSON
        // array's length is not known before its end, so each `Vec` doubled as it went; a
        // recommendation's one container kept room for four).
        list.recommendations.shrink_to_fit();
        for r in &mut list.recommendations {
            r.containers.shrink_to_fit();
        }
        let mut same = false;
        self.state.send_if_modified(|s| {
            s.apply_fetch(now, stale, |s| {
                let same_outside = s.outside_scope.holds_same(&outside);
                same =
                    LastGood::record(&mut s.last_good_recommendations, list, now) && same_outside;
                // The same list again is not handed over again: what it holds was reported.
                if !same_outside {
                    s.outside_scope =
                        std::sync::Arc::new(super::scoped::OutsideScopeHandoff::new(outside));
                }
                s.etag = answer.etag;
                !same
            })
        });
        Ok(if same {
            Fetch::Unchanged
        } else {
            Fetch::Updated
        })
    }

    /// `GET .../config`. An error leaves the state as it was; the same configuration
    /// again only moves its fetch time.
    pub async fn fetch_config(&self) -> Result<Fetch, HubClientError> {
        let endpoint = HubEndpoint::Config;
        let answer = self.call(Request::get(endpoint, None)).await?;
        let config: ClusterConfig = decode(endpoint, &answer.body)?;
        let now = self.clock.now();
        let stale = self.cfg.stale_after;
        let mut same = false;
        self.state.send_if_modified(|s| {
            s.apply_fetch(now, stale, |s| {
                same = LastGood::record(&mut s.last_good_config, config, now);
                !same
            })
        });
        Ok(if same {
            Fetch::Unchanged
        } else {
            Fetch::Updated
        })
    }

    /// `PUT .../inventory`, with retries.
    pub async fn put_inventory(&self, inventory: &Inventory) -> Result<(), HubClientError> {
        let endpoint = HubEndpoint::Inventory;
        let body = encode(endpoint, inventory)?;
        self.call(Request::with_body(endpoint, Method::PUT, body))
            .await?;
        Ok(())
    }

    /// `POST .../events`: one attempt with one batch. The outbox retries.
    pub async fn post_events(
        &self,
        events: &[Event],
    ) -> Result<EventBatchResponse, HubClientError> {
        let endpoint = HubEndpoint::Events;
        let body = encode(
            endpoint,
            &EventBatch {
                events: events.to_vec(),
            },
        )?;
        let answer = self
            .attempt(Request::with_body(endpoint, Method::POST, body))
            .await?;
        decode(endpoint, &answer.body)
    }

    /// One request with retries of transient failures, honouring `Retry-After`.
    async fn call(&self, request: Request<'_>) -> Result<Answer, HubClientError> {
        let endpoint = request.endpoint;
        let mut backoff = Backoff::new(self.cfg.backoff_base, self.cfg.backoff_max);
        loop {
            let result = self.attempt(request.clone()).await;
            match result {
                Err(e) if e.is_transient() && backoff.attempts() + 1 < self.cfg.attempts => {
                    let wait = backoff
                        .next_delay()
                        .max(e.retry_after().unwrap_or_default());
                    if wait > self.cfg.max_retry_wait {
                        return Err(e);
                    }
                    tracing::debug!(endpoint = endpoint.as_str(), error = %e, ?wait, "hub request failed; retrying");
                    tokio::time::sleep(wait).await;
                }
                other => return other,
            }
        }
    }

    /// The pause in force, if any: after a refused token (unless the token file changed)
    /// or before a `Retry-After` has passed.
    fn gated(&self, endpoint: HubEndpoint, version: u64) -> Result<(), HubClientError> {
        let now = Instant::now();
        let gate = lock(&self.gate);
        if let Some((status, refused, until)) = gate.refused
            && refused == version
            && now < until
        {
            return Err(HubClientError::Unauthorized {
                endpoint: endpoint.as_str(),
                status,
                retry_in: until - now,
            });
        }
        match gate.not_before {
            Some(t) if now < t => Err(HubClientError::RateLimited {
                endpoint: endpoint.as_str(),
                retry_after: Some(t - now),
            }),
            _ => Ok(()),
        }
    }

    async fn attempt(&self, request: Request<'_>) -> Result<Answer, HubClientError> {
        let Request {
            endpoint,
            method,
            body,
            etag,
        } = request;
        let (token, version) = self.token.current(false).map_err(HubClientError::Token)?;
        self.gated(endpoint, version)?;
        let http = match endpoint {
            HubEndpoint::Recommendations => &self.http_once,
            _ => &self.http,
        };
        let mut req = http.request(method, format!("{}{}", self.base, endpoint.as_str()));
        if let Some(t) = &token {
            req = req.header(AUTHORIZATION, format!("Bearer {}", t.expose()));
        }
        if let Some(tag) = etag {
            req = req.header(IF_NONE_MATCH, tag);
        }
        if let Some(b) = body {
            req = req.header(CONTENT_TYPE, "application/json").body(b);
        }
        let label = endpoint.as_str();
        let resp = req.send().await.map_err(|source| {
            self.metrics.request(label, "error");
            HubClientError::Transport {
                endpoint: label,
                source,
            }
        })?;
        let status = resp.status();
        self.metrics.request(label, status.as_str());
        let retry_after =
            header(&resp, RETRY_AFTER).and_then(|v| parse_retry_after(&v, self.clock.now()));
        let etag = header(&resp, ETAG);
        let body = read_capped(endpoint, resp, self.cfg.max_body).await?;
        let answer = Answer { status, etag, body };
        self.classify(endpoint, version, retry_after, answer)
    }

    fn classify(
        &self,
        endpoint: HubEndpoint,
        version: u64,
        retry_after: Option<std::time::Duration>,
        answer: Answer,
    ) -> Result<Answer, HubClientError> {
        let label = endpoint.as_str();
        let status = answer.status;
        if status.is_success() || status == StatusCode::NOT_MODIFIED {
            self.accepted();
            let ts = self.clock.now().timestamp_millis() as f64 / 1000.0;
            self.metrics.success(label, ts);
            return Ok(answer);
        }
        match status {
            StatusCode::UNAUTHORIZED | StatusCode::FORBIDDEN => {
                Err(self.refused(endpoint, status.as_u16(), version))
            }
            StatusCode::TOO_MANY_REQUESTS => {
                if let Some(ra) = retry_after {
                    lock(&self.gate).not_before = Some(Instant::now() + ra);
                }
                Err(HubClientError::RateLimited {
                    endpoint: label,
                    retry_after,
                })
            }
            StatusCode::PAYLOAD_TOO_LARGE => Err(HubClientError::TooLarge { endpoint: label }),
            StatusCode::BAD_REQUEST => match serde_json::from_slice::<HubError>(&answer.body) {
                Ok(e) if e.code == ERROR_CODE_INVALID_ITEM => Err(HubClientError::InvalidItem {
                    index: e.index,
                    id: e.id,
                    message: e.message,
                }),
                _ => Err(status_error(endpoint, &answer)),
            },
            _ => Err(status_error(endpoint, &answer)),
        }
    }

    /// The hub accepted the token: ends a refusal, logging the change once.
    fn accepted(&self) {
        let mut gate = lock(&self.gate);
        if gate.refused.take().is_some() {
            self.metrics.auth_failed.set(0);
            tracing::info!("the hub accepts the agent's token again");
        }
    }

    /// The hub refused the token: pauses requests for the poll interval unless the token
    /// file has changed since, logging only a change of state.
    fn refused(&self, endpoint: HubEndpoint, status: u16, version: u64) -> HubClientError {
        let now_version = self.token.current(true).map(|(_, v)| v).unwrap_or(version);
        let pause = self.cfg.auth_backoff;
        let mut gate = lock(&self.gate);
        let changed = gate.refused.is_none_or(|(s, _, _)| s != status);
        self.metrics.auth_failed.set(1);
        if changed {
            tracing::warn!(
                endpoint = endpoint.as_str(),
                status,
                "the hub refused the agent's token; requests pause until the token file changes or {pause:?} pass"
            );
        }
        let until = if now_version == version {
            Instant::now() + pause
        } else {
            Instant::now()
        };
        gate.refused = Some((status, version, until));
        HubClientError::Unauthorized {
            endpoint: endpoint.as_str(),
            status,
            retry_in: until.saturating_duration_since(Instant::now()),
        }
    }
}

fn header(resp: &reqwest::Response, name: reqwest::header::HeaderName) -> Option<String> {
    resp.headers()
        .get(name)
        .and_then(|v| v.to_str().ok())
        .map(str::to_owned)
}

/// Reads the answer body, failing as soon as it passes `limit` bytes.
async fn read_capped(
    endpoint: HubEndpoint,
    mut resp: reqwest::Response,
    limit: usize,
) -> Result<Vec<u8>, HubClientError> {
    let too_large = HubClientError::BodyTooLarge {
        endpoint: endpoint.as_str(),
        limit,
    };
    let length = resp.content_length();
    if length.is_some_and(|n| n > limit as u64) {
        return Err(too_large);
    }
    // Room for the length announced, at once: grown by doubling, a body of 3 MB (10,000
    // recommendations) had the agent hold 2 and 4 MB at the last copy, and the peak stayed
    // in the allocator's metadata (docs/benchmarks.md, "Packed records").
    let mut body = Vec::with_capacity(length.and_then(|n| usize::try_from(n).ok()).unwrap_or(0));
    loop {
        let chunk = resp
            .chunk()
            .await
            .map_err(|source| HubClientError::Transport {
                endpoint: endpoint.as_str(),
                source,
            })?;
        let Some(chunk) = chunk else {
            return Ok(body);
        };
        if body.len() + chunk.len() > limit {
            return Err(too_large);
        }
        body.extend_from_slice(&chunk);
    }
}

fn status_error(endpoint: HubEndpoint, answer: &Answer) -> HubClientError {
    let message = match serde_json::from_slice::<HubError>(&answer.body) {
        Ok(e) => format!("{}: {}", e.code, e.message),
        Err(_) => String::from_utf8_lossy(&answer.body[..answer.body.len().min(200)]).into_owned(),
    };
    HubClientError::Status {
        endpoint: endpoint.as_str(),
        status: answer.status.as_u16(),
        message,
    }
}

/// Decodes a hub answer's body (a recommendation list, a configuration, an events answer
/// or an error); the error names the path of the bad field.
pub fn decode<T: DeserializeOwned>(
    endpoint: HubEndpoint,
    body: &[u8],
) -> Result<T, HubClientError> {
    let mut de = serde_json::Deserializer::from_slice(body);
    serde_path_to_error::deserialize(&mut de).map_err(|e| HubClientError::Decode {
        endpoint: endpoint.as_str(),
        message: format!("{}: {}", e.path(), e.inner()),
    })
}

fn encode<T: serde::Serialize>(endpoint: HubEndpoint, v: &T) -> Result<Vec<u8>, HubClientError> {
    serde_json::to_vec(v).map_err(|e| HubClientError::Decode {
        endpoint: endpoint.as_str(),
        message: format!("cannot encode the request: {e}"),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use hyper::body::{Bytes, Frame, SizeHint};
    use std::convert::Infallible;
    use std::pin::Pin;
    use std::task::{Context, Poll};

    /// A body that comes in chunks, as a hub's answer over the network does.
    struct Chunks(std::collections::VecDeque<Bytes>);

    impl hyper::body::Body for Chunks {
        type Data = Bytes;
        type Error = Infallible;

        fn poll_frame(
            self: Pin<&mut Self>,
            _: &mut Context<'_>,
        ) -> Poll<Option<Result<Frame<Bytes>, Infallible>>> {
            Poll::Ready(self.get_mut().0.pop_front().map(|c| Ok(Frame::data(c))))
        }

        fn size_hint(&self) -> SizeHint {
            SizeHint::with_exact(self.0.iter().map(|c| c.len() as u64).sum())
        }
    }

    /// An answer of `text` in chunks of 64 KiB, its length announced.
    fn answer(text: &[u8]) -> reqwest::Response {
        let chunks = text.chunks(64 * 1024).map(Bytes::copy_from_slice).collect();
        let answer = http::Response::builder()
            .header(reqwest::header::CONTENT_LENGTH, text.len())
            .body(reqwest::Body::wrap(Chunks(chunks)))
            .expect("a response");
        reqwest::Response::from(answer)
    }

    /// A body whose length is announced is read into room for exactly that length: no
    /// copy at twice its size on the way.
    #[tokio::test]
    async fn a_body_of_announced_length_is_read_into_room_for_that_length() {
        let text = vec![b'x'; 3_000_001];
        let resp = answer(&text);
        assert_eq!(resp.content_length(), Some(3_000_001));
        let body = read_capped(HubEndpoint::Recommendations, resp, 4_000_000)
            .await
            .expect("read");
        assert_eq!(body, text);
        assert_eq!(body.capacity(), body.len());
        // Over the limit, announced: refused before a byte is read.
        let e = read_capped(HubEndpoint::Recommendations, answer(&text), 1_000)
            .await
            .expect_err("too large");
        assert!(matches!(e, HubClientError::BodyTooLarge { .. }), "{e}");
    }
}
