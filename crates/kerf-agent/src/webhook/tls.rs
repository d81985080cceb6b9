//! The webhook's HTTPS server, with a certificate that rotates without a restart.
//!
//! The certificate and key come from two PEM files (a mounted Secret from cert-manager or
//! a self-managed one). Before each new connection the server compares the files'
//! modification time and size with those of the pair it serves; when either changed it
//! reads both and switches only if both parse and the key belongs to the certificate. A
//! half-written rotation (new certificate, old key) keeps the old pair and is tried again
//! on the next connection.

use std::future::Future;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, PoisonError, RwLock};
use std::time::{Duration, SystemTime};

use axum::Router;
use chrono::{DateTime, Utc};
use hyper_util::rt::{TokioExecutor, TokioIo};
use hyper_util::server::conn::auto;
use hyper_util::service::TowerToHyperService;
use kerf_decide::duration::Rfc3339;
use rustls::crypto::CryptoProvider;
use rustls::pki_types::pem::PemObject as _;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use rustls::server::{ClientHello, ResolvesServerCert};
use rustls::sign::CertifiedKey;
use tokio::net::TcpListener;

use super::WebhookError;

/// How long a client gets to finish the TLS handshake.
const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(10);

/// Modification time and size of the certificate and the key file.
type Stamp = [(SystemTime, u64); 2];

/// A certificate and key read from files, re-read when the files change.
#[derive(Debug)]
pub struct ReloadingCert {
    cert_path: PathBuf,
    key_path: PathBuf,
    provider: Arc<CryptoProvider>,
    /// The files' stamp when the served pair was read, and the last stamp that failed
    /// with why.
    stamps: Mutex<(Stamp, Option<(Stamp, String)>)>,
    current: RwLock<Arc<CertifiedKey>>,
    /// When the served certificate expires, if its validity could be read.
    not_after: Mutex<Option<DateTime<Utc>>>,
}

impl ReloadingCert {
    /// Reads the pair; fails when it is unusable (the server cannot start without one).
    pub fn load(cert_path: &Path, key_path: &Path) -> Result<Arc<ReloadingCert>, WebhookError> {
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let stamp = stamp(cert_path, key_path)?;
        let key = read_pair(cert_path, key_path, &provider)?;
        let not_after = not_after(&key);
        Ok(Arc::new(ReloadingCert {
            cert_path: cert_path.to_owned(),
            key_path: key_path.to_owned(),
            provider,
            stamps: Mutex::new((stamp, None)),
            current: RwLock::new(Arc::new(key)),
            not_after: Mutex::new(not_after),
        }))
    }

    /// Why the certificate cannot serve the webhook at `now`, or `None` when it can: the
    /// files changed into an unusable pair (missing, unreadable, not matching), or the
    /// served certificate expired. Re-reads the files first if they changed.
    pub fn problem(&self, now: DateTime<Utc>) -> Option<String> {
        if let Err(e) = self.refresh() {
            return Some(e.to_string());
        }
        let stamps = self.stamps.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some((_, why)) = &stamps.1 {
            return Some(why.clone());
        }
        let not_after = *self
            .not_after
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        not_after.filter(|t| *t <= now).map(|t| {
            format!(
                "certificate {} expired at {}",
                self.cert_path.display(),
                Rfc3339(t)
            )
        })
    }

    /// The pair served now.
    pub fn current(&self) -> Arc<CertifiedKey> {
        self.current
            .read()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }

    /// Re-reads the files if they changed since the served pair was read. Returns whether
    /// a new pair is served; an unusable new pair is an error and the old one stays.
    pub fn refresh(&self) -> Result<bool, WebhookError> {
        let now = stamp(&self.cert_path, &self.key_path)?;
        let mut stamps = self.stamps.lock().unwrap_or_else(PoisonError::into_inner);
        if now == stamps.0 || stamps.1.as_ref().is_some_and(|(s, _)| *s == now) {
            return Ok(false);
        }
        match read_pair(&self.cert_path, &self.key_path, &self.provider) {
            Ok(key) => {
                *self
                    .not_after
                    .lock()
                    .unwrap_or_else(PoisonError::into_inner) = not_after(&key);
                *self.current.write().unwrap_or_else(PoisonError::into_inner) = Arc::new(key);
                *stamps = (now, None);
                Ok(true)
            }
            Err(e) => {
                stamps.1 = Some((now, e.to_string()));
                Err(e)
            }
        }
    }

