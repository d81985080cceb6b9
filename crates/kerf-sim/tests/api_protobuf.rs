//! Protobuf request bodies (`application/vnd.kubernetes.protobuf`), which kubectl's typed
//! clients send for `kubectl create namespace|deployment|pdb|configmap|secret`: decoded
//! for the built-in kinds, answered in JSON; corrupt bodies get the decoder's 400; custom
//! resources, which have no protobuf encoding, get 415.

use kerf_sim::sim::Sim;
use kerf_testkit::api_sim;
use kube::api::PostParams;

const PROTOBUF: &str = "application/vnd.kubernetes.protobuf";

fn kubectl(sim: &Sim, args: &str) -> anyhow::Result<(bool, String)> {
    let args: Vec<&str> = args.split_whitespace().collect();
    kerf_testkit::kubectl(sim.kubeconfig_path(), &args, None)
}

/// A length-delimited protobuf field (lengths under 128).
fn field(num: u8, value: &[u8]) -> Vec<u8> {
    let mut out = vec![num << 3 | 2, value.len() as u8];
    out.extend_from_slice(value);
    out
}

/// A protobuf body: the magic and a runtime.Unknown around `raw`.
fn envelope(api_version: &str, kind: &str, raw: &[u8]) -> Vec<u8> {
    let type_meta = [field(1, api_version.as_bytes()), field(2, kind.as_bytes())].concat();
    [b"k8s\x00".to_vec(), field(1, &type_meta), field(2, raw)].concat()
}

