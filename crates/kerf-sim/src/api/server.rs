//! The HTTPS listener (rustls, HTTP/1.1 and HTTP/2) and the top-level request dispatch.

use std::convert::Infallible;
use std::sync::Arc;
use std::time::{Duration, Instant};

use axum::body::Body;
use http::{Method, Request, Response};
use http_body_util::BodyExt;
use hyper_util::rt::{TokioExecutor, TokioIo};
use tokio::net::TcpListener;
use tokio::sync::watch;
use tokio_rustls::TlsAcceptor;

use super::audit::AuditRecord;
use super::outage::OutageMode;
use super::{
    Req, discovery, error_response, json_response, openapi, parse_query, path_not_found, routes,
};
use crate::context::SimContext;

/// Answers one request, with the warnings its verb raised in `Warning` headers.
pub async fn handle(ctx: &SimContext, req: Req) -> Response<Body> {
    let mode = super::warnings::FieldValidation::parse(req.q("fieldValidation"));
    super::warnings::scope(mode, answer(ctx, req)).await
}

async fn answer(ctx: &SimContext, req: Req) -> Response<Body> {
    let path = req.path.trim_end_matches('/').to_string();
    if req.method == Method::GET {
        let direct = match path.as_str() {
            "/version" => Some(discovery::version(ctx)),
            "/api" => Some(discovery::api_versions()),
            "/apis" => Some(discovery::group_list(ctx)),
            "/healthz" | "/readyz" | "/livez" => {
                let mut r = Response::new(Body::from("ok"));
                r.headers_mut().insert(
                    http::header::CONTENT_TYPE,
                    http::HeaderValue::from_static("text/plain"),
                );
                return r;
            }
            _ => None,
        };
        if let Some(v) = direct {
            return json_response(200, &v);
        }
        let segs: Vec<&str> = path.trim_start_matches('/').split('/').collect();
        if let ["api", "v1", "nodes", node, "proxy", "metrics", "cadvisor"] = segs.as_slice() {
            return node_cadvisor(ctx, node);
        }
        let gv = match segs.as_slice() {
            ["api", v] => Some(discovery::resource_list(ctx, "", v)),
            ["apis", g] => Some(discovery::group(ctx, g)),
            ["apis", g, v] => Some(discovery::resource_list(ctx, g, v)),
            ["openapi", "v2"] => Some(Some(openapi::v2(ctx))),
            ["openapi", "v3"] => Some(Some(openapi::v3_root(ctx))),
            ["openapi", "v3", "api", v] => Some(openapi::v3_group_version(ctx, "", v)),
            ["openapi", "v3", "apis", g, v] => Some(openapi::v3_group_version(ctx, g, v)),
            _ => None,
        };
        if let Some(found) = gv {
            return match found {
                Some(v) => json_response(200, &v),
                None => error_response(&path_not_found()),
            };
        }
    }
    match super::target::resolve(ctx, &path) {
        Ok(Some(t)) => routes::serve(ctx, &req, &t).await,
        Ok(None) => error_response(&path_not_found()),
        Err(e) => error_response(&e),
    }
}

/// `GET /api/v1/nodes/{node}/proxy/metrics/cadvisor`: the node's cAdvisor counters, as the
/// API server proxies them from the node's kubelet; 404 for an unknown node.
fn node_cadvisor(ctx: &SimContext, node: &str) -> Response<Body> {
    if ctx
        .store
        .get(&crate::store::gvr::NODES, None, node)
        .is_none()
    {
        return error_response(&crate::store::ApiError::not_found(
            &crate::store::gvr::NODES,
            node,
        ));
    }
    let body = crate::kubelet::render_cadvisor(ctx, Some(node));
    let mut r = Response::new(Body::from(body));
    r.headers_mut().insert(
        http::header::CONTENT_TYPE,
        http::HeaderValue::from_static("text/plain; version=0.0.4"),
    );
    r
}

async fn to_req(r: Request<hyper::body::Incoming>) -> Req {
    let (parts, body) = r.into_parts();
    let body = body
        .collect()
        .await
        .map(|b| b.to_bytes().to_vec())
        .unwrap_or_default();
    Req {
        method: parts.method,
        path: parts.uri.path().to_string(),
        query: parse_query(parts.uri.query().unwrap_or_default()),
        headers: parts.headers,
        body,
    }
}