    /// A rustls server configuration that serves the current pair (HTTP/2 and HTTP/1.1).
    pub fn server_config(self: &Arc<Self>) -> Result<rustls::ServerConfig, WebhookError> {
        let mut config = rustls::ServerConfig::builder_with_provider(self.provider.clone())
            .with_safe_default_protocol_versions()
            .map_err(WebhookError::Tls)?
            .with_no_client_auth()
            .with_cert_resolver(self.clone());
        config.alpn_protocols = vec![b"h2".to_vec(), b"http/1.1".to_vec()];
        Ok(config)
    }
}

impl ResolvesServerCert for ReloadingCert {
    fn resolve(&self, _hello: ClientHello<'_>) -> Option<Arc<CertifiedKey>> {
        Some(self.current())
    }
}

/// When the leaf certificate of `key` expires (`notAfter`), if it parses.
fn not_after(key: &CertifiedKey) -> Option<DateTime<Utc>> {
    let leaf = key.cert.first()?;
    let (_, cert) = x509_parser::parse_x509_certificate(leaf.as_ref()).ok()?;
    DateTime::from_timestamp(cert.validity().not_after.timestamp(), 0)
}

fn file_stamp(path: &Path) -> Result<(SystemTime, u64), WebhookError> {
    let meta = std::fs::metadata(path).map_err(|source| WebhookError::Io {
        path: path.display().to_string(),
        source,
    })?;
    let modified = meta.modified().unwrap_or(SystemTime::UNIX_EPOCH);
    Ok((modified, meta.len()))
}

fn stamp(cert: &Path, key: &Path) -> Result<Stamp, WebhookError> {
    Ok([file_stamp(cert)?, file_stamp(key)?])
}

/// Reads a certificate chain and its key, and checks that they belong together.
fn read_pair(
    cert_path: &Path,
    key_path: &Path,
    provider: &CryptoProvider,
) -> Result<CertifiedKey, WebhookError> {
    let bad = |message: String| WebhookError::Certificate {
        cert: cert_path.display().to_string(),
        key: key_path.display().to_string(),
        message,
    };
    let read = |path: &Path| {
        std::fs::read(path).map_err(|source| WebhookError::Io {
            path: path.display().to_string(),
            source,
        })
    };
    let cert_pem = read(cert_path)?;
    let key_pem = read(key_path)?;
    let chain = CertificateDer::pem_slice_iter(&cert_pem)
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| bad(format!("certificate: {e}")))?;
    if chain.is_empty() {
        return Err(bad("no certificate in the file".to_owned()));
    }
    let key = PrivateKeyDer::from_pem_slice(&key_pem).map_err(|e| bad(format!("key: {e}")))?;
    let signing = provider
        .key_provider
        .load_private_key(key)
        .map_err(|e| bad(format!("key: {e}")))?;
    let pair = CertifiedKey::new(chain, signing);
    pair.keys_match()
        .map_err(|e| bad(format!("the key does not match the certificate: {e}")))?;
    Ok(pair)
}

/// Serves `router` over TLS on `listener` until `shutdown` completes. The certificate is
/// checked for changes before each connection.
pub async fn serve(
    listener: TcpListener,
    certs: Arc<ReloadingCert>,
    router: Router,
    shutdown: impl Future<Output = ()>,
) -> Result<(), WebhookError> {
    let acceptor = tokio_rustls::TlsAcceptor::from(Arc::new(certs.server_config()?));
    let mut shutdown = std::pin::pin!(shutdown);
    loop {
        let (tcp, peer) = tokio::select! {
            () = &mut shutdown => return Ok(()),
            accepted = listener.accept() => match accepted {
                Ok(a) => a,
                Err(e) => {
                    tracing::warn!(error = %e, "webhook accept failed");
                    tokio::time::sleep(Duration::from_millis(50)).await;
                    continue;
                }
            },
        };
        match certs.refresh() {
            Ok(true) => tracing::info!("webhook certificate reloaded"),
            Ok(false) => {}
            Err(e) => {
                tracing::warn!(error = %e, "webhook certificate not reloaded; serving the previous one")
            }
        }
        let acceptor = acceptor.clone();
        let service = TowerToHyperService::new(router.clone());
        tokio::spawn(async move {
            let tls = match tokio::time::timeout(HANDSHAKE_TIMEOUT, acceptor.accept(tcp)).await {
                Ok(Ok(tls)) => tls,
                Ok(Err(e)) => {
                    tracing::debug!(%peer, error = %e, "webhook TLS handshake failed");
                    return;
                }
                Err(_) => {
                    tracing::debug!(%peer, "webhook TLS handshake timed out");
                    return;
                }
            };
            let builder = auto::Builder::new(TokioExecutor::new());
            if let Err(e) = builder.serve_connection(TokioIo::new(tls), service).await {
                tracing::debug!(%peer, error = %e, "webhook connection ended with an error");
            }
        });
    }
}
