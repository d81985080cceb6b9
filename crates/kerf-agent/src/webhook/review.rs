//! The admission decision: an AdmissionReview v1 in, an AdmissionReview answer out.
//!
//! Pure: reads the [`LiveIndex`] and the request body, nothing else. The pod is decoded
//! into a slim form (owners, labels, container names and resources); everything else in
//! the request is skipped without being built. It never denies: a request it cannot use
//! is allowed unchanged with a warning, or answered with HTTP 400 when it carries no uid.

use std::borrow::Cow;
use std::collections::BTreeMap;

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD as B64;
use k8s_openapi::api::core::v1::ResourceRequirements as K8sResources;
use k8s_openapi::apimachinery::pkg::api::resource::Quantity as K8sQuantity;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, OwnerReference};
use kerf_api::{Resource, ResourceValues, WorkloadKind};
use kerf_decide::quantity::parse_quantity;
use kube::core::admission::{AdmissionRequest, AdmissionResponse, AdmissionReview, Operation};
use kube::core::{DynamicObject, NamespaceResourceScope};
use serde::{Deserialize, Deserializer, Serialize};

use super::WebhookError;
use super::index::{LiveIndex, LiveTarget, ParsedValues, SLOTS, Side, WorkloadLive};

/// The only AdmissionReview version served.
pub const ADMISSION_API_VERSION: &str = "admission.k8s.io/v1";
/// The kind of the request and the answer.
pub const ADMISSION_KIND: &str = "AdmissionReview";
/// Label the Deployment controller puts on its ReplicaSets' pods.
const POD_TEMPLATE_HASH: &str = "pod-template-hash";

/// How a request ended, for metrics (`result` label).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Outcome {
    /// Allowed with a patch that sets live values.
    Patched,
    /// Allowed unchanged.
    Allowed,
    /// Refused (a policy the agent would mark invalid).
    Denied,
    /// The request could not be used; allowed unchanged with a warning, or HTTP 400.
    Error,
}

impl Outcome {
    /// The metric label value.
    pub fn as_str(self) -> &'static str {
        match self {
            Outcome::Patched => "patched",
            Outcome::Allowed => "allowed",
            Outcome::Denied => "denied",
            Outcome::Error => "error",
        }
    }
}

/// The answer to one request.
#[derive(Debug)]
pub enum Answer {
    /// Send this AdmissionReview with HTTP 200.
    Review(Box<AdmissionReview<DynamicObject>>, Outcome),
    /// No uid could be read: send HTTP 400 with this message.
    BadRequest(String),
}

/// A pod as the webhook reads it: only what choosing and building the patch needs.
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
pub struct SlimPod {
    /// Name, generateName, namespace, labels and ownerReferences only.
    #[serde(default, deserialize_with = "slim_meta")]
    pub metadata: ObjectMeta,
    /// Containers.
    #[serde(default)]
    pub spec: SlimPodSpec,
}

/// The containers of a pod.
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct SlimPodSpec {
    /// `spec.containers`.
    #[serde(default)]
    pub containers: Vec<SlimContainer>,
    /// `spec.initContainers` (the restartable ones are sidecars, design D8).
    #[serde(default)]
    pub init_containers: Vec<SlimContainer>,
}

/// One container: name, resources, restart policy.
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct SlimContainer {
    /// Name.
    #[serde(default)]
    pub name: String,
    /// Resources as the pod has them (other resource names are kept by the patch).
    #[serde(default)]
    pub resources: Option<K8sResources>,
    /// `Always` on a sidecar.
    #[serde(default)]
    pub restart_policy: Option<String>,
}

/// The metadata fields the webhook reads; managedFields and annotations are skipped.
#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct SlimMeta {
    name: Option<String>,
    generate_name: Option<String>,
    namespace: Option<String>,
    labels: Option<BTreeMap<String, String>>,
    owner_references: Option<Vec<OwnerReference>>,
}

