//! The OpenAPI documents kubectl reads: `/openapi/v3` (the index), one v3 document per
//! group-version, and the v2 document at `/openapi/v2` (JSON).
//!
//! Every document names the operations of each kind with its `fieldValidation` parameter
//! (what kubectl checks before validating server-side). The kinds CRDs define also get
//! their collection path and their schema, as the real server publishes them: the CRD's
//! `openAPIV3Schema` with `x-kubernetes-group-version-kind`, `metadata` pointing at
//! `ObjectMeta` and the standard descriptions of `apiVersion` and `kind`, so that
//! `kubectl explain rightsizingpolicy.spec.guardrails` prints the CRD's descriptions.
//! The built-in kinds have no component schemas: kubectl then computes strategic merge
//! patches from its compiled-in types.

use serde_json::{Map, Value, json};

use crate::context::SimContext;
use crate::store::Gvr;

const API_VERSION_DESCRIPTION: &str = "APIVersion defines the versioned schema of this representation of an object. Servers should convert recognized schemas to the latest internal value, and may reject unrecognized values. More info: https://git.k8s.io/community/contributors/devel/sig-architecture/api-conventions.md#resources";
const KIND_DESCRIPTION: &str = "Kind is a string value representing the REST resource this object represents. Servers may infer this from the endpoint the client submits requests to. Cannot be updated. In CamelCase. More info: https://git.k8s.io/community/contributors/devel/sig-architecture/api-conventions.md#types-kinds";
const METADATA_DESCRIPTION: &str = "Standard object's metadata. More info: https://git.k8s.io/community/contributors/devel/sig-architecture/api-conventions.md#metadata";
const OBJECT_META: &str = "io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta";

/// `/openapi/v3`: the index of group-version documents.
pub fn v3_root(ctx: &SimContext) -> Value {
    let mut gvs: Vec<(String, String)> = ctx
        .store
        .kinds()
        .iter()
        .map(|g| (g.group.to_string(), g.version.to_string()))
        .collect();
    gvs.sort();
    gvs.dedup();
    let hash = ctx.store.resource_version();
    let paths: Map<String, Value> = gvs
        .into_iter()
        .map(|(g, v)| {
            let p = gv_path(&g, &v);
            let url = format!("/openapi/v3/{p}?hash={hash}");
            (p, json!({"serverRelativeURL": url}))
        })
        .collect();
    json!({"paths": paths})
}

fn gv_path(group: &str, version: &str) -> String {
    if group.is_empty() {
        format!("api/{version}")
    } else {
        format!("apis/{group}/{version}")
    }
}

/// `/openapi/v3/{api/v1|apis/g/v}`; `None` for a group-version nobody serves.
pub fn v3_group_version(ctx: &SimContext, group: &str, version: &str) -> Option<Value> {
    let kinds: Vec<Gvr> = ctx
        .store
        .kinds()
        .into_iter()
        .filter(|g| g.group == group && g.version == version)
        .collect();
    if kinds.is_empty() {
        return None;
    }
    let refs = "#/components/schemas/";
    let mut paths = Map::new();
    let mut schemas = Map::new();
    for g in &kinds {
        paths.extend(paths_of(g, false));
        if let Some(schema) = custom_schema(ctx, g, refs) {
            paths.extend(paths_of(g, true));
            schemas.insert(definition_name(g), schema);
            schemas.insert(OBJECT_META.into(), object_meta());
        }
    }
    Some(json!({
        "openapi": "3.0.0",
        "info": {"title": "Kubernetes", "version": format!("v1.{}.0", ctx.config.kubernetes_minor)},
        "paths": paths,
        "components": {"schemas": schemas},
    }))
}

/// `/openapi/v2` as JSON: every kind's operations and the CRD kinds' definitions.
pub fn v2(ctx: &SimContext) -> Value {
    let refs = "#/definitions/";
    let mut paths = Map::new();
    let mut definitions = Map::new();
    for g in ctx.store.kinds() {
        paths.extend(paths_of(&g, false));
        if let Some(schema) = custom_schema(ctx, &g, refs) {
            paths.extend(paths_of(&g, true));
            definitions.insert(definition_name(&g), schema);
            definitions.insert(OBJECT_META.into(), object_meta());
        }
    }
    json!({
        "swagger": "2.0",
        "info": {"title": "Kubernetes", "version": format!("v1.{}.0", ctx.config.kubernetes_minor)},
        "paths": paths,
        "definitions": definitions,
    })
}

