//! Watches: newline-delimited JSON events from a resourceVersion (replayed from the store's
//! bounded history, or an ERROR 410 Expired event when it is older), initial events for
//! `resourceVersion=0`/absent and streaming lists, bookmarks and `timeoutSeconds`.

use std::collections::HashSet;
use std::convert::Infallible;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use axum::body::{Body, Bytes};
use http::Response;
use serde_json::{Value, json};
use tokio::sync::{broadcast, mpsc};
use tokio::time::Instant;

use super::Req;
use super::routes::Target;
use super::selectors::{FieldSelector, LabelSelector};
use crate::sim::SimContext;
use crate::store::{ApiError, StoreEvent, StoreEventType};

/// Default watch length when the client gives no `timeoutSeconds`.
const DEFAULT_TIMEOUT: Duration = Duration::from_secs(1800);
/// Bookmarks go out this long before the deadline, as the real watch cache does.
const BOOKMARK_LEAD: Duration = Duration::from_secs(2);
/// And at most this far apart.
const BOOKMARK_EVERY: Duration = Duration::from_secs(60);

struct Filter {
    resource: String,
    namespace: Option<String>,
    labels: LabelSelector,
    fields: FieldSelector,
}

impl Filter {
    fn key(obj: &Value) -> String {
        format!(
            "{}/{}",
            obj["metadata"]["namespace"].as_str().unwrap_or_default(),
            obj["metadata"]["name"].as_str().unwrap_or_default()
        )
    }
    fn in_scope(&self, obj: &Value) -> bool {
        self.namespace
            .as_deref()
            .is_none_or(|ns| obj["metadata"]["namespace"].as_str() == Some(ns))
    }
    fn matches(&self, obj: &Value) -> bool {
        self.in_scope(obj) && self.labels.matches_object(obj) && self.fields.matches(obj)
    }
}

/// Whether a table watch still owes the client its column definitions: as the real server,
/// only the first table event carries them; later ones have `columnDefinitions: null`.
struct Headers(AtomicBool);

impl Headers {
    fn new() -> Headers {
        Headers(AtomicBool::new(true))
    }
}

fn event_line(
    ctx: &SimContext,
    req: &Req,
    t: &Target,
    headers: &Headers,
    kind: &str,
    obj: &Value,
) -> Bytes {
    let obj = if req.wants_table() && kind != "ERROR" && kind != "BOOKMARK" {
        let mut table = super::table::to_table(ctx, &t.gvr, obj, req);
        if !headers.0.swap(false, Ordering::Relaxed) {
            table["columnDefinitions"] = Value::Null;
        }
        table
    } else {
        obj.clone()
    };
    let mut line = serde_json::to_vec(&json!({"type": kind, "object": obj})).unwrap_or_default();
    line.push(b'\n');
    Bytes::from(line)
}

fn bookmark(t: &Target, rv: u64, initial_end: bool) -> Value {
    let mut meta = json!({"resourceVersion": rv.to_string()});
    if initial_end {
        meta["annotations"] = json!({"k8s.io/initial-events-end": "true"});
    }
    let mut obj = json!({"kind": t.gvr.kind, "apiVersion": t.gvr.api_version(), "metadata": meta});
    if t.gvr.kind == "Pod" {
        obj["spec"] = json!({"containers": null});
        obj["status"] = json!({});
    }
    obj
}