fn slim_meta<'de, D: Deserializer<'de>>(d: D) -> Result<ObjectMeta, D::Error> {
    let m = SlimMeta::deserialize(d)?;
    Ok(ObjectMeta {
        name: m.name,
        generate_name: m.generate_name,
        namespace: m.namespace,
        labels: m.labels,
        owner_references: m.owner_references,
        ..ObjectMeta::default()
    })
}

impl kube::Resource for SlimPod {
    type DynamicType = ();
    type Scope = NamespaceResourceScope;

    fn kind(_: &()) -> Cow<'_, str> {
        Cow::Borrowed("Pod")
    }
    fn group(_: &()) -> Cow<'_, str> {
        Cow::Borrowed("")
    }
    fn version(_: &()) -> Cow<'_, str> {
        Cow::Borrowed("v1")
    }
    fn plural(_: &()) -> Cow<'_, str> {
        Cow::Borrowed("pods")
    }
    fn meta(&self) -> &ObjectMeta {
        &self.metadata
    }
    fn meta_mut(&mut self) -> &mut ObjectMeta {
        &mut self.metadata
    }
}

/// The answer as the API server reads it: the patch as a base64 string (Go's `[]byte`),
/// `patchType: JSONPatch` with it.
pub fn encode(review: &AdmissionReview<DynamicObject>) -> Result<Vec<u8>, serde_json::Error> {
    #[derive(Serialize)]
    #[serde(rename_all = "camelCase")]
    struct Wire<'a> {
        api_version: &'a str,
        kind: &'a str,
        #[serde(skip_serializing_if = "Option::is_none")]
        response: Option<WireResponse<'a>>,
    }
    #[derive(Serialize)]
    #[serde(rename_all = "camelCase")]
    struct WireResponse<'a> {
        uid: &'a str,
        allowed: bool,
        status: &'a kube::core::Status,
        #[serde(skip_serializing_if = "Option::is_none")]
        patch: Option<String>,
        #[serde(skip_serializing_if = "Option::is_none")]
        patch_type: Option<&'static str>,
        #[serde(skip_serializing_if = "Option::is_none")]
        warnings: Option<&'a Vec<String>>,
    }
    let response = review.response.as_ref().map(|r| WireResponse {
        uid: &r.uid,
        allowed: r.allowed,
        status: &r.result,
        patch: r.patch.as_ref().map(|p| B64.encode(p)),
        patch_type: r.patch.as_ref().map(|_| "JSONPatch"),
        warnings: r.warnings.as_ref(),
    });
    serde_json::to_vec(&Wire {
        api_version: &review.types.api_version,
        kind: &review.types.kind,
        response,
    })
}

/// Answers one request body.
pub fn answer(index: &LiveIndex, body: &[u8]) -> Answer {
    let request = match read_request::<SlimPod>(body, POD_UNCHANGED) {
        Ok(r) => r,
        Err(answer) => return answer,
    };
    match decide(index, &request) {
        Ok(None) => respond(AdmissionResponse::from(&request), Outcome::Allowed),
        Ok(Some(patch)) => match AdmissionResponse::from(&request).with_patch(patch) {
            Ok(resp) => respond(resp, Outcome::Patched),
            Err(e) => allowed_with_warning(&request.uid, POD_UNCHANGED, &WebhookError::Patch(e)),
        },
        Err(e) => allowed_with_warning(&request.uid, POD_UNCHANGED, &e),
    }
}

/// The lead-in of a pod request's warning.
const POD_UNCHANGED: &str = "kerf webhook left the pod unchanged";

/// The request of an AdmissionReview v1 body, or the answer to send when there is none:
/// HTTP 400 without a readable uid, else allowed with a warning led by `lead`.
pub(super) fn read_request<T>(body: &[u8], lead: &str) -> Result<AdmissionRequest<T>, Answer>
where
    T: kube::Resource + serde::de::DeserializeOwned,
{
    let review: AdmissionReview<T> = match serde_json::from_slice(body) {
        Ok(r) => r,
        Err(_) => return Err(unreadable::<T>(body, lead)),
    };
    let types_ok =
        review.types.api_version == ADMISSION_API_VERSION && review.types.kind == ADMISSION_KIND;
    let types = format!("{}/{}", review.types.api_version, review.types.kind);
    let request: AdmissionRequest<T> = match review.try_into() {
        Ok(r) => r,
        Err(_) => return Err(Answer::BadRequest(WebhookError::NoRequest.to_string())),
    };
    if request.uid.is_empty() {
        return Err(Answer::BadRequest(WebhookError::NoUid.to_string()));
    }
    if !types_ok {
        let error = WebhookError::WrongType(types);
        return Err(allowed_with_warning(&request.uid, lead, &error));
    }
    Ok(request)
}

