//! The cluster's own certificate authority and the API server's serving certificate
//! (for `127.0.0.1` and `localhost`), generated at start.

use std::net::{IpAddr, Ipv4Addr};
use std::sync::Arc;

use rcgen::{
    BasicConstraints, CertificateParams, DnType, IsCa, Issuer, KeyPair, KeyUsagePurpose, SanType,
};
use rustls::pki_types::{CertificateDer, PrivateKeyDer, PrivatePkcs8KeyDer};

/// Errors creating the TLS material.
#[derive(Debug, thiserror::Error)]
pub enum TlsError {
    /// Certificate generation failed.
    #[error("certificate generation: {0}")]
    Rcgen(#[from] rcgen::Error),
    /// rustls refused the configuration.
    #[error("tls configuration: {0}")]
    Rustls(#[from] rustls::Error),
}

/// A CA and a serving certificate signed by it.
pub struct TlsMaterial {
    /// PEM of the CA certificate (the kubeconfig's certificate-authority-data).
    pub ca_pem: String,
    /// The server's rustls configuration (ALPN h2 and http/1.1).
    pub server_config: Arc<rustls::ServerConfig>,
    /// PEM of a client certificate signed by the CA.
    pub client_cert_pem: String,
    /// PEM of its key.
    pub client_key_pem: String,
}

/// Installs the ring crypto provider as the process default if none is installed.
pub fn ensure_crypto_provider() {
    let _ = rustls::crypto::ring::default_provider().install_default();
}

/// Generates a fresh CA and serving certificate.
pub fn generate() -> Result<TlsMaterial, TlsError> {
    ensure_crypto_provider();
    let mut ca_params = CertificateParams::new(Vec::<String>::new())?;
    ca_params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    ca_params
        .distinguished_name
        .push(DnType::CommonName, "kerf-sim-ca");
    ca_params.key_usages = vec![
        KeyUsagePurpose::KeyCertSign,
        KeyUsagePurpose::CrlSign,
        KeyUsagePurpose::DigitalSignature,
    ];
    let ca_key = KeyPair::generate()?;
    let ca_cert = ca_params.self_signed(&ca_key)?;
    let issuer = Issuer::from_params(&ca_params, &ca_key);

    let mut params = CertificateParams::new(vec![
        "localhost".to_string(),
        "kubernetes.default.svc".to_string(),
    ])?;
    params
        .subject_alt_names
        .push(SanType::IpAddress(IpAddr::V4(Ipv4Addr::LOCALHOST)));
    params
        .distinguished_name
        .push(DnType::CommonName, "kube-apiserver");
    let key = KeyPair::generate()?;
    let cert = params.signed_by(&key, &issuer)?;

    let mut client_params = CertificateParams::new(Vec::<String>::new())?;
    client_params
        .distinguished_name
        .push(DnType::CommonName, "kerf-sim-admin");
    client_params
        .distinguished_name
        .push(DnType::OrganizationName, "system:masters");
    let client_key = KeyPair::generate()?;
    let client_cert = client_params.signed_by(&client_key, &issuer)?;

    let chain = vec![
        CertificateDer::from(cert.der().to_vec()),
        CertificateDer::from(ca_cert.der().to_vec()),
    ];
    let key_der = PrivateKeyDer::Pkcs8(PrivatePkcs8KeyDer::from(key.serialize_der()));
    let mut config = rustls::ServerConfig::builder()
        .with_no_client_auth()
        .with_single_cert(chain, key_der)?;
    config.alpn_protocols = vec![b"h2".to_vec(), b"http/1.1".to_vec()];
    Ok(TlsMaterial {
        ca_pem: ca_cert.pem(),
        server_config: Arc::new(config),
        client_cert_pem: client_cert.pem(),
        client_key_pem: client_key.serialize_pem(),
    })
}