/// Serves a watch request.
pub async fn serve(ctx: &SimContext, req: &Req, t: &Target) -> Response<Body> {
    let filter = match (
        LabelSelector::parse(req.q("labelSelector").unwrap_or_default()),
        FieldSelector::parse(req.q("fieldSelector").unwrap_or_default()),
    ) {
        (Ok(labels), Ok(fields)) => Filter {
            resource: t.gvr.key(),
            namespace: t.namespace.clone(),
            labels,
            fields,
        },
        (Err(e), _) | (_, Err(e)) => return super::error_response(&e),
    };
    let timeout = req
        .q("timeoutSeconds")
        .and_then(|s| s.parse::<u64>().ok())
        .map_or(DEFAULT_TIMEOUT, Duration::from_secs);
    let rv_param = req.q("resourceVersion").unwrap_or_default().to_string();
    let send_initial = req.flag("sendInitialEvents");
    let (tx, rx) = mpsc::channel::<Result<Bytes, Infallible>>(256);
    let mut lines: Vec<Bytes> = Vec::new();
    let mut seen = HashSet::new();
    let headers = Headers::new();
    let start_rv;
    let receiver = if rv_param.is_empty() || rv_param == "0" || send_initial {
        let rx_live = ctx.store.subscribe();
        let (items, rv) = ctx.store.list(&t.gvr, t.namespace.as_deref());
        for o in items.iter().filter(|o| filter.matches(o)) {
            seen.insert(Filter::key(o));
            lines.push(event_line(ctx, req, t, &headers, "ADDED", o));
        }
        if send_initial && req.flag("allowWatchBookmarks") {
            lines.push(event_line(
                ctx,
                req,
                t,
                &headers,
                "BOOKMARK",
                &bookmark(t, rv, true),
            ));
        }
        start_rv = rv;
        Some(rx_live)
    } else {
        let rv = rv_param.parse::<u64>().unwrap_or(0);
        start_rv = rv;
        let (items, _) = ctx.store.list(&t.gvr, t.namespace.as_deref());
        match ctx.store.watch_from(&filter.resource, rv) {
            Ok((events, rx_live)) => {
                for o in items
                    .iter()
                    .filter(|o| filter.matches(o) && obj_rv(o) <= rv)
                {
                    seen.insert(Filter::key(o));
                }
                for ev in events {
                    if let Some(l) = translate(ctx, req, t, &headers, &filter, &mut seen, &ev) {
                        lines.push(l);
                    }
                }
                Some(rx_live)
            }
            Err(e) => {
                lines.push(event_line(ctx, req, t, &headers, "ERROR", &e.to_status()));
                None
            }
        }
    };
    let ctx2 = ctx.clone();
    let req2 = req.clone();
    let t2 = t.clone();
    tokio::spawn(async move {
        for l in lines {
            if tx.send(Ok(l)).await.is_err() {
                return;
            }
        }
        if let Some(live) = receiver {
            follow(
                &ctx2, &req2, &t2, &headers, filter, seen, live, tx, timeout, start_rv,
            )
            .await;
        }
    });
    let mut r = Response::new(Body::from_stream(
        tokio_stream::wrappers::ReceiverStream::new(rx),
    ));
    r.headers_mut().insert(
        http::header::CONTENT_TYPE,
        http::HeaderValue::from_static("application/json"),
    );
    r
}

fn obj_rv(o: &Value) -> u64 {
    o["metadata"]["resourceVersion"]
        .as_str()
        .and_then(|s| s.parse().ok())
        .unwrap_or(0)
}

fn translate(
    ctx: &SimContext,
    req: &Req,
    t: &Target,
    headers: &Headers,
    f: &Filter,
    seen: &mut HashSet<String>,
    ev: &StoreEvent,
) -> Option<Bytes> {
    if ev.resource != f.resource || !f.in_scope(&ev.object) {
        return None;
    }
    let key = Filter::key(&ev.object);
    let now = f.matches(&ev.object);
    let was = seen.contains(&key);
    let kind = match ev.event_type {
        StoreEventType::Deleted if was => {
            seen.remove(&key);
            "DELETED"
        }
        StoreEventType::Deleted => return None,
        _ if now && !was => {
            seen.insert(key);
            "ADDED"
        }
        _ if now => ev.event_type.as_str(),
        _ if was => {
            seen.remove(&key);
            "DELETED"
        }
        _ => return None,
    };
    Some(event_line(ctx, req, t, headers, kind, &ev.object))
}

#[allow(clippy::too_many_arguments)]
async fn follow(
    ctx: &SimContext,
    req: &Req,
    t: &Target,
    headers: &Headers,
    f: Filter,
    mut seen: HashSet<String>,
    mut live: broadcast::Receiver<StoreEvent>,
    tx: mpsc::Sender<Result<Bytes, Infallible>>,
    timeout: Duration,
    start_rv: u64,
) {
    let deadline = Instant::now() + timeout;
    let bookmarks = req.flag("allowWatchBookmarks");
    let mut last_rv = start_rv;
    let mut next_bookmark = (Instant::now() + BOOKMARK_EVERY)
        .min(deadline.checked_sub(BOOKMARK_LEAD).unwrap_or(deadline));
    loop {
        tokio::select! {
            _ = tokio::time::sleep_until(deadline) => return,
            _ = tokio::time::sleep_until(next_bookmark), if bookmarks => {
                let rv = ctx.store.resource_version();
                if rv > last_rv {
                    last_rv = rv;
                    if tx.send(Ok(event_line(ctx, req, t, headers, "BOOKMARK", &bookmark(t, rv, false)))).await.is_err() {
                        return;
                    }
                }
                next_bookmark = if Instant::now() + BOOKMARK_EVERY < deadline { Instant::now() + BOOKMARK_EVERY } else { deadline + BOOKMARK_LEAD };
            }
            ev = live.recv() => match ev {
                Ok(ev) => {
                    if ev.resource_version <= start_rv {
                        continue;
                    }
                    if let Some(line) = translate(ctx, req, t, headers, &f, &mut seen, &ev) {
                        last_rv = ev.resource_version;
                        if tx.send(Ok(line)).await.is_err() {
                            return;
                        }
                    }
                }
                Err(broadcast::error::RecvError::Lagged(_)) => {
                    let e = ApiError::new(410, "Expired", "too old resource version: watch fell behind", None);
                    let _ = tx.send(Ok(event_line(ctx, req, t, headers, "ERROR", &e.to_status()))).await;
                    return;
                }
                Err(broadcast::error::RecvError::Closed) => return,
            },
            _ = tx.closed() => return,
        }
    }
}
