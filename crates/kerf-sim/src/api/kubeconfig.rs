//! The kubeconfig written for clients of the simulated cluster.

use std::path::Path;

use base64::Engine;

/// The token clients present (the server accepts any).
pub const TOKEN: &str = "kerf-sim-admin-token";

/// Renders a kubeconfig for `server` trusting `ca_pem`, with context `kerf-sim`.
pub fn render(server: &str, ca_pem: &str) -> String {
    let ca = base64::engine::general_purpose::STANDARD.encode(ca_pem);
    format!(
        "apiVersion: v1
kind: Config
clusters:
- name: kerf-sim
  cluster:
    server: {server}
    certificate-authority-data: {ca}
users:
- name: kerf-sim-admin
  user:
    token: {TOKEN}
contexts:
- name: kerf-sim
  context:
    cluster: kerf-sim
    user: kerf-sim-admin
    namespace: default
current-context: kerf-sim
"
    )
}

/// Writes the kubeconfig to `path` (creating parent directories).
pub fn write(path: &Path, server: &str, ca_pem: &str) -> std::io::Result<()> {
    if let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir)?;
    }
    std::fs::write(path, render(server, ca_pem))
}
