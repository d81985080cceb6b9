//! What a real API server does with custom resources, that kerf-sim matches: integer
//! formats checked with the server's words (422), unknown fields pruned and named in
//! `Warning` headers (or refused under `fieldValidation=Strict`), and the OpenAPI that
//! `kubectl explain` reads (v3, and v2 as JSON).

use kerf_sim::sim::{Sim, SimConfig};
use serde_json::{Value, json};

const CRDS: &str = include_str!("../../../config/crds/kerf.getkerf.dev.yaml");
const POLICIES: &str = "/apis/kerf.getkerf.dev/v1alpha1/rightsizingpolicies";

/// A cluster (no controllers) serving the kerf CRDs.
async fn start() -> anyhow::Result<Sim> {
    let sim = Sim::start(SimConfig {
        run_controllers: false,
        ..SimConfig::default()
    })
    .await?;
    for doc in serde_yaml::Deserializer::from_str(CRDS) {
        let crd = Value::deserialize(doc)?;
        let path = "/apis/apiextensions.k8s.io/v1/customresourcedefinitions";
        let (code, _, body) = send(&sim, "POST", path, "application/json", &crd).await?;
        anyhow::ensure!(code == 201, "creating a CRD: {code} {body}");
    }
    Ok(sim)
}

use serde::Deserialize;

/// One request as curl sends it; the status, the `Warning` headers and the parsed body.
async fn send(
    sim: &Sim,
    method: &str,
    path: &str,
    content_type: &str,
    body: &Value,
) -> anyhow::Result<(u16, Vec<String>, Value)> {
    let mut b = kerf_testkit::curl(sim, method, path)?;
    if !body.is_null() {
        b = b
            .header("content-type", content_type)
            .body(serde_json::to_vec(body)?);
    }
    let resp = b.send().await?;
    let status = resp.status().as_u16();
    let warnings = resp
        .headers()
        .get_all("warning")
        .iter()
        .map(|v| v.to_str().unwrap_or_default().to_owned())
        .collect();
    let text = resp.text().await?;
    Ok((
        status,
        warnings,
        serde_json::from_str(&text).unwrap_or(Value::String(text)),
    ))
}

/// A policy; one whose `spec` has no selector selects every workload (`all: true`), as
/// the CRD requires a selector.
fn policy(name: &str, mut spec: Value) -> Value {
    if let Some(s) = spec.as_object_mut() {
        s.entry("selector").or_insert_with(|| json!({"all": true}));
    }
    json!({"apiVersion": "kerf.getkerf.dev/v1alpha1", "kind": "RightsizingPolicy",
        "metadata": {"name": name}, "spec": spec})
}

#[tokio::test]
async fn an_integer_beyond_its_int32_format_is_422_in_the_servers_words() -> anyhow::Result<()> {
    let sim = start().await?;
    let bad = policy("bad", json!({"priority": 4_294_967_296_i64}));
    let (code, _, status) = send(&sim, "POST", POLICIES, "application/json", &bad).await?;
    assert_eq!(code, 422, "{status}");
    assert_eq!(status["reason"], "Invalid");
    assert_eq!(
        status["message"],
        "RightsizingPolicy.kerf.getkerf.dev \"bad\" is invalid: <nil>: Invalid value: \"\": \
         Checked value must be of type integer with format int32 in spec.priority"
    );
    assert_eq!(
        status["details"]["causes"],
        json!([{"reason": "FieldValueInvalid", "field": "<nil>",
            "message": "Invalid value: \"\": Checked value must be of type integer with format int32 in spec.priority"}])
    );
    assert_eq!(status["details"]["kind"], "RightsizingPolicy");
    let fits = policy("fits", json!({"priority": 2_147_483_647_i64}));
    let (code, _, body) = send(&sim, "POST", POLICIES, "application/json", &fits).await?;
    assert_eq!(code, 201, "{body}");
    Ok(())
}

