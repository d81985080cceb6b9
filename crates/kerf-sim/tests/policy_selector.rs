//! A RightsizingPolicy must say what it selects (issue 32): the CRD's CEL rules refuse, with
//! 422 Invalid and a message that says what to write instead, a policy without a selector,
//! with `selector: {}`, with only a misspelt field (pruned to `{}` as
//! `kubectl apply --validate=warn` lets the server do), with an empty label selector or with
//! `kinds` alone; `all: true` and each real term are stored. Through kube's real Client.

use kerf_api::policy::{
    LABEL_SELECTOR_EMPTY_MESSAGE, SELECTOR_ALL_WITH_TERMS_MESSAGE,
    SELECTOR_EMPTY_NAMESPACES_MESSAGE, SELECTOR_NO_TERM_MESSAGE, SELECTOR_REQUIRED_MESSAGE,
};
use kerf_sim::sim::{Sim, SimConfig};
use kube::api::{Api, ApiResource, DynamicObject, PostParams};
use serde_json::{Value, json};

const CRDS: &str = include_str!("../../../config/crds/kerf.getkerf.dev.yaml");

/// A cluster (no controllers) serving the kerf CRDs, and the policies' API.
async fn start() -> anyhow::Result<(Sim, Api<DynamicObject>)> {
    let sim = Sim::start(SimConfig {
        run_controllers: false,
        ..SimConfig::default()
    })
    .await?;
    let crds: Api<DynamicObject> = Api::all_with(
        sim.client(),
        &ApiResource::erase::<k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition>(&()),
    );
    for doc in serde_yaml::Deserializer::from_str(CRDS) {
        let v: Value = serde::Deserialize::deserialize(doc)?;
        if !v.is_null() {
            crds.create(&PostParams::default(), &serde_json::from_value(v)?)
                .await?;
        }
    }
    let ar = ApiResource {
        group: "kerf.getkerf.dev".into(),
        version: "v1alpha1".into(),
        api_version: "kerf.getkerf.dev/v1alpha1".into(),
        kind: "RightsizingPolicy".into(),
        plural: "rightsizingpolicies".into(),
    };
    let policies = Api::all_with(sim.client(), &ar);
    Ok((sim, policies))
}

async fn create(api: &Api<DynamicObject>, name: &str, spec: Value) -> kube::Result<DynamicObject> {
    let obj = json!({"apiVersion": "kerf.getkerf.dev/v1alpha1", "kind": "RightsizingPolicy",
        "metadata": {"name": name}, "spec": spec});
    let obj = serde_json::from_value(obj).map_err(kube::Error::SerdeError)?;
    api.create(&PostParams::default(), &obj).await
}

#[tokio::test]
async fn a_policy_that_does_not_say_what_it_selects_is_refused_with_what_to_write()
-> anyhow::Result<()> {
    let (_sim, api) = start().await?;
    let refused = [
        (
            "no-selector",
            json!({"mode": "audit"}),
            "spec",
            SELECTOR_REQUIRED_MESSAGE,
        ),
        (
            "empty",
            json!({"selector": {}}),
            "spec.selector",
            SELECTOR_NO_TERM_MESSAGE,
        ),
        // `namespace:` (no s) is not in the schema: the server prunes it, leaving `{}`.
        (
            "pruned",
            json!({"selector": {"namespace": ["other-team"]}}),
            "spec.selector",
            SELECTOR_NO_TERM_MESSAGE,
        ),
        (
            "kinds-only",
            json!({"selector": {"kinds": ["Deployment"]}}),
            "spec.selector",
            SELECTOR_NO_TERM_MESSAGE,
        ),
        (
            "pruned-beside-kinds",
            json!({"selector": {"namespace": ["shop"], "kinds": ["Deployment"]}}),
            "spec.selector",
            SELECTOR_NO_TERM_MESSAGE,
        ),
        (
            "empty-workload",
            json!({"selector": {"workloadSelector": {}}}),
            "spec.selector.workloadSelector",
            LABEL_SELECTOR_EMPTY_MESSAGE,
        ),
        // `matchLabel:` (no s) is pruned too.
        (
            "pruned-labels",
            json!({"selector": {"namespaceSelector": {"matchLabel": {"team": "a"}}}}),
            "spec.selector.namespaceSelector",
            LABEL_SELECTOR_EMPTY_MESSAGE,
        ),
        (
            "no-namespaces",
            json!({"selector": {"namespaces": []}}),
            "spec.selector",
            SELECTOR_EMPTY_NAMESPACES_MESSAGE,
        ),
        (
            "all-and-more",
            json!({"selector": {"all": true, "namespaces": ["shop"]}}),
            "spec.selector",
            SELECTOR_ALL_WITH_TERMS_MESSAGE,
        ),
    ];
    for (name, spec, field, message) in refused {
        let res = create(&api, name, spec.clone()).await;
        let Err(kube::Error::Api(e)) = res else {
            anyhow::bail!("{name}: {spec} should be refused, got {res:?}");
        };
        assert_eq!(
            (e.code, e.reason.as_str()),
            (422, "Invalid"),
            "{name}: {e:?}"
        );
        let prefix = format!("RightsizingPolicy.kerf.getkerf.dev \"{name}\" is invalid: {field}: ");
        assert!(e.message.starts_with(&prefix), "{name}: {}", e.message);
        assert!(e.message.contains(message), "{name}: {}", e.message);
    }
    assert!(api.list(&Default::default()).await?.items.is_empty());
    Ok(())
}

#[tokio::test]
async fn all_true_and_each_real_term_are_stored() -> anyhow::Result<()> {
    let (_sim, api) = start().await?;
    let stored = [
        ("all", json!({"all": true})),
        (
            "all-deployments",
            json!({"all": true, "kinds": ["Deployment"]}),
        ),
        (
            "namespaces",
            json!({"namespaces": ["shop"], "kinds": ["StatefulSet"]}),
        ),
        (
            "namespace-labels",
            json!({"namespaceSelector": {"matchLabels": {"team": "shop"}}}),
        ),
        (
            "workload-labels",
            json!({"workloadSelector": {"matchExpressions": [{"key": "app", "operator": "Exists"}]}}),
        ),
    ];
    for (name, selector) in stored {
        let created = create(&api, name, json!({"selector": selector})).await?;
        assert_eq!(created.data["spec"]["selector"], selector, "{name}");
    }
    Ok(())
}
