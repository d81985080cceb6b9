//! Watches: newline-delimited JSON events from a resourceVersion (replayed from the store's
//! bounded history, or an ERROR 410 Expired event when it is older), initial events for
//! `resourceVersion=0`/absent and streaming lists, bookmarks and `timeoutSeconds`. Events
//! are rendered from the store's shared objects as the client reads them.

use std::collections::HashSet;
use std::convert::Infallible;
use std::sync::Arc;
use std::time::Duration;

use axum::body::{Body, Bytes};
use http::Response;
use serde_json::{Value, json};
use tokio::sync::{broadcast, mpsc};
use tokio::time::Instant;

use super::Req;
use super::list::Selection;
use super::target::Target;
use super::watch_delay::Delayed;
use crate::context::SimContext;
use crate::store::{ApiError, StoreEvent, StoreEventType, StoredObject};

/// Default watch length when the client gives no `timeoutSeconds`.
const DEFAULT_TIMEOUT: Duration = Duration::from_secs(1800);
/// Bookmarks go out this long before the deadline, as the real watch cache does.
const BOOKMARK_LEAD: Duration = Duration::from_secs(2);
/// And at most this far apart.
const BOOKMARK_EVERY: Duration = Duration::from_secs(60);
/// Initial events go out in writes of about this many bytes (whole lines).
const INITIAL_BATCH: usize = 64 * 1024;

struct Filter {
    resource: String,
    namespace: Option<String>,
    selection: Selection,
}

impl Filter {
    fn key(obj: &StoredObject) -> String {
        format!("{}/{}", obj.namespace().unwrap_or_default(), obj.name())
    }
    fn in_scope(&self, obj: &StoredObject) -> bool {
        self.namespace
            .as_deref()
            .is_none_or(|ns| obj.namespace() == Some(ns))
    }
    fn matches(&self, obj: &StoredObject) -> bool {
        self.in_scope(obj) && self.selection.matches(obj)
    }
}

/// The events a watch opens with, before it follows live changes.
enum Opening {
    /// Every selected object as ADDED, then (when asked) the initial-events-end bookmark.
    Initial {
        items: Vec<Arc<StoredObject>>,
        end_bookmark: bool,
    },
    /// The objects the client knows at its resourceVersion, and the kept events after it.
    Replay {
        known: Vec<Arc<StoredObject>>,
        events: Vec<StoreEvent>,
    },
}

/// One watch stream: what it selects, what the client has seen and where lines go.
struct Watch {
    ctx: SimContext,
    req: Req,
    t: Target,
    filter: Filter,
    /// Keys of the selected objects the client knows.
    seen: HashSet<String>,
    /// Whether a table watch still owes the client its column definitions: as the real
    /// server, only the first table event carries them; later ones have
    /// `columnDefinitions: null`.
    table_headers: bool,
    /// The resourceVersion of the last change or bookmark sent.
    sent_rv: u64,
    tx: mpsc::Sender<Result<Bytes, Infallible>>,
}

impl Watch {
    /// One event line, `{"object":<object>,"type":<kind>}`, as serializing
    /// `json!({"type": kind, "object": ..})` writes it.
    fn line(kind: &str, object: &[u8]) -> Bytes {
        let mut line = Vec::with_capacity(object.len() + 32);
        line.extend_from_slice(b"{\"object\":");
        line.extend_from_slice(object);
        line.extend_from_slice(b",\"type\":");
        line.extend_from_slice(json!(kind).to_string().as_bytes());
        line.extend_from_slice(b"}\n");
        Bytes::from(line)
    }

    /// Sends a BOOKMARK or ERROR event; false once the client is gone.
    async fn send(&mut self, kind: &str, obj: &Value) -> bool {
        let line = Self::line(kind, obj.to_string().as_bytes());
        self.tx.send(Ok(line)).await.is_ok()
    }