#[tokio::test]
async fn unknown_fields_are_pruned_and_named_in_warning_headers() -> anyhow::Result<()> {
    let sim = start().await?;
    let body = policy(
        "p",
        json!({"priority": 1, "x": true, "guardrails": {"cooldown": "1h", "y": 2}}),
    );
    let (code, warnings, created) = send(&sim, "POST", POLICIES, "application/json", &body).await?;
    assert_eq!(code, 201, "{created}");
    assert_eq!(
        warnings,
        [
            r#"299 - "unknown field \"spec.guardrails.y\"""#,
            r#"299 - "unknown field \"spec.x\"""#
        ]
    );
    assert_eq!(
        created["spec"],
        json!({"priority": 1, "guardrails": {"cooldown": "1h"}, "selector": {"all": true}})
    );
    let (_, _, stored) = send(&sim, "GET", &format!("{POLICIES}/p"), "", &Value::Null).await?;
    assert_eq!(stored["spec"], created["spec"]);

    let patch = json!({"spec": {"mode": "audit", "z": 1}});
    let path = format!("{POLICIES}/p");
    let (code, warnings, patched) =
        send(&sim, "PATCH", &path, "application/merge-patch+json", &patch).await?;
    assert_eq!(code, 200, "{patched}");
    assert_eq!(warnings, [r#"299 - "unknown field \"spec.z\"""#]);
    assert!(patched["spec"].get("z").is_none(), "{patched}");

    let quiet = policy("q", json!({"x": true}));
    let path = format!("{POLICIES}?fieldValidation=Ignore");
    let (code, warnings, _) = send(&sim, "POST", &path, "application/json", &quiet).await?;
    assert_eq!((code, warnings.len()), (201, 0));

    let strict = policy("s", json!({"x": true}));
    let path = format!("{POLICIES}?fieldValidation=Strict");
    let (code, _, status) = send(&sim, "POST", &path, "application/json", &strict).await?;
    assert_eq!(code, 400, "{status}");
    assert_eq!(status["reason"], "BadRequest");
    assert_eq!(
        status["message"],
        "RightsizingPolicy in version \"v1alpha1\" cannot be handled as a RightsizingPolicy: \
         strict decoding error: unknown field \"spec.x\""
    );
    Ok(())
}

/// The schema and CEL rules a write is checked against are kept between requests; a CRD
/// update takes effect at the next write, as on a real API server.
#[tokio::test]
async fn a_crd_update_changes_the_validation_of_the_next_write() -> anyhow::Result<()> {
    let sim = start().await?;
    let seven = policy("seven", json!({"priority": 7}));
    let (code, _, body) = send(&sim, "POST", POLICIES, "application/json", &seven).await?;
    assert_eq!(code, 201, "{body}");

    let crd_path = "/apis/apiextensions.k8s.io/v1/customresourcedefinitions/\
                    rightsizingpolicies.kerf.getkerf.dev";
    let (code, _, mut crd) = send(&sim, "GET", crd_path, "", &Value::Null).await?;
    assert_eq!(code, 200, "{crd}");
    let spec = &mut crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["spec"];
    spec["x-kubernetes-validations"] = json!([{"rule": "!has(self.priority) || self.priority != 7", "message": "seven is refused"}]);
    let (code, _, body) = send(&sim, "PUT", crd_path, "application/json", &crd).await?;
    assert_eq!(code, 200, "{body}");

    let again = policy("seven-again", json!({"priority": 7}));
    let (code, _, status) = send(&sim, "POST", POLICIES, "application/json", &again).await?;
    assert_eq!(code, 422, "{status}");
    assert!(
        status["message"]
            .as_str()
            .is_some_and(|m| m.contains("seven is refused")),
        "{status}"
    );
    let eight = policy("eight", json!({"priority": 8}));
    let (code, _, body) = send(&sim, "POST", POLICIES, "application/json", &eight).await?;
    assert_eq!(code, 201, "{body}");
    Ok(())
}

/// Runs kubectl against the cluster; fails with what to install when kubectl is missing.
fn kubectl(sim: &Sim, args: &[&str], stdin: Option<&str>) -> anyhow::Result<(bool, String)> {
    kerf_testkit::kubectl(sim.kubeconfig_path(), args, stdin)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kubectl_explain_prints_the_crds_descriptions() -> anyhow::Result<()> {
    let sim = start().await?;
    let (ok, out) = kubectl(
        &sim,
        &["explain", "rightsizingpolicy.spec.guardrails"],
        None,
    )?;
    assert!(ok, "{out}");
    for expected in [
        "GROUP:      kerf.getkerf.dev",
        "KIND:       RightsizingPolicy",
        "VERSION:    v1alpha1",
        "Limits on what a change may do.",
        "cooldown",
        "Minimum time between two changes",
        "rollback\t<Object>",
        "The health watch after a change.",
    ] {
        assert!(out.contains(expected), "{expected:?} not in:\n{out}");
    }
    let (ok, out) = kubectl(&sim, &["explain", "rsp"], None)?;
    assert!(ok, "{out}");
    assert!(out.contains("metadata") && out.contains("spec"), "{out}");

    let (ok, out) = kubectl(&sim, &["get", "--raw", "/openapi/v2"], None)?;
    assert!(ok, "{out}");
    let v2: Value = serde_json::from_str(&out)?;
    let def = &v2["definitions"]["dev.getkerf.kerf.v1alpha1.RightsizingPolicy"];
    assert_eq!(
        def["properties"]["spec"]["properties"]["guardrails"]["description"],
        "Limits on what a change may do."
    );
    assert_eq!(
        def["properties"]["metadata"]["allOf"][0]["$ref"],
        "#/definitions/io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta"
    );
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kubectl_shows_the_unknown_field_warning_and_strict_refusal() -> anyhow::Result<()> {
    let sim = start().await?;
    let manifest = "apiVersion: kerf.getkerf.dev/v1alpha1
kind: RightsizingPolicy
metadata:
  name: typo
spec:
  selector: {all: true}
  priorty: 3
";
    let (ok, out) = kubectl(
        &sim,
        &["create", "--validate=warn", "-f", "-"],
        Some(manifest),
    )?;
    assert!(ok, "{out}");
    assert!(
        out.contains("Warning: unknown field \"spec.priorty\""),
        "{out}"
    );
    let (ok, out) = kubectl(&sim, &["delete", "rsp", "typo"], None)?;
    assert!(ok, "{out}");
    let (ok, out) = kubectl(&sim, &["create", "-f", "-"], Some(manifest))?;
    assert!(
        !ok,
        "kubectl's default strict validation accepted it: {out}"
    );
    assert!(
        out.contains("strict decoding error: unknown field \"spec.priorty\""),
        "{out}"
    );
    Ok(())
}
