//! The webhook over real TLS: a rustls client that trusts only a test CA, and a
//! certificate rotated on disk while the server runs.

use std::net::SocketAddr;
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use anyhow::Context as _;
use axum::body::Body;
use hyper_util::rt::TokioIo;
use kerf_agent::webhook::{self, ReloadingCert, SharedIndex};
use kerf_testkit::TestCa;
use prometheus_client::registry::Registry;
use rustls::pki_types::ServerName;
use tokio::net::{TcpListener, TcpStream};

/// A test CA that signs serving certificates, and clients that trust it.
struct Ca(TestCa);

impl Ca {
    fn new() -> anyhow::Result<Ca> {
        Ok(Ca(TestCa::new()?))
    }

    /// A serving certificate for `localhost` and 127.0.0.1: (cert PEM, key PEM, cert DER).
    fn leaf(&self, cn: &str) -> anyhow::Result<(String, String, Vec<u8>)> {
        let leaf = self.0.leaf("localhost", cn)?;
        Ok((leaf.cert_pem, leaf.key_pem, leaf.cert_der))
    }

    fn client(&self) -> anyhow::Result<tokio_rustls::TlsConnector> {
        Ok(tokio_rustls::TlsConnector::from(Arc::new(
            self.0.client_config()?,
        )))
    }
}

/// Writes a file the way a Secret update lands: a new file renamed into place.
fn write(path: &Path, text: &str) -> anyhow::Result<()> {
    let tmp = path.with_extension("tmp");
    std::fs::write(&tmp, text)?;
    std::fs::rename(&tmp, path)?;
    Ok(())
}

/// Connects, and returns the certificate the server presented.
async fn served_cert(
    tls: &tokio_rustls::TlsConnector,
    addr: SocketAddr,
) -> anyhow::Result<Vec<u8>> {
    let tcp = TcpStream::connect(addr).await?;
    let stream = tls.connect(ServerName::try_from("localhost")?, tcp).await?;
    let certs = stream
        .get_ref()
        .1
        .peer_certificates()
        .context("no peer certificate")?;
    Ok(certs.first().context("empty chain")?.to_vec())
}

/// Posts an AdmissionReview over TLS and returns the HTTP status.
async fn post_review(tls: &tokio_rustls::TlsConnector, addr: SocketAddr) -> anyhow::Result<u16> {
    let tcp = TcpStream::connect(addr).await?;
    let stream = tls.connect(ServerName::try_from("localhost")?, tcp).await?;
    let (mut sender, conn) = hyper::client::conn::http1::handshake(TokioIo::new(stream)).await?;
    tokio::spawn(conn);
    let review = serde_json::json!({
        "apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview",
        "request": {"uid": "t1", "kind": {"group": "", "version": "v1", "kind": "Pod"},
                    "resource": {"group": "", "version": "v1", "resource": "pods"},
                    "namespace": "demo", "operation": "CREATE", "userInfo": {},
                    "object": {"metadata": {}, "spec": {"containers": []}}}
    });
    let req = axum::http::Request::post("/mutate")
        .header("host", "localhost")
        .header("content-type", "application/json")
        .body(review.to_string())?;
    let resp = sender.send_request(req).await?;
    let status = resp.status().as_u16();
    let body = axum::body::to_bytes(Body::new(resp.into_body()), 1 << 20).await?;
    let v: serde_json::Value = serde_json::from_slice(&body)?;
    anyhow::ensure!(v["response"]["allowed"] == true, "not allowed: {v}");
    Ok(status)
}

#[tokio::test]
async fn rotated_certificate_is_served_without_restart() {
    let dir = tempfile::tempdir().unwrap();
    let (cert_path, key_path) = (dir.path().join("tls.crt"), dir.path().join("tls.key"));
    let ca = Ca::new().unwrap();
    let (cert1, key1, der1) = ca.leaf("first").unwrap();
    write(&cert_path, &cert1).unwrap();
    write(&key_path, &key1).unwrap();

    let certs = ReloadingCert::load(&cert_path, &key_path).unwrap();
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let metrics = webhook::register_metrics(&mut Registry::default());
    let router = webhook::router(SharedIndex::new(), metrics);
    let (stop_tx, stop_rx) = tokio::sync::oneshot::channel::<()>();
    let server = tokio::spawn(webhook::serve(listener, certs, router, async {
        let _ = stop_rx.await;
    }));

    let client = ca.client().unwrap();
    assert_eq!(served_cert(&client, addr).await.unwrap(), der1);
    assert_eq!(post_review(&client, addr).await.unwrap(), 200);

    // Half a rotation (new certificate, old key): the old pair stays.
    let (cert2, key2, der2) = ca.leaf("second").unwrap();
    tokio::time::sleep(Duration::from_millis(20)).await;
    write(&cert_path, &cert2).unwrap();
    assert_eq!(served_cert(&client, addr).await.unwrap(), der1);
    // A key that does not parse: the old pair stays.
    tokio::time::sleep(Duration::from_millis(20)).await;
    write(
        &key_path,
        "-----BEGIN PRIVATE KEY-----\nnot a key\n-----END PRIVATE KEY-----\n",
    )
    .unwrap();
    assert_eq!(served_cert(&client, addr).await.unwrap(), der1);

    // Both files rotated: the new certificate is served on the next connection.
    tokio::time::sleep(Duration::from_millis(20)).await;
    write(&key_path, &key2).unwrap();
    assert_eq!(served_cert(&client, addr).await.unwrap(), der2);
    assert_eq!(post_review(&client, addr).await.unwrap(), 200);

    let _ = stop_tx.send(());
    let stopped = tokio::time::timeout(Duration::from_secs(5), server).await;
    assert!(matches!(stopped, Ok(Ok(Ok(())))), "{stopped:?}");
}

#[test]
fn unusable_pair_does_not_load() {
    let dir = tempfile::tempdir().unwrap();
    let (cert_path, key_path) = (dir.path().join("tls.crt"), dir.path().join("tls.key"));
    let ca = Ca::new().unwrap();
    let (cert1, _, _) = ca.leaf("first").unwrap();
    let (_, key2, _) = ca.leaf("second").unwrap();
    write(&cert_path, &cert1).unwrap();
    write(&key_path, &key2).unwrap();
    let err = ReloadingCert::load(&cert_path, &key_path).unwrap_err();
    assert!(err.to_string().contains("does not match"), "{err}");
    let missing = ReloadingCert::load(&dir.path().join("none.crt"), &key_path).unwrap_err();
    assert!(missing.to_string().contains("none.crt"), "{missing}");
}