/// Sends a body and returns the answer's status code and text (the Status message of an
/// error).
async fn send(
    sim: &Sim,
    method: &str,
    path: &str,
    content_type: &str,
    body: Vec<u8>,
) -> anyhow::Result<(u16, String)> {
    let req = http::Request::builder()
        .method(method)
        .uri(path)
        .header("content-type", content_type)
        .header("accept", format!("{PROTOBUF},application/json"))
        .body(body)?;
    match sim.client().request_text(req).await {
        Ok(text) => Ok((200, text)),
        Err(kube::Error::Api(s)) => Ok((s.code, s.message)),
        Err(e) => Err(e.into()),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kubectl_create_generators_create_their_objects() -> anyhow::Result<()> {
    let sim = api_sim().await?;
    let steps = [
        ("create namespace x", "namespace/x created"),
        (
            "create deployment web -n x --image=registry.k8s.io/pause:3.10 --replicas=2",
            "deployment.apps/web created",
        ),
        (
            "create deployment idle -n x --image=registry.k8s.io/pause:3.10 --replicas=0",
            "deployment.apps/idle created",
        ),
        (
            "create pdb web -n x --selector=app=web --min-available=1",
            "poddisruptionbudget.policy/web created",
        ),
        (
            "create configmap cm -n x --from-literal=a=b",
            "configmap/cm created",
        ),
        (
            "create secret generic s -n x --from-literal=a=b",
            "secret/s created",
        ),
    ];
    for (args, want) in steps {
        let (ok, out) = kubectl(&sim, args)?;
        assert!(ok && out.contains(want), "{args}: {out}");
    }
    let checks = [
        ("get namespace x -o name", "namespace/x"),
        (
            "get -n x deployment web -o jsonpath={.spec.replicas},{.spec.selector.matchLabels.app},{.spec.template.spec.containers[0].image}",
            "2,web,registry.k8s.io/pause:3.10",
        ),
        // a pointer field set to zero stays zero instead of taking its default
        ("get -n x deployment idle -o jsonpath={.spec.replicas}", "0"),
        (
            "get -n x pdb web -o jsonpath={.spec.minAvailable},{.spec.selector.matchLabels.app}",
            "1,web",
        ),
        ("get -n x configmap cm -o jsonpath={.data.a}", "b"),
        ("get -n x secret s -o jsonpath={.data.a}", "Yg=="),
    ];
    for (args, want) in checks {
        let (ok, out) = kubectl(&sim, args)?;
        assert_eq!((ok, out.trim()), (true, want), "{args}");
    }
    // the server's errors reach kubectl as they do from a real server
    let (ok, out) = kubectl(&sim, "create namespace x")?;
    assert!(
        !ok && out.contains("AlreadyExists") && out.contains("namespaces \"x\" already exists"),
        "{out}"
    );
    Ok(())
}

#[tokio::test]
async fn a_protobuf_update_and_scale_write_the_object() -> anyhow::Result<()> {
    let sim = api_sim().await?;
    let meta = field(1, b"cm");
    let entry = [field(1, b"a"), field(2, b"1")].concat();
    let raw = [field(1, &meta), field(2, &entry)].concat();
    let body = envelope("v1", "ConfigMap", &raw);
    let path = "/api/v1/namespaces/default/configmaps";
    assert_eq!(send(&sim, "POST", path, PROTOBUF, body).await?.0, 200);
    let entry = [field(1, b"a"), field(2, b"2")].concat();
    let raw = [field(1, &meta), field(2, &entry)].concat();
    let (code, text) = send(
        &sim,
        "PUT",
        &format!("{path}/cm"),
        PROTOBUF,
        envelope("v1", "ConfigMap", &raw),
    )
    .await?;
    assert_eq!(code, 200, "{text}");
    let cm: serde_json::Value = serde_json::from_str(&text)?;
    assert_eq!(cm["data"], serde_json::json!({"a": "2"}));

    let deployments: kube::Api<k8s_openapi::api::apps::v1::Deployment> =
        kube::Api::namespaced(sim.client(), "default");
    let d = serde_json::json!({"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "web"},
        "spec": {"replicas": 1, "selector": {"matchLabels": {"app": "web"}},
            "template": {"metadata": {"labels": {"app": "web"}},
                "spec": {"containers": [{"name": "app", "image": "registry.k8s.io/pause:3.10"}]}}}});
    deployments
        .create(&PostParams::default(), &serde_json::from_value(d)?)
        .await?;
    // autoscaling/v1 Scale{metadata{name web}, spec{replicas 3}}
    let raw = [field(1, &field(1, b"web")), field(2, &[0x08, 0x03])].concat();
    let body = envelope("autoscaling/v1", "Scale", &raw);
    let path = "/apis/apps/v1/namespaces/default/deployments/web/scale";
    let (code, text) = send(&sim, "PUT", path, PROTOBUF, body).await?;
    assert_eq!(code, 200, "{text}");
    let d = deployments.get("web").await?;
    assert_eq!(d.spec.and_then(|s| s.replicas), Some(3));
    Ok(())
}

#[tokio::test]
async fn a_corrupt_protobuf_body_gets_400_with_the_decoders_message() -> anyhow::Result<()> {
    let sim = api_sim().await?;
    let path = "/api/v1/namespaces";
    // metadata.name (field 1 of ObjectMeta) sent as a varint
    let body = envelope("v1", "Namespace", &field(1, &[0x08, 0x01]));
    assert_eq!(
        send(&sim, "POST", path, PROTOBUF, body).await?,
        (
            400,
            "Namespace in version \"v1\" cannot be handled as a Namespace: proto: wrong wireType = 0 for field Name".to_string()
        )
    );
    // the Unknown's raw field claims more bytes than there are
    let body = b"k8s\x00\x0a\x0f\x0a\x02v1\x12\x09Namespace\x12\x19\x0a\x11".to_vec();
    assert_eq!(
        send(&sim, "POST", path, PROTOBUF, body).await?,
        (
            400,
            "the object provided is unrecognized (must be of type Namespace): unexpected EOF (6b3873000a0f0a02763112094e616d65737061636512190a11)".to_string()
        )
    );
    let body = b"{\"kind\":\"Namespace\"}".to_vec();
    let (code, message) = send(&sim, "POST", path, PROTOBUF, body).await?;
    assert_eq!(code, 400);
    assert!(
        message.contains(
            "provided data does not appear to be a protobuf message, expected prefix [107 56 115 0]"
        ),
        "{message}"
    );
    Ok(())
}

#[tokio::test]
async fn only_custom_resources_refuse_protobuf_with_415() -> anyhow::Result<()> {
    let sim = api_sim().await?;
    let text = std::fs::read_to_string(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../config/crds/kerf.getkerf.dev.yaml"
    ))?;
    let crds: kube::Api<kube::api::DynamicObject> = kube::Api::all_with(
        sim.client(),
        &kube::api::ApiResource::erase::<k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition>(&()),
    );
    for doc in serde_yaml::Deserializer::from_str(&text) {
        let v: serde_json::Value = serde::Deserialize::deserialize(doc)?;
        if !v.is_null() {
            crds.create(&PostParams::default(), &serde_json::from_value(v)?)
                .await?;
        }
    }
    let body = envelope(
        "kerf.getkerf.dev/v1alpha1",
        "RightsizingPolicy",
        &field(1, &field(1, b"x")),
    );
    let path = "/apis/kerf.getkerf.dev/v1alpha1/rightsizingpolicies";
    assert_eq!(
        send(&sim, "POST", path, PROTOBUF, body).await?,
        (
            415,
            "the body of the request was in an unknown format - accepted media types include: application/json, application/yaml".to_string()
        )
    );
    // a built-in kind names protobuf among the formats it accepts
    let (code, message) = send(
        &sim,
        "POST",
        "/api/v1/namespaces",
        "text/plain",
        b"x".to_vec(),
    )
    .await?;
    assert_eq!(
        (code, message.as_str()),
        (
            415,
            "the body of the request was in an unknown format - accepted media types include: application/json, application/yaml, application/vnd.kubernetes.protobuf"
        )
    );
    Ok(())
}