/// The answer with the admission types set.
pub(super) fn respond(mut resp: AdmissionResponse, outcome: Outcome) -> Answer {
    resp.types.api_version = ADMISSION_API_VERSION.to_owned();
    resp.types.kind = ADMISSION_KIND.to_owned();
    Answer::Review(Box::new(resp.into_review()), outcome)
}

/// Allowed unchanged, saying (after `lead`) why the object was not looked at.
pub(super) fn allowed_with_warning(uid: &str, lead: &str, error: &WebhookError) -> Answer {
    let message = format!("{lead}: {error}");
    let mut resp = AdmissionResponse::invalid(&message);
    resp.uid = uid.to_owned();
    resp.allowed = true;
    resp.warnings = Some(vec![message]);
    respond(resp, Outcome::Error)
}

/// The body did not decode as an AdmissionReview: name the failing field, and answer with
/// a review when a uid can still be read.
fn unreadable<T>(body: &[u8], lead: &str) -> Answer
where
    T: kube::Resource + serde::de::DeserializeOwned,
{
    let de = &mut serde_json::Deserializer::from_slice(body);
    let error = match serde_path_to_error::deserialize::<_, AdmissionReview<T>>(de) {
        Err(e) => WebhookError::Decode {
            path: e.path().to_string(),
            message: e.inner().to_string(),
        },
        Ok(_) => WebhookError::Decode {
            path: ".".to_owned(),
            message: "unreadable".to_owned(),
        },
    };
    let uid = serde_json::from_slice::<serde_json::Value>(body)
        .ok()
        .and_then(|v| v.pointer("/request/uid")?.as_str().map(str::to_owned))
        .filter(|u| !u.is_empty());
    match uid {
        Some(uid) => allowed_with_warning(&uid, lead, &error),
        None => Answer::BadRequest(error.to_string()),
    }
}

/// The patch for a pod CREATE, if its workload has live values and some container is
/// still at base.
fn decide(
    index: &LiveIndex,
    req: &AdmissionRequest<SlimPod>,
) -> Result<Option<json_patch::Patch>, WebhookError> {
    let is_pod = req.kind.group.is_empty() && req.kind.kind == "Pod";
    let subresource = req.sub_resource.as_deref().is_some_and(|s| !s.is_empty());
    if req.operation != Operation::Create || !is_pod || subresource {
        return Ok(None);
    }
    let Some(pod) = &req.object else {
        return Err(WebhookError::NoObject);
    };
    let Some(namespace) = req
        .namespace
        .as_deref()
        .or(pod.metadata.namespace.as_deref())
    else {
        return Ok(None);
    };
    let Some(live) = workload_of(index, namespace, pod) else {
        return Ok(None);
    };
    let mut ops = Vec::new();
    container_ops(live, &pod.spec.containers, "containers", &mut ops)?;
    container_ops(live, &pod.spec.init_containers, "initContainers", &mut ops)?;
    Ok((!ops.is_empty()).then_some(json_patch::Patch(ops)))
}

/// The live values of the workload that controls the pod: a StatefulSet or DaemonSet
/// directly, a ReplicaSet through its Deployment.
fn workload_of<'a>(
    index: &'a LiveIndex,
    namespace: &str,
    pod: &SlimPod,
) -> Option<&'a WorkloadLive> {
    let owner = pod
        .metadata
        .owner_references
        .as_deref()?
        .iter()
        .find(|o| o.controller == Some(true) && o.api_version == "apps/v1")?;
    let (kind, name) = match owner.kind.as_str() {
        "StatefulSet" => (WorkloadKind::StatefulSet, owner.name.as_str()),
        "DaemonSet" => (WorkloadKind::DaemonSet, owner.name.as_str()),
        "ReplicaSet" => (
            WorkloadKind::Deployment,
            deployment_of(index, namespace, &owner.name, pod)?,
        ),
        _ => return None,
    };
    index.live_for(namespace, kind, name).map(AsRef::as_ref)
}

