//! The HTTP API server of the simulated cluster: request parsing, routing to the verbs and
//! rendering of answers and errors as the real kube-apiserver renders them.

pub mod audit;
pub mod crd_formats;
pub mod crd_prune;
pub mod crd_schema;
pub mod crd_view;
pub mod discovery;
pub mod eviction;
pub mod kubeconfig;
pub mod list;
pub mod openapi;
pub mod outage;
pub mod patch;
pub mod protobuf;
pub mod resize;
pub mod routes;
pub mod selectors;
pub mod server;
pub mod ssa;
pub mod table;
pub mod target;
pub mod tls;
pub mod validation;
pub mod warnings;
pub mod watch;
pub mod watch_delay;

/// Defaulting lives below the store (every write is defaulted); named here too, where the
/// API server's callers look for it.
pub use crate::store::defaults;

use std::collections::HashMap;

use axum::body::Body;
use http::{HeaderMap, Method, Response, StatusCode};
use serde_json::Value;

use crate::store::ApiError;

/// A parsed request.
#[derive(Debug, Clone)]
pub struct Req {
    /// HTTP method.
    pub method: Method,
    /// Path without the query.
    pub path: String,
    /// Decoded query parameters.
    pub query: HashMap<String, String>,
    /// Request headers.
    pub headers: HeaderMap,
    /// The body.
    pub body: Vec<u8>,
}

impl Req {
    /// A query parameter.
    pub fn q(&self, k: &str) -> Option<&str> {
        self.query.get(k).map(String::as_str)
    }

    /// A true-ish query flag (`true`, `1`).
    pub fn flag(&self, k: &str) -> bool {
        matches!(self.q(k), Some("true" | "1"))
    }

    /// A header as text.
    pub fn header(&self, k: &str) -> Option<&str> {
        self.headers.get(k).and_then(|v| v.to_str().ok())
    }

    /// The Content-Type without parameters.
    pub fn content_type(&self) -> &str {
        self.header("content-type")
            .and_then(|c| c.split(';').next())
            .map(str::trim)
            .unwrap_or_default()
    }

    /// The field manager of a write: `?fieldManager=` or the User-Agent up to the first '/'.
    pub fn manager(&self) -> String {
        if let Some(m) = self.q("fieldManager").filter(|m| !m.is_empty()) {
            return m.to_string();
        }
        let ua = self.header("user-agent").unwrap_or("unknown");
        ua.split('/').next().unwrap_or(ua).to_string()
    }

    /// Whether the client asked for a meta.k8s.io Table.
    pub fn wants_table(&self) -> bool {
        self.header("accept")
            .is_some_and(|a| a.split(',').next().is_some_and(|f| f.contains("as=Table")))
    }
}

/// Decodes `a=b&c=d` with percent-decoding.
pub fn parse_query(q: &str) -> HashMap<String, String> {
    q.split('&')
        .filter(|p| !p.is_empty())
        .map(|p| {
            let (k, v) = p.split_once('=').unwrap_or((p, ""));
            (percent_decode(k), percent_decode(v))
        })
        .collect()
}

fn percent_decode(s: &str) -> String {
    let bytes = s.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        match bytes[i] {
            b'+' => out.push(b' '),
            b'%' if i + 2 < bytes.len() => match u8::from_str_radix(&s[i + 1..i + 3], 16) {
                Ok(b) => {
                    out.push(b);
                    i += 2;
                }
                Err(_) => out.push(b'%'),
            },
            b => out.push(b),
        }
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// A JSON answer.
pub fn json_response(code: u16, body: &Value) -> Response<Body> {
    let bytes = serde_json::to_vec(body).unwrap_or_default();
    let status = StatusCode::from_u16(code).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
    json_body_response(status, Body::from(bytes))
}

/// An answer of `status` whose `body` is JSON, not to be cached.
pub fn json_body_response(status: StatusCode, body: Body) -> Response<Body> {
    let mut r = Response::new(body);
    *r.status_mut() = status;
    r.headers_mut().insert(
        http::header::CONTENT_TYPE,
        http::HeaderValue::from_static("application/json"),
    );
    r.headers_mut().insert(
        http::header::CACHE_CONTROL,
        http::HeaderValue::from_static("no-cache, private"),
    );
    r
}

/// An error answer: the metav1 Status.
pub fn error_response(e: &ApiError) -> Response<Body> {
    json_response(e.code, &e.to_status())
}

/// The 404 of an unknown path.
pub fn path_not_found() -> ApiError {
    ApiError::new(
        404,
        "NotFound",
        "the server could not find the requested resource",
        Some(serde_json::json!({})),
    )
}

/// 405 for a verb a resource does not support.
pub fn method_not_allowed(method: &Method) -> ApiError {
    ApiError::new(
        405,
        "MethodNotAllowed",
        format!("the server does not allow this method on the requested resource ({method})"),
        Some(serde_json::json!({})),
    )
}
