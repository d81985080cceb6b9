//! The admission webhook under load, side by side with a bare TLS server on loopback.
//!
//! Both servers present the same certificate and run on the same runtime. The webhook's
//! index holds `--workloads` Deployments with live values (each with one ReplicaSet) and
//! every request is a pod CREATE of one of them, so each answer is a JSON patch. The bare
//! server reads each request whole and answers it with a fixed body. For 1, 16 and 64 connections, each
//! connection sends its next request when the previous answer arrived (closed loop) for
//! `--seconds`; then a paced run sends `--rate` requests per second over 16 connections and
//! takes each latency from the time the request was due, or from when it was sent when the
//! connection was free by then (see [`connection`]). Prints one JSON line per run and
//! a summary line with the ratios and the handler's own cost without HTTP and TLS.
//!
//! Run: `cargo run --release -p kerf-agent --example webhook_load -- --workloads 10000`

use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::Context as _;
use axum::body::Body;
use hyper::body::Incoming;
use hyper_util::rt::TokioIo;
use kerf_agent::webhook::{self, ReloadingCert, SharedIndex};
use kerf_api::RightsizingRecommendation;
use prometheus_client::registry::Registry;
use rustls::pki_types::ServerName;
use serde_json::{Value, json};
use tokio::net::{TcpListener, TcpStream};

/// Namespaces the workloads are spread over.
const NAMESPACES: usize = 100;

/// What the bare server answers.
const FIXED_BODY: &[u8] = br#"{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","response":{"uid":"x","allowed":true}}"#;

#[derive(Debug, Clone, Copy)]
struct Args {
    workloads: usize,
    seconds: f64,
    rate: u32,
}

fn parse_args() -> anyhow::Result<Args> {
    let mut args = Args {
        workloads: 10_000,
        seconds: 3.0,
        rate: 5_000,
    };
    let mut it = std::env::args().skip(1);
    while let Some(flag) = it.next() {
        let value = it.next().with_context(|| format!("{flag} needs a value"))?;
        match flag.as_str() {
            "--workloads" => args.workloads = value.parse()?,
            "--seconds" => args.seconds = value.parse()?,
            "--rate" => args.rate = value.parse()?,
            other => anyhow::bail!("unknown flag {other} (--workloads, --seconds, --rate)"),
        }
    }
    Ok(args)
}

fn workload(i: usize) -> (String, String) {
    (format!("ns-{}", i % NAMESPACES), format!("app-{i}"))
}

/// An Applied rsr of Deployment `name` whose `app` container has live values.
fn rsr(ns: &str, name: &str) -> anyhow::Result<RightsizingRecommendation> {
    let base = json!({"requests": {"cpu": "250m", "memory": "512Mi"}, "limits": {"cpu": "1", "memory": "1Gi"}});
    Ok(serde_json::from_value(json!({
        "apiVersion": "kerf.getkerf.dev/v1alpha1", "kind": "RightsizingRecommendation",
        "metadata": {"name": name, "namespace": ns},
        "spec": {"workloadRef": {"kind": "Deployment", "name": name},
                 "recommendationID": "r1", "containers": []},
        "status": {"phase": "Applied", "live": {"containers": [{"name": "app",
            "requests": {"cpu": "120m", "memory": "512Mi"},
            "limits": {"cpu": "500m", "memory": "1Gi"}, "base": base}]}},
    }))?)
}

fn index(workloads: usize) -> anyhow::Result<SharedIndex> {
    let index = SharedIndex::new();
    for i in 0..workloads {
        let (ns, name) = workload(i);
        index.upsert_rsr(&rsr(&ns, &name)?)?;
        index.upsert_replicaset(&ns, &format!("{name}-7d9f8b6c5"), Some(&name));
    }
    Ok(index)
}

