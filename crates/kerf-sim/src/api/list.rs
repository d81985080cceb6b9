//! LIST: one page of a kind read from the store's shared objects, with label and field
//! selection, `limit` and key-based `continue` tokens as the real API server encodes them,
//! rendered from the stored JSON text in chunks as the client reads.

use std::convert::Infallible;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use axum::body::{Body, Bytes};
use base64::Engine;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use http::{Response, StatusCode};
use hyper::body::{Frame, SizeHint};
use serde_json::{Value, json};

use super::Req;
use super::selectors::{FieldSelector, LabelSelector};
use super::target::Target;
use crate::context::SimContext;
use crate::store::{ApiError, Page, PageQuery, StoredObject};

/// A streamed list body is cut into chunks of about this many bytes.
const CHUNK: usize = 256 * 1024;

/// The token version the real API server writes.
const TOKEN_VERSION: &str = "meta.k8s.io/v1";

/// The message of a 410 for a continue token older than the kept history.
const CONTINUE_EXPIRED: &str = "The provided continue parameter is too old to display a consistent list result. You can start a new list without the continue parameter, or use the continue token in this response to retrieve the remainder of the results. Continuing with the provided token results in an inconsistent list - objects that were created, modified, or deleted between the time the first chunk was returned and now may show up in the list.";

/// The label and field selectors of a list or watch request.
pub(crate) struct Selection {
    labels: LabelSelector,
    fields: FieldSelector,
    fields_read: FieldsRead,
}

/// What a field selector needs of an object.
#[derive(Clone, Copy, PartialEq)]
enum FieldsRead {
    /// No field selector.
    Nothing,
    /// Only `metadata.name` and `metadata.namespace`.
    Metadata,
    /// Other fields: the parsed object.
    Object,
}

impl Selection {
    /// The selectors of `labelSelector` and `fieldSelector` (400 when malformed; the label
    /// selector's error first).
    pub(crate) fn parse(req: &Req) -> Result<Selection, ApiError> {
        let raw_fields = req.q("fieldSelector").unwrap_or_default();
        let labels = LabelSelector::parse(req.q("labelSelector").unwrap_or_default())?;
        let fields = FieldSelector::parse(raw_fields)?;
        let keys: Vec<&str> = raw_fields
            .split(',')
            .filter(|p| !p.trim().is_empty())
            .map(|p| p.split(['=', '!']).next().unwrap_or_default().trim())
            .collect();
        let fields_read = if keys.is_empty() {
            FieldsRead::Nothing
        } else if keys
            .iter()
            .all(|k| matches!(*k, "metadata.name" | "metadata.namespace"))
        {
            FieldsRead::Metadata
        } else {
            FieldsRead::Object
        };
        Ok(Selection {
            labels,
            fields,
            fields_read,
        })
    }

    /// Whether both selectors are empty (every object matches).
    pub(crate) fn is_everything(&self) -> bool {
        self.fields_read == FieldsRead::Nothing && self.labels == LabelSelector::default()
    }

    /// Whether a stored object matches both selectors (parsed only for field selectors on
    /// other fields than the name and namespace).
    pub(crate) fn matches(&self, o: &StoredObject) -> bool {
        self.labels.matches(o.labels())
            && match self.fields_read {
                FieldsRead::Nothing => true,
                FieldsRead::Metadata => self.fields.matches(&o.metadata_stub()),
                FieldsRead::Object => self.fields.matches(&o.value()),
            }
    }
}

/// A decoded `continue` token: the resourceVersion of the first page (-1: continue at the
/// current one) and the first key of the next page.
#[derive(Debug, Clone, PartialEq)]
struct Continue {
    rv: i64,
    start: String,
}

impl Continue {
    /// The token of the page from `start` (the key after the last listed one): base64 of
    /// `{"v":"meta.k8s.io/v1","rv":N,"start":"<last key>\u0000"}`.
    fn encode(rv: i64, start: &str) -> String {
        let v = json!({"v": TOKEN_VERSION, "rv": rv, "start": start});
        URL_SAFE_NO_PAD.encode(v.to_string())
    }