/// The Deployment of a ReplicaSet: from the index, or, for a ReplicaSet the index has not
/// seen yet, from its name `<deployment>-<pod-template-hash>`.
fn deployment_of<'a>(
    index: &'a LiveIndex,
    namespace: &str,
    replicaset: &'a str,
    pod: &SlimPod,
) -> Option<&'a str> {
    if let Some(d) = index.deployment_of(namespace, replicaset) {
        return Some(d);
    }
    let hash = pod.metadata.labels.as_ref()?.get(POD_TEMPLATE_HASH)?;
    replicaset
        .strip_suffix(hash.as_str())?
        .strip_suffix('-')
        .filter(|d| !d.is_empty())
}

fn container_ops(
    live: &WorkloadLive,
    containers: &[SlimContainer],
    field: &str,
    ops: &mut Vec<json_patch::PatchOperation>,
) -> Result<(), WebhookError> {
    let sidecars_only = field == "initContainers";
    for (i, c) in containers.iter().enumerate() {
        if sidecars_only && c.restart_policy.as_deref() != Some("Always") {
            continue;
        }
        let Some(target) = live.container(&c.name) else {
            continue;
        };
        let current = incoming_values(c)?;
        // Design D20: patch only a pod still at base; one already at live is left alone.
        if current == target.live || current != target.base {
            continue;
        }
        let value = serde_json::to_value(live_resources(c.resources.as_ref(), target))
            .map_err(WebhookError::Encode)?;
        let index = i.to_string();
        let path =
            json_patch::jsonptr::PointerBuf::from_tokens(["spec", field, &index, "resources"]);
        ops.push(json_patch::PatchOperation::Add(json_patch::AddOperation {
            path,
            value,
        }));
    }
    Ok(())
}

/// The incoming container's CPU and memory, parsed.
fn incoming_values(c: &SlimContainer) -> Result<ParsedValues, WebhookError> {
    let mut out = [None; 4];
    let Some(res) = &c.resources else {
        return Ok(out);
    };
    for (slot, (side, resource)) in out.iter_mut().zip(SLOTS) {
        let map = match side {
            Side::Requests => res.requests.as_ref(),
            Side::Limits => res.limits.as_ref(),
        };
        let Some(q) = map.and_then(|m| m.get(resource.as_str())) else {
            continue;
        };
        let v = parse_quantity(resource, &q.0).map_err(|source| WebhookError::PodQuantity {
            container: c.name.clone(),
            field: side.as_str(),
            resource,
            source,
        })?;
        *slot = Some(v);
    }
    Ok(out)
}

/// The container's resources with CPU and memory of requests and limits set to the live
/// values, both sides together (D20). A resource absent from the live values is removed
/// (a removed limit reaches the new pod, AP-18); other resource names and claims stay.
fn live_resources(current: Option<&K8sResources>, target: &LiveTarget) -> K8sResources {
    let mut res = current.cloned().unwrap_or_default();
    res.requests = merged(res.requests.take(), &target.requests);
    res.limits = merged(res.limits.take(), &target.limits);
    res
}

fn merged(
    current: Option<BTreeMap<String, K8sQuantity>>,
    live: &ResourceValues,
) -> Option<BTreeMap<String, K8sQuantity>> {
    let mut map = current.unwrap_or_default();
    for resource in [Resource::Cpu, Resource::Memory] {
        match live.get(resource) {
            Some(q) => {
                map.insert(resource.as_str().to_owned(), K8sQuantity(q.0.clone()));
            }
            None => {
                map.remove(resource.as_str());
            }
        }
    }
    (!map.is_empty()).then_some(map)
}
