//! The webhook and metrics listeners: `:port` (an unspecified host) serves IPv4 and IPv6.

use std::net::{Ipv6Addr, SocketAddr, TcpListener as StdListener};
use std::time::Duration;

use kerf_agent::listen::bind;
use tokio::net::TcpStream;

/// Fails (never skips) when the machine has no IPv6 loopback, saying so.
fn require_ipv6_loopback() {
    let v6 = StdListener::bind(SocketAddr::from((Ipv6Addr::LOCALHOST, 0)));
    assert!(
        v6.is_ok(),
        "this machine has no IPv6 loopback (::1): {v6:?}; the dual-stack listener cannot be \
         tested here (enable IPv6 on lo, e.g. sysctl net.ipv6.conf.lo.disable_ipv6=0)"
    );
}

/// The webhook and metrics addresses the agent takes from `--webhook-addr` and
/// `--metrics-addr`.
fn addrs(webhook: &str, metrics: &str) -> anyhow::Result<(SocketAddr, SocketAddr)> {
    use clap::Parser;
    let argv = [
        "kerf-agent",
        "run",
        "--cluster-name",
        "c",
        "--webhook-addr",
        webhook,
        "--metrics-addr",
        metrics,
    ];
    let kerf_agent::cli::Command::Run(args) = kerf_agent::cli::Cli::try_parse_from(argv)?.command
    else {
        anyhow::bail!("not the run command");
    };
    let s = kerf_agent::settings::Settings::from_args(&args, &|_| None)?;
    Ok((s.webhook.addr, s.metrics_addr))
}

async fn connects(addr: &str, port: u16) -> bool {
    let to: SocketAddr = match format!("{addr}:{port}").parse() {
        Ok(a) => a,
        Err(_) => return false,
    };
    let attempt = tokio::time::timeout(Duration::from_secs(5), TcpStream::connect(to)).await;
    matches!(attempt, Ok(Ok(_)))
}

/// Binds `addr` and asserts the listener takes connections on both loopbacks.
async fn assert_dual_stack(addr: SocketAddr) -> anyhow::Result<()> {
    let l = bind(addr)?;
    let port = l.local_addr()?.port();
    assert!(connects("127.0.0.1", port).await, "IPv4 loopback ({addr})");
    assert!(connects("[::1]", port).await, "IPv6 loopback ({addr})");
    Ok(())
}

#[tokio::test]
async fn an_unspecified_ipv4_host_listens_on_ipv4_and_ipv6() -> anyhow::Result<()> {
    require_ipv6_loopback();
    // What `--webhook-addr :8443` and the default `0.0.0.0:8080` become.
    let (webhook, metrics) = addrs(":0", "0.0.0.0:0")?;
    assert_dual_stack(metrics).await?;
    assert_dual_stack(webhook).await
}

#[tokio::test]
async fn an_unspecified_ipv6_host_listens_on_ipv4_and_ipv6() -> anyhow::Result<()> {
    require_ipv6_loopback();
    assert_dual_stack("[::]:0".parse()?).await
}

#[tokio::test]
async fn a_given_address_is_bound_as_it_is() -> anyhow::Result<()> {
    require_ipv6_loopback();
    let l = bind("127.0.0.1:0".parse()?)?;
    let port = l.local_addr()?.port();
    assert!(connects("127.0.0.1", port).await);
    assert!(!connects("[::1]", port).await, "127.0.0.1 only");
    Ok(())
}

#[tokio::test]
async fn the_metrics_server_answers_over_ipv4_and_ipv6() -> anyhow::Result<()> {
    require_ipv6_loopback();
    // A free port, then the server on `:port`.
    let port = StdListener::bind("127.0.0.1:0")?.local_addr()?.port();
    let (_, addr) = addrs(":8443", &format!(":{port}"))?;
    let router = axum::Router::new().route("/healthz", axum::routing::get(|| async { "ok" }));
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let server = tokio::spawn(kerf_agent::metrics::serve(addr, router, async {
        let _ = stopped.await;
    }));
    let client = reqwest::Client::new();
    for host in ["127.0.0.1", "[::1]"] {
        let url = format!("http://{host}:{port}/healthz");
        let mut answer = None;
        for _ in 0..50 {
            if let Ok(r) = client.get(&url).send().await {
                answer = Some(r.text().await?);
                break;
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        assert_eq!(answer.as_deref(), Some("ok"), "{url}");
    }
    let _ = stop.send(());
    server.await??;
    Ok(())
}