    fn decode(token: &str) -> Result<Continue, ApiError> {
        let invalid =
            |why: &str| ApiError::bad_request(format!("continue key is not valid: {why}"));
        let bytes = URL_SAFE_NO_PAD
            .decode(token.trim_end_matches('='))
            .map_err(|_| invalid("expected base64 encoded JSON"))?;
        let v: Value =
            serde_json::from_slice(&bytes).map_err(|_| invalid("expected base64 encoded JSON"))?;
        if v["v"] != TOKEN_VERSION {
            return Err(invalid("server does not recognize this encoded key"));
        }
        let start = v["start"].as_str().unwrap_or_default();
        if start.is_empty() || start.contains("..") || start.starts_with('/') {
            return Err(invalid("invalid start key"));
        }
        Ok(Continue {
            rv: v["rv"].as_i64().unwrap_or(0),
            start: start.to_string(),
        })
    }
}

/// Serves a LIST request.
pub fn serve(ctx: &SimContext, req: &Req, t: &Target) -> Response<Body> {
    match read(ctx, req, t) {
        Ok((page, rv, counted)) => {
            let metadata = list_metadata(&page, rv, counted);
            if req.wants_table() {
                let body = list_value(t, metadata, &page.items);
                let table = super::table::to_table(ctx, &t.gvr, &body, req);
                return super::json_response(200, &table);
            }
            render(t, &metadata, page.items)
        }
        Err(Refused::Error(e)) => super::error_response(&e),
        Err(Refused::ExpiredContinue(status)) => super::json_response(410, &status),
    }
}

/// Why a list was refused: an error, or a 410 for an expired continue token whose Status
/// carries the token to continue inconsistently.
enum Refused {
    Error(ApiError),
    ExpiredContinue(Value),
}

impl From<ApiError> for Refused {
    fn from(e: ApiError) -> Refused {
        Refused::Error(e)
    }
}

/// Reads the page a request asks for, the resourceVersion the answer reports, and whether
/// the list is unfiltered (so its remaining count is reported).
fn read(ctx: &SimContext, req: &Req, t: &Target) -> Result<(Page, u64, bool), Refused> {
    if req.q("resourceVersionMatch") == Some("Exact")
        && let Some(rv) = req.q("resourceVersion").and_then(|r| r.parse::<u64>().ok())
        && rv < ctx.store.history_start()
    {
        return Err(ApiError::new(
            410,
            "Expired",
            "The resourceVersion for the provided list is too old.",
            None,
        )
        .into());
    }
    let selection = Selection::parse(req)?;
    let limit = req
        .q("limit")
        .and_then(|l| l.parse::<usize>().ok())
        .filter(|l| *l > 0);
    let cont = match req.q("continue").filter(|c| !c.is_empty()) {
        Some(c) => Some(Continue::decode(c)?),
        None => None,
    };
    if let Some(c) = &cont
        && c.rv >= 0
        && (c.rv as u64) < ctx.store.history_start()
    {
        return Err(Refused::ExpiredContinue(expired_continue(&c.start)));
    }
    let query = PageQuery {
        namespace: t.namespace.as_deref(),
        start: cont.as_ref().map(|c| c.start.as_str()),
        limit,
    };
    let keep = |o: &StoredObject| selection.matches(o);
    let keep: Option<&dyn Fn(&StoredObject) -> bool> =
        (!selection.is_everything()).then_some(&keep);
    let page = ctx.store.list_page(&t.gvr, &query, keep);
    let rv = match &cont {
        Some(c) if c.rv > 0 => c.rv as u64,
        _ => page.resource_version,
    };
    Ok((page, rv, selection.is_everything()))
}

/// The Status of a 410 for an expired continue token, with a token that continues at the
/// current resourceVersion from the same key.
fn expired_continue(start: &str) -> Value {
    let mut status = ApiError::new(410, "Expired", CONTINUE_EXPIRED, None).to_status();
    status["metadata"] = json!({"continue": Continue::encode(-1, start)});
    status
}

/// The list's metadata: resourceVersion and, when more objects follow, the continue token
/// and, for a list without selectors (`counted`), how many follow: the real API server
/// leaves `remainingItemCount` out when a label or field selector filters the list.
fn list_metadata(page: &Page, rv: u64, counted: bool) -> Value {
    let mut metadata = json!({"resourceVersion": rv.to_string()});
    if let Some(next) = &page.next_start {
        metadata["continue"] = json!(Continue::encode(rv as i64, next));
        if counted {
            metadata["remainingItemCount"] = json!(page.remaining);
        }
    }
    metadata
}