/// The AdmissionReview of a pod CREATE of workload `i`, as the API server sends it.
fn review_body(i: usize) -> String {
    let (ns, name) = workload(i);
    let rs = format!("{name}-7d9f8b6c5");
    let pod = json!({
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"generateName": format!("{rs}-"), "namespace": ns,
            "labels": {"app": name, "pod-template-hash": "7d9f8b6c5"},
            "ownerReferences": [{"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": rs,
                "uid": "6f1c9a52-0d7e-4b8a-9a51-3c2e8f7d1b20", "controller": true, "blockOwnerDeletion": true}],
            "managedFields": [{"manager": "kube-controller-manager", "operation": "Update",
                "apiVersion": "v1", "fieldsType": "FieldsV1", "fieldsV1": {"f:metadata": {}, "f:spec": {}}}]},
        "spec": {"containers": [{"name": "app", "image": "registry.example/app:1.4.2",
                "ports": [{"containerPort": 8080, "protocol": "TCP"}],
                "env": [{"name": "MODE", "value": "production"}, {"name": "LOG", "value": "info"}],
                "resources": {"requests": {"cpu": "250m", "memory": "512Mi"}, "limits": {"cpu": "1", "memory": "1Gi"}},
                "terminationMessagePath": "/dev/termination-log", "imagePullPolicy": "IfNotPresent"}],
            "restartPolicy": "Always", "terminationGracePeriodSeconds": 30, "dnsPolicy": "ClusterFirst",
            "serviceAccountName": "default", "schedulerName": "default-scheduler"},
    });
    json!({"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview",
        "request": {"uid": format!("req-{i}"), "kind": {"group": "", "version": "v1", "kind": "Pod"},
            "resource": {"group": "", "version": "v1", "resource": "pods"},
            "namespace": ns, "operation": "CREATE",
            "userInfo": {"username": "system:serviceaccount:kube-system:replicaset-controller"},
            "object": pod, "oldObject": null, "dryRun": false}})
    .to_string()
}

/// The bare server: the same TLS configuration; it reads each request whole (as the
/// webhook must before it can answer) and answers a fixed body.
async fn serve_bare(listener: TcpListener, config: Arc<rustls::ServerConfig>) {
    let acceptor = tokio_rustls::TlsAcceptor::from(config);
    while let Ok((tcp, _)) = listener.accept().await {
        let acceptor = acceptor.clone();
        tokio::spawn(async move {
            let Ok(tls) = acceptor.accept(tcp).await else {
                return;
            };
            let service = hyper::service::service_fn(|req: hyper::Request<Incoming>| async {
                // The whole request is received before the answer, as the webhook must.
                let received = axum::body::to_bytes(Body::new(req.into_body()), 1 << 20).await;
                let status = if received.is_ok() { 200 } else { 400 };
                let mut answer = hyper::Response::new(Body::from(FIXED_BODY));
                *answer.status_mut() = hyper::StatusCode::from_u16(status).unwrap_or_default();
                Ok::<_, Infallible>(answer)
            });
            let _ = hyper::server::conn::http1::Builder::new()
                .serve_connection(TokioIo::new(tls), service)
                .await;
        });
    }
}

type Sender = hyper::client::conn::http1::SendRequest<String>;

async fn connect(tls: &tokio_rustls::TlsConnector, addr: SocketAddr) -> anyhow::Result<Sender> {
    let tcp = TcpStream::connect(addr).await?;
    tcp.set_nodelay(true)?;
    let stream = tls.connect(ServerName::try_from("localhost")?, tcp).await?;
    let (sender, conn) = hyper::client::conn::http1::handshake(TokioIo::new(stream)).await?;
    tokio::spawn(conn);
    Ok(sender)
}

async fn send(sender: &mut Sender, path: &str, body: String) -> anyhow::Result<()> {
    sender.ready().await?;
    let req = hyper::Request::post(path)
        .header("host", "localhost")
        .header("content-type", "application/json")
        .body(body)?;
    let resp = sender.send_request(req).await?;
    anyhow::ensure!(resp.status().is_success(), "status {}", resp.status());
    let body = axum::body::to_bytes(Body::new(resp.into_body()), 1 << 20).await?;
    anyhow::ensure!(!body.is_empty(), "empty answer");
    Ok(())
}

