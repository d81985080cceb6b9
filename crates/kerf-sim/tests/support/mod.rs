//! Fixtures shared by the tests of the dev hub (`hub_devhub`) and of the `kerf-sim serve`
//! binary (`cli_serve`).

use std::path::{Path, PathBuf};

use serde_json::Value;

/// Writes `hub.yaml` into `dir`: cluster `dev` with `config` (YAML lines indented under
/// the cluster, or empty) and one recommendation, `r-1` for `shop/Deployment/web`.
pub fn hub_file(dir: &Path, config: &str) -> anyhow::Result<PathBuf> {
    let path = dir.join("hub.yaml");
    let text = format!(
        r#"
clusters:
  dev:
{config}    recommendations:
      - workload: {{namespace: shop, kind: Deployment, name: web}}
        recommendationID: r-1
        generatedAt: "2026-11-04T10:00:00Z"
        confidence: "0.9"
        dataCoverage: {{covered: 240h, window: 336h}}
        settings: {{window: 336h, cpuPercentile: 90, memoryPercentile: 99, headroomPercent: 15, limits: Keep}}
        containers: [{{name: app, requests: {{cpu: 250m}}}}]
"#
    );
    std::fs::write(&path, text)?;
    Ok(path)
}

/// Sends `request` and decodes the answer's JSON body.
pub async fn json_body(request: reqwest::RequestBuilder) -> anyhow::Result<Value> {
    Ok(request.send().await?.json().await?)
}