/// The list as one value (copies the objects; for tables).
fn list_value(t: &Target, metadata: Value, items: &[Arc<StoredObject>]) -> Value {
    let items: Vec<Value> = items.iter().map(|o| o.value()).collect();
    json!({
        "kind": format!("{}List", t.gvr.kind),
        "apiVersion": t.gvr.api_version(),
        "metadata": metadata,
        "items": items,
    })
}

/// Writes the list as JSON, byte for byte as serializing [`list_value`] would (keys in
/// order), copying the stored objects' JSON text in chunks as the client reads. The length
/// is known up front, so the answer has a Content-Length (and no chunked encoding whose
/// final empty chunk would go out as a tiny segment of its own).
fn render(t: &Target, metadata: &Value, items: Vec<Arc<StoredObject>>) -> Response<Body> {
    let mut head = b"{\"apiVersion\":".to_vec();
    write_json(&mut head, &json!(t.gvr.api_version()));
    head.extend_from_slice(b",\"items\":[");
    let mut tail = b"],\"kind\":".to_vec();
    write_json(&mut tail, &json!(format!("{}List", t.gvr.kind)));
    tail.extend_from_slice(b",\"metadata\":");
    write_json(&mut tail, metadata);
    tail.push(b'}');
    let separators = items.len().saturating_sub(1);
    let objects: usize = items.iter().map(|o| o.json().len()).sum();
    let body = ListBody {
        left: (head.len() + objects + separators + tail.len()) as u64,
        buf: head,
        items: items.into_iter(),
        first: true,
        tail: Some(tail),
    };
    super::json_body_response(StatusCode::OK, Body::new(body))
}

fn write_json(buf: &mut Vec<u8>, v: &Value) {
    // Writing a Value into a Vec cannot fail.
    if serde_json::to_writer(buf, v).is_err() {
        tracing::warn!("list item not serializable");
    }
}

/// A list body of known length: objects copied until a chunk is full, then the tail.
struct ListBody {
    /// Bytes not yet handed out.
    left: u64,
    buf: Vec<u8>,
    items: std::vec::IntoIter<Arc<StoredObject>>,
    first: bool,
    tail: Option<Vec<u8>>,
}

impl ListBody {
    fn next_chunk(&mut self) -> Option<Bytes> {
        let tail = self.tail.as_ref()?;
        while self.buf.len() < CHUNK {
            let Some(o) = self.items.next() else {
                self.buf.extend_from_slice(tail);
                self.tail = None;
                break;
            };
            if !self.first {
                self.buf.push(b',');
            }
            self.first = false;
            self.buf.extend_from_slice(o.json().as_bytes());
        }
        let next = if self.tail.is_some() {
            Vec::with_capacity(CHUNK + CHUNK / 4)
        } else {
            Vec::new()
        };
        let chunk = std::mem::replace(&mut self.buf, next);
        self.left = self.left.saturating_sub(chunk.len() as u64);
        Some(Bytes::from(chunk))
    }
}

impl hyper::body::Body for ListBody {
    type Data = Bytes;
    type Error = Infallible;

    fn poll_frame(
        self: Pin<&mut Self>,
        _cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, Infallible>>> {
        Poll::Ready(self.get_mut().next_chunk().map(|c| Ok(Frame::data(c))))
    }

    fn is_end_stream(&self) -> bool {
        self.tail.is_none()
    }

    fn size_hint(&self) -> SizeHint {
        SizeHint::with_exact(self.left)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn continue_token_round_trips_and_matches_the_real_format() {
        let token = Continue::encode(42, "default/web-1\u{0}");
        let raw = URL_SAFE_NO_PAD.decode(&token).unwrap();
        let v: Value = serde_json::from_slice(&raw).unwrap();
        assert_eq!(
            v,
            json!({"v": "meta.k8s.io/v1", "rv": 42, "start": "default/web-1\u{0}"})
        );
        assert_eq!(
            Continue::decode(&token).unwrap(),
            Continue {
                rv: 42,
                start: "default/web-1\u{0}".to_string()
            }
        );
    }

    #[test]
    fn malformed_continue_tokens_are_bad_requests() {
        for bad in ["%%%", "e30", &URL_SAFE_NO_PAD.encode(r#"{"offset":3}"#)] {
            let e = Continue::decode(bad).unwrap_err();
            assert_eq!(e.code, 400, "{bad}");
            assert!(e.message.starts_with("continue key is not valid"), "{bad}");
        }
    }
}