/// One connection's loop: closed (next request when the answer came) or paced (a request
/// every `pace`). Latencies in microseconds. A paced request's latency is taken from when
/// it was due if the answer before it came after that (the server held it up: no
/// coordinated omission), else from when it was sent: the gap between due and sent is then
/// only this client's timer waking late (tokio's timers have millisecond granularity), which
/// would otherwise add up to a millisecond to every paced latency, the bare server's too.
async fn connection(
    tls: tokio_rustls::TlsConnector,
    target: Target,
    first: usize,
    until: Instant,
    pace: Option<Duration>,
) -> anyhow::Result<Vec<u32>> {
    let mut sender = connect(&tls, target.addr).await?;
    let mut latencies = Vec::new();
    let mut ticker = pace.map(|p| {
        let mut t = tokio::time::interval(p);
        t.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Burst);
        t
    });
    let mut i = first;
    let mut answered = Instant::now();
    while Instant::now() < until {
        let due = match &mut ticker {
            Some(t) => t.tick().await.into_std(),
            None => Instant::now(),
        };
        let from = if answered > due { due } else { Instant::now() };
        send(
            &mut sender,
            target.path,
            target.bodies[i % target.bodies.len()].clone(),
        )
        .await?;
        answered = Instant::now();
        latencies.push(u32::try_from((answered - from).as_micros()).unwrap_or(u32::MAX));
        i += 7919;
    }
    Ok(latencies)
}

#[derive(Clone)]
struct Target {
    name: &'static str,
    addr: SocketAddr,
    path: &'static str,
    bodies: Arc<Vec<String>>,
}

/// One run's figures.
#[derive(Debug, Clone, serde::Serialize)]
struct Run {
    server: &'static str,
    mode: &'static str,
    connections: usize,
    requests: usize,
    rps: f64,
    p50_ms: f64,
    p99_ms: f64,
    max_ms: f64,
}

fn quantile(sorted: &[u32], q: f64) -> f64 {
    if sorted.is_empty() {
        return 0.0;
    }
    let i = ((sorted.len() - 1) as f64 * q).round() as usize;
    f64::from(sorted[i]) / 1000.0
}

async fn run(
    tls: &tokio_rustls::TlsConnector,
    target: &Target,
    connections: usize,
    seconds: f64,
    rate: Option<u32>,
) -> anyhow::Result<Run> {
    let start = Instant::now();
    let until = start + Duration::from_secs_f64(seconds);
    let pace = rate.map(|r| Duration::from_secs_f64(connections as f64 / f64::from(r)));
    let tasks: Vec<_> = (0..connections)
        .map(|c| tokio::spawn(connection(tls.clone(), target.clone(), c, until, pace)))
        .collect();
    let mut all = Vec::new();
    for t in tasks {
        all.extend(t.await??);
    }
    let elapsed = start.elapsed().as_secs_f64();
    all.sort_unstable();
    Ok(Run {
        server: target.name,
        mode: if rate.is_some() { "paced" } else { "closed" },
        connections,
        requests: all.len(),
        rps: all.len() as f64 / elapsed,
        p50_ms: quantile(&all, 0.5),
        p99_ms: quantile(&all, 0.99),
        max_ms: quantile(&all, 1.0),
    })
}

fn client(ca: &kerf_testkit::TestCa) -> anyhow::Result<tokio_rustls::TlsConnector> {
    Ok(tokio_rustls::TlsConnector::from(Arc::new(
        ca.client_config()?,
    )))
}

