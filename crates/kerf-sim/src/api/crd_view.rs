//! CRDs as the handling of their objects reads them, kept until the CRD changes.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, OnceLock};

use kube_cel::CompiledSchema;
use serde_json::Value;

use crate::store::StoredObject;

/// The OpenAPI v3 schema of a served version.
pub fn schema_of(crd: &Value, version: &str) -> Option<Value> {
    crd["spec"]["versions"]
        .as_array()?
        .iter()
        .find(|v| v["name"] == version)
        .map(|v| v["schema"]["openAPIV3Schema"].clone())
}

/// A CRD as the handling of its objects reads it, built once per stored version of the
/// CRD: the API server, too, keeps a CRD's structural schema and compiled CEL rules until
/// the CRD changes, instead of decoding and compiling them on every request.
pub struct CrdView {
    /// The resourceVersion of the CRD this view was built from.
    rv: u64,
    /// The CRD.
    pub crd: Value,
    /// Each version's schema, with its CEL rules compiled on first use.
    versions: Vec<(String, Value, OnceLock<CompiledSchema>)>,
}

impl CrdView {
    fn new(rv: u64, crd: Value) -> CrdView {
        let versions = crd["spec"]["versions"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(|v| {
                let name = v["name"].as_str()?.to_owned();
                let schema = schema_of(&crd, &name)?;
                Some((name, schema, OnceLock::new()))
            })
            .collect();
        CrdView { rv, crd, versions }
    }

    /// The OpenAPI v3 schema of `version`.
    pub fn schema(&self, version: &str) -> Option<&Value> {
        let (_, schema, _) = self.versions.iter().find(|(v, _, _)| v == version)?;
        Some(schema)
    }

    /// The compiled CEL rules of `version`'s schema.
    pub(crate) fn compiled(&self, version: &str) -> Option<&CompiledSchema> {
        let (_, schema, compiled) = self.versions.iter().find(|(v, _, _)| v == version)?;
        Some(compiled.get_or_init(|| kube_cel::compile_schema(schema)))
    }
}

/// The [`CrdView`]s built so far, by CRD name.
#[derive(Clone, Default)]
pub struct CrdCache(Arc<Mutex<HashMap<String, Arc<CrdView>>>>);

impl std::fmt::Debug for CrdCache {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CrdCache").finish_non_exhaustive()
    }
}

impl CrdCache {
    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<String, Arc<CrdView>>> {
        self.0.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The view of CRD `name` as `stored` holds it: the kept one while the CRD's
    /// resourceVersion has not moved, else a new one.
    pub fn view(&self, name: String, stored: &StoredObject) -> Arc<CrdView> {
        if let Some(view) = self.lock().get(&name)
            && view.rv == stored.resource_version()
        {
            return Arc::clone(view);
        }
        let view = Arc::new(CrdView::new(stored.resource_version(), stored.value()));
        self.lock().insert(name, Arc::clone(&view));
        view
    }

    /// Drops the view of a deleted CRD.
    pub fn forget(&self, name: &str) {
        self.lock().remove(name);
    }
}