/// The item path (get, put, patch, delete) or, with `collection`, the collection path
/// (list, create) of a kind, each operation with its parameters and GVK.
fn paths_of(g: &Gvr, collection: bool) -> Map<String, Value> {
    let prefix = if g.group.is_empty() {
        format!("/api/{}", g.version)
    } else {
        format!("/apis/{}/{}", g.group, g.version)
    };
    let ns = if g.namespaced {
        "/namespaces/{namespace}"
    } else {
        ""
    };
    let collection_path = format!("{prefix}{ns}/{}", g.resource);
    let gvk = json!({"group": g.group, "version": g.version, "kind": g.kind});
    let params = json!([
        {"name": "fieldValidation", "in": "query", "schema": {"type": "string", "uniqueItems": true}},
        {"name": "fieldManager", "in": "query", "schema": {"type": "string", "uniqueItems": true}},
        {"name": "dryRun", "in": "query", "schema": {"type": "string", "uniqueItems": true}},
        {"name": "force", "in": "query", "schema": {"type": "boolean", "uniqueItems": true}},
    ]);
    let op = |action: &str, id: &str| json!({"operationId": format!("{id}{}", g.kind), "parameters": params, "responses": {"200": {"description": "OK"}}, "x-kubernetes-action": action, "x-kubernetes-group-version-kind": gvk});
    let mut out = Map::new();
    if collection {
        out.insert(
            collection_path,
            json!({"get": op("list", "list"), "post": op("post", "create")}),
        );
    } else {
        out.insert(
            format!("{collection_path}/{{name}}"),
            json!({"get": op("get", "read"), "put": op("put", "replace"), "patch": op("patch", "patch"), "delete": op("delete", "delete")}),
        );
    }
    out
}

/// The definition name of a kind, as the real server names CRD kinds: the group's labels
/// reversed, the version and the kind (`dev.getkerf.kerf.v1alpha1.RightsizingPolicy`).
pub fn definition_name(g: &Gvr) -> String {
    let group: Vec<&str> = g.group.split('.').rev().collect();
    format!("{}.{}.{}", group.join("."), g.version, g.kind)
}

/// The published schema of a CRD kind (`None` for a built-in kind or a version without a
/// schema), its references pointing at `refs`.
fn custom_schema(ctx: &SimContext, g: &Gvr, refs: &str) -> Option<Value> {
    let crd = super::crd_schema::crd_for(ctx, g)?;
    let mut schema = crd.schema(g.version).filter(|s| s.is_object())?.clone();
    schema["x-kubernetes-group-version-kind"] =
        json!([{"group": g.group, "version": g.version, "kind": g.kind}]);
    if !schema["properties"].is_object() {
        schema["properties"] = json!({});
    }
    let props = &mut schema["properties"];
    props["apiVersion"] = json!({"type": "string", "description": API_VERSION_DESCRIPTION});
    props["kind"] = json!({"type": "string", "description": KIND_DESCRIPTION});
    props["metadata"] = json!({
        "allOf": [{"$ref": format!("{refs}{OBJECT_META}")}],
        "description": METADATA_DESCRIPTION,
    });
    Some(schema)
}

/// A short `ObjectMeta` schema: its description and the fields clients write most.
fn object_meta() -> Value {
    let string = |d: &str| json!({"type": "string", "description": d, "default": ""});
    let map = |d: &str| json!({"type": "object", "description": d, "additionalProperties": {"type": "string", "default": ""}});
    json!({
        "type": "object",
        "description": "ObjectMeta is metadata that all persisted resources must have, which includes all objects users must create.",
        "properties": {
            "name": string("Name must be unique within a namespace. Is required when creating resources, although some resources may allow a client to request the generation of an appropriate name automatically."),
            "namespace": string("Namespace defines the space within which each name must be unique. An empty namespace is equivalent to the \"default\" namespace, but \"default\" is the canonical representation."),
            "labels": map("Map of string keys and values that can be used to organize and categorize (scope and select) objects."),
            "annotations": map("Annotations is an unstructured key value map stored with a resource that may be set by external tools to store and retrieve arbitrary metadata."),
            "resourceVersion": string("An opaque value that represents the internal version of this object that can be used by clients to determine when objects have changed."),
            "uid": string("UID is the unique in time and space value for this object."),
        },
    })
}