/// Starts the webhook and the bare server; returns their targets.
async fn start(
    args: Args,
    dir: &std::path::Path,
    ca_leaf: &kerf_testkit::Leaf,
) -> anyhow::Result<(Target, Target, SharedIndex)> {
    let (cert, key) = (dir.join("tls.crt"), dir.join("tls.key"));
    std::fs::write(&cert, &ca_leaf.cert_pem)?;
    std::fs::write(&key, &ca_leaf.key_pem)?;
    let certs = ReloadingCert::load(&cert, &key)?;
    let bare_config = Arc::new(certs.server_config()?);
    let metrics = webhook::register_metrics(&mut Registry::default());
    let live = index(args.workloads)?;
    let router = webhook::router(live.clone(), metrics);
    let hook = TcpListener::bind("127.0.0.1:0").await?;
    let bare = TcpListener::bind("127.0.0.1:0").await?;
    let bodies = Arc::new(
        (0..args.workloads.max(1))
            .map(review_body)
            .collect::<Vec<_>>(),
    );
    let targets = (
        Target {
            name: "webhook",
            addr: hook.local_addr()?,
            path: webhook::MUTATE_PATH,
            bodies: Arc::clone(&bodies),
        },
        Target {
            name: "bare",
            addr: bare.local_addr()?,
            path: "/",
            bodies,
        },
    );
    tokio::spawn(webhook::serve(hook, certs, router, std::future::pending()));
    tokio::spawn(serve_bare(bare, bare_config));
    Ok((targets.0, targets.1, live))
}

/// The handler's own cost in microseconds a request, without HTTP or TLS: decoding the
/// review, the index lookup, the patch and encoding the answer, over every body once
/// (after a warm-up pass).
fn handler_cost(live: &SharedIndex, bodies: &[String]) -> anyhow::Result<f64> {
    let once = || -> anyhow::Result<Duration> {
        let start = Instant::now();
        for body in bodies {
            match webhook::answer(&live.read(), body.as_bytes()) {
                webhook::Answer::Review(review, webhook::Outcome::Patched) => {
                    std::hint::black_box(webhook::encode(&review)?);
                }
                other => anyhow::bail!("a review was not patched: {other:?}"),
            }
        }
        Ok(start.elapsed())
    };
    once()?;
    let took = once()?;
    Ok((took.as_secs_f64() * 1e6 / bodies.len().max(1) as f64 * 10.0).round() / 10.0)
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let args = parse_args()?;
    let ca = kerf_testkit::TestCa::new()?;
    let leaf = ca.leaf("localhost", "webhook")?;
    let dir = tempfile::tempdir()?;
    let (hook, bare, live) = start(args, dir.path(), &leaf).await?;
    let tls = client(&ca)?;
    // Warm both servers (connections, allocator, caches).
    run(&tls, &hook, 4, 0.5, None).await?;
    run(&tls, &bare, 4, 0.5, None).await?;
    let mut summary = serde_json::Map::new();
    summary.insert("workloads".into(), json!(args.workloads));
    summary.insert(
        "handler_us".into(),
        json!(handler_cost(&live, &hook.bodies)?),
    );
    for c in [1, 16, 64] {
        let h = run(&tls, &hook, c, args.seconds, None).await?;
        let b = run(&tls, &bare, c, args.seconds, None).await?;
        println!("{}", serde_json::to_string(&h)?);
        println!("{}", serde_json::to_string(&b)?);
        summary.insert(
            format!("ratio_c{c}"),
            json!((h.rps / b.rps * 100.0).round() / 100.0),
        );
    }
    for target in [&hook, &bare] {
        let r = run(&tls, target, 16, args.seconds, Some(args.rate)).await?;
        println!("{}", serde_json::to_string(&r)?);
        summary.insert(format!("{}_paced_p99_ms", target.name), json!(r.p99_ms));
        summary.insert(format!("{}_paced_rps", target.name), json!(r.rps.round()));
    }
    println!("{}", Value::Object(summary));
    Ok(())
}
