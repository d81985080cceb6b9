//! A test certificate authority that signs serving certificates for 127.0.0.1.

use std::sync::Arc;

use rcgen::{BasicConstraints, CertificateParams, DnType, IsCa, Issuer, KeyPair, SanType};

/// A self-signed CA.
pub struct TestCa {
    params: CertificateParams,
    key: KeyPair,
    pem: String,
}

/// A serving certificate signed by a [`TestCa`].
pub struct Leaf {
    /// The certificate, PEM.
    pub cert_pem: String,
    /// Its private key, PEM (PKCS#8).
    pub key_pem: String,
    /// The certificate, DER.
    pub cert_der: Vec<u8>,
    /// Its private key, DER (PKCS#8).
    pub key_der: Vec<u8>,
}

impl TestCa {
    /// A fresh CA named `kerf-test-ca`.
    pub fn new() -> anyhow::Result<TestCa> {
        let mut params = CertificateParams::new(Vec::<String>::new())?;
        params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        params
            .distinguished_name
            .push(DnType::CommonName, "kerf-test-ca");
        let key = KeyPair::generate()?;
        let pem = params.self_signed(&key)?.pem();
        Ok(TestCa { params, key, pem })
    }

    /// The CA certificate, PEM (what clients trust; a webhook's caBundle).
    pub fn pem(&self) -> &str {
        &self.pem
    }

    /// The CA's private key, PEM (PKCS#8), for a CA handed to a chart or a signer.
    pub fn key_pem(&self) -> String {
        self.key.serialize_pem()
    }

    /// A TLS client configuration (rustls with ring) that trusts this CA alone.
    pub fn client_config(&self) -> anyhow::Result<rustls::ClientConfig> {
        use rustls::pki_types::CertificateDer;
        use rustls::pki_types::pem::PemObject as _;
        let mut roots = rustls::RootCertStore::empty();
        roots.add(CertificateDer::from_pem_slice(self.pem.as_bytes())?)?;
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        Ok(rustls::ClientConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()?
            .with_root_certificates(roots)
            .with_no_client_auth())
    }

    /// A serving certificate for the DNS name `dns` and the IP 127.0.0.1, with common
    /// name `cn`.
    pub fn leaf(&self, dns: &str, cn: &str) -> anyhow::Result<Leaf> {
        let mut params = CertificateParams::new(vec![dns.to_owned()])?;
        params
            .subject_alt_names
            .push(SanType::IpAddress([127, 0, 0, 1].into()));
        params.distinguished_name.push(DnType::CommonName, cn);
        let key = KeyPair::generate()?;
        let issuer = Issuer::from_params(&self.params, &self.key);
        let cert = params.signed_by(&key, &issuer)?;
        Ok(Leaf {
            cert_pem: cert.pem(),
            key_pem: key.serialize_pem(),
            cert_der: cert.der().to_vec(),
            key_der: key.serialize_der(),
        })
    }
}

/// A serving certificate and its key for 127.0.0.1, written once per test process into the
/// temporary directory, for the agents tests start (in-place changes wait while the
/// agent's webhook has no usable certificate): `(certificate file, key file)`.
pub fn webhook_cert_files() -> anyhow::Result<(std::path::PathBuf, std::path::PathBuf)> {
    static FILES: std::sync::OnceLock<Result<(std::path::PathBuf, std::path::PathBuf), String>> =
        std::sync::OnceLock::new();
    let written = FILES.get_or_init(|| {
        let write = || -> anyhow::Result<_> {
            let dir =
                std::env::temp_dir().join(format!("kerf-test-webhook-{}", std::process::id()));
            std::fs::create_dir_all(&dir)?;
            let leaf = TestCa::new()?.leaf("kerf-agent-webhook.kerf-system.svc", "kerf-agent")?;
            let (cert, key) = (dir.join("tls.crt"), dir.join("tls.key"));
            std::fs::write(&cert, leaf.cert_pem)?;
            std::fs::write(&key, leaf.key_pem)?;
            Ok((cert, key))
        };
        write().map_err(|e| format!("cannot write the test webhook certificate: {e}"))
    });
    written.clone().map_err(anyhow::Error::msg)
}