    /// The line of a change of a stored object: as a table row when the client asked for
    /// tables, else with its stored JSON text.
    fn object_line(&mut self, kind: &str, obj: &StoredObject) -> Bytes {
        if self.req.wants_table() {
            let mut table = super::table::to_table(&self.ctx, &self.t.gvr, &obj.value(), &self.req);
            if !std::mem::replace(&mut self.table_headers, false) {
                table["columnDefinitions"] = Value::Null;
            }
            Self::line(kind, table.to_string().as_bytes())
        } else {
            Self::line(kind, obj.json().as_bytes())
        }
    }

    /// Sends a change of a stored object; false once the client is gone.
    async fn send_object(&mut self, kind: &str, obj: &StoredObject) -> bool {
        let line = self.object_line(kind, obj);
        self.tx.send(Ok(line)).await.is_ok()
    }

    /// Sends the initial ADDED events (and the initial-events-end bookmark when asked),
    /// several lines per write; false once the client is gone.
    async fn send_initial(&mut self, items: &[Arc<StoredObject>], end: Option<Value>) -> bool {
        let mut batch = Vec::new();
        for o in items {
            if !self.filter.matches(o) {
                continue;
            }
            self.seen.insert(Filter::key(o));
            batch.extend_from_slice(&self.object_line("ADDED", o));
            if batch.len() >= INITIAL_BATCH {
                let full = std::mem::take(&mut batch);
                if self.tx.send(Ok(Bytes::from(full))).await.is_err() {
                    return false;
                }
            }
        }
        if let Some(bookmark) = end {
            batch.extend_from_slice(&Self::line("BOOKMARK", bookmark.to_string().as_bytes()));
        }
        batch.is_empty() || self.tx.send(Ok(Bytes::from(batch))).await.is_ok()
    }

    /// Sends the opening events; false once the client is gone.
    async fn open(&mut self, opening: Opening, rv: u64) -> bool {
        match opening {
            Opening::Initial {
                items,
                end_bookmark,
            } => {
                let end = end_bookmark.then(|| bookmark(&self.t, rv, true));
                self.send_initial(&items, end).await
            }
            Opening::Replay { known, events } => {
                for o in known
                    .iter()
                    .filter(|o| self.filter.matches(o) && o.resource_version() <= rv)
                {
                    self.seen.insert(Filter::key(o));
                }
                for ev in events {
                    if let Some(kind) = self.translate(&ev)
                        && !self.send_object(kind, &ev.object).await
                    {
                        return false;
                    }
                }
                true
            }
        }
    }