/// Serves HTTPS on `listener` until `stop` turns true. While the outage switch refuses
/// connections the listener is closed; it is bound again to the same address after.
pub async fn serve(
    ctx: SimContext,
    listener: TcpListener,
    tls: Arc<rustls::ServerConfig>,
    mut stop: watch::Receiver<bool>,
) {
    let acceptor = TlsAcceptor::from(tls);
    let Ok(addr) = listener.local_addr() else {
        return;
    };
    let mut listener = Some(listener);
    let mut outage = ctx.state.outage.subscribe();
    loop {
        let Some(open) = listener.as_ref() else {
            tokio::select! {
                _ = outage.wait_for(|m| *m != OutageMode::Refused) => {}
                _ = stop.changed() => return,
            }
            listener = rebind(addr).await;
            continue;
        };
        let conn = tokio::select! {
            c = open.accept() => c,
            _ = outage.changed() => {
                if *outage.borrow_and_update() == OutageMode::Refused {
                    listener = None;
                }
                continue;
            }
            _ = stop.changed() => return,
        };
        let Ok((tcp, _)) = conn else { continue };
        tokio::spawn(serve_connection(
            ctx.clone(),
            acceptor.clone(),
            tcp,
            stop.clone(),
        ));
    }
}

/// Binds `addr` again after refused connections (a few tries: the port may linger).
async fn rebind(addr: std::net::SocketAddr) -> Option<TcpListener> {
    for _ in 0..50 {
        match TcpListener::bind(addr).await {
            Ok(l) => return Some(l),
            Err(e) => tracing::debug!(%addr, error = %e, "cannot listen again yet"),
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    tracing::error!(%addr, "cannot listen again after the outage");
    None
}

async fn serve_connection(
    ctx: SimContext,
    acceptor: TlsAcceptor,
    tcp: tokio::net::TcpStream,
    mut stop: watch::Receiver<bool>,
) {
    let cut = outage_cut(ctx.state.outage.subscribe());
    let Ok(tls) = acceptor.accept(tcp).await else {
        return;
    };
    let service = hyper::service::service_fn(move |r: Request<hyper::body::Incoming>| {
        let ctx = ctx.clone();
        async move {
            let req = to_req(r).await;
            tracing::debug!(method = %req.method, path = %req.path, "request");
            Ok::<_, Infallible>(serve_guarded(&ctx, req).await)
        }
    });
    let builder = hyper_util::server::conn::auto::Builder::new(TokioExecutor::new());
    let conn = builder.serve_connection(TokioIo::new(tls), service);
    tokio::select! {
        _ = conn => {}
        _ = stop.changed() => {}
        _ = cut => {}
    }
}

/// Resolves when an outage cuts the connections open: when connections are refused, or
/// when an outage starts while the server was up.
async fn outage_cut(mut rx: watch::Receiver<OutageMode>) {
    let mut prev = *rx.borrow_and_update();
    while rx.changed().await.is_ok() {
        let now = *rx.borrow_and_update();
        if now == OutageMode::Refused || (prev == OutageMode::Up && now != OutageMode::Up) {
            return;
        }
        prev = now;
    }
    std::future::pending::<()>().await;
}

/// Answers `req` as the outage switch says: normally, a 503 at once, or a 503 once the
/// hanging phase ends.
async fn serve_guarded(ctx: &SimContext, req: Req) -> Response<Body> {
    let outage = &ctx.state.outage;
    let hung = outage.mode() == OutageMode::Hanging;
    if hung {
        outage.wait_past(OutageMode::Hanging).await;
    }
    if !hung && outage.mode() == OutageMode::Up {
        return serve_recorded(ctx, req).await;
    }
    let mut record = pending(&req);
    record.status = 503;
    ctx.audit.record(record);
    super::error_response(&crate::store::ApiError::new(
        503,
        "ServiceUnavailable",
        "the API server is unavailable",
        None,
    ))
}

/// What is known of a request before it is answered.
fn pending(req: &Req) -> AuditRecord {
    let mut query: Vec<String> = req.query.iter().map(|(k, v)| format!("{k}={v}")).collect();
    query.sort();
    AuditRecord {
        seq: 0,
        method: req.method.clone(),
        path: req.path.clone(),
        query: query.join("&"),
        user_agent: req.header("user-agent").unwrap_or_default().to_owned(),
        manager: req.manager(),
        dry_run: req.q("dryRun").is_some_and(|v| !v.is_empty()),
        status: 0,
        duration: Duration::ZERO,
        received: Instant::now(),
    }
}

/// Answers `req` through [`handle`] and records it in the context's log.
async fn serve_recorded(ctx: &SimContext, req: Req) -> Response<Body> {
    let started = Instant::now();
    let mut record = pending(&req);
    let resp = handle(ctx, req).await;
    record.status = resp.status().as_u16();
    record.duration = started.elapsed();
    ctx.audit.record(record);
    resp
}