    /// The event type the client sees for a store change, if any, updating `seen`.
    fn translate(&mut self, ev: &StoreEvent) -> Option<&'static str> {
        let f = &self.filter;
        if ev.resource != f.resource || !f.in_scope(&ev.object) {
            return None;
        }
        let key = Filter::key(&ev.object);
        let now = f.matches(&ev.object);
        let was = self.seen.contains(&key);
        let kind = match ev.event_type {
            StoreEventType::Deleted if was => {
                self.seen.remove(&key);
                "DELETED"
            }
            StoreEventType::Deleted => return None,
            _ if now && !was => {
                self.seen.insert(key);
                "ADDED"
            }
            _ if now => ev.event_type.as_str(),
            _ if was => {
                self.seen.remove(&key);
                "DELETED"
            }
            _ => return None,
        };
        Some(kind)
    }

    /// Hands a live change to the client; false once the client is gone.
    async fn deliver(&mut self, ev: &StoreEvent) -> bool {
        match self.translate(ev) {
            Some(kind) => {
                self.sent_rv = ev.resource_version;
                self.send_object(kind, &ev.object).await
            }
            None => true,
        }
    }

    /// Hands every delayed change that is due to the client; false once it is gone.
    async fn deliver_due(&mut self, pending: &mut Delayed<StoreEvent>) -> bool {
        while let Some(ev) = pending.pop_due(Instant::now()) {
            if !self.deliver(&ev).await {
                return false;
            }
        }
        true
    }

    /// Follows live changes until the deadline, with bookmarks when allowed. With a watch
    /// delay (see [`super::watch_delay`]) each change waits its turn in `pending`, and a
    /// bookmark waits until none is pending, so it never claims a change not yet sent.
    async fn follow(
        &mut self,
        mut live: broadcast::Receiver<StoreEvent>,
        timeout: Duration,
        start_rv: u64,
    ) {
        let deadline = Instant::now() + timeout;
        let bookmarks = self.req.flag("allowWatchBookmarks");
        self.sent_rv = start_rv;
        let mut next_bookmark = (Instant::now() + BOOKMARK_EVERY)
            .min(deadline.checked_sub(BOOKMARK_LEAD).unwrap_or(deadline));
        let mut pending = Delayed::new(self.ctx.config.watch_delay.clone());
        loop {
            let due = pending.next_due();
            tokio::select! {
                _ = tokio::time::sleep_until(deadline) => return,
                _ = tokio::time::sleep_until(due.unwrap_or(deadline)), if due.is_some() => {
                    if !self.deliver_due(&mut pending).await {
                        return;
                    }
                }
                _ = tokio::time::sleep_until(next_bookmark), if bookmarks && pending.is_empty() => {
                    let rv = self.ctx.store.resource_version();
                    if rv > self.sent_rv {
                        self.sent_rv = rv;
                        if !self.send("BOOKMARK", &bookmark(&self.t, rv, false)).await {
                            return;
                        }
                    }
                    next_bookmark = if Instant::now() + BOOKMARK_EVERY < deadline { Instant::now() + BOOKMARK_EVERY } else { deadline + BOOKMARK_LEAD };
                }
                ev = live.recv() => match ev {
                    Ok(ev) if ev.resource_version <= start_rv => {}
                    Ok(ev) => {
                        if pending.is_immediate() {
                            if !self.deliver(&ev).await {
                                return;
                            }
                        } else {
                            pending.push(Instant::now(), ev);
                        }
                    }
                    Err(broadcast::error::RecvError::Lagged(_)) => {
                        let e = ApiError::new(410, "Expired", "too old resource version: watch fell behind", None);
                        self.send("ERROR", &e.to_status()).await;
                        return;
                    }
                    Err(broadcast::error::RecvError::Closed) => return,
                },
                _ = self.tx.closed() => return,
            }
        }
    }
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
    let filter = match Selection::parse(req) {
        Ok(selection) => Filter {
            resource: t.gvr.key(),
            namespace: t.namespace.clone(),
            selection,
        },
        Err(e) => return super::error_response(&e),
    };
    let timeout = req
        .q("timeoutSeconds")
        .and_then(|s| s.parse::<u64>().ok())
        .map_or(DEFAULT_TIMEOUT, Duration::from_secs);
    let rv_param = req.q("resourceVersion").unwrap_or_default().to_string();
    let send_initial = req.flag("sendInitialEvents");
    let (tx, rx) = mpsc::channel::<Result<Bytes, Infallible>>(256);
    let ns = t.namespace.as_deref();
    let (opening, start_rv) = if rv_param.is_empty() || rv_param == "0" || send_initial {
        let live = ctx.store.subscribe();
        let (items, rv) = ctx.store.list_shared(&t.gvr, ns);
        let end_bookmark = send_initial && req.flag("allowWatchBookmarks");
        (
            Ok((
                Opening::Initial {
                    items,
                    end_bookmark,
                },
                live,
            )),
            rv,
        )
    } else {
        let rv = rv_param.parse::<u64>().unwrap_or(0);
        let (known, _) = ctx.store.list_shared(&t.gvr, ns);
        let opening = ctx
            .store
            .watch_from(&filter.resource, rv)
            .map(|(events, live)| (Opening::Replay { known, events }, live));
        (opening, rv)
    };
    let mut watch = Watch {
        ctx: ctx.clone(),
        req: req.clone(),
        t: t.clone(),
        filter,
        seen: HashSet::new(),
        table_headers: true,
        sent_rv: 0,
        tx,
    };
    tokio::spawn(async move {
        match opening {
            Ok((opening, live)) => {
                if watch.open(opening, start_rv).await {
                    watch.follow(live, timeout, start_rv).await;
                }
            }
            Err(e) => {
                watch.send("ERROR", &e.to_status()).await;
            }
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
