//! The status writes of one pass to its rsr: each write sends the spec as read along
//! with the status (see [`intent::write_status`]) and remembers the resourceVersion it
//! replaced, so the next pass waits until the cache shows the newer one.

use kerf_api::rsr::RightsizingRecommendationStatus;

use crate::cache::RsrEntry;
use crate::context::Context;
use crate::health;
use crate::intent::{self, IntentError};
use crate::rsr_sync::rsr_api;

/// Writes the status of one rsr.
pub struct Writer {
    api: kube::Api<kube::api::DynamicObject>,
    name: String,
    rv: String,
    /// The spec as read (sent along with the status).
    spec: Option<serde_json::Value>,
    /// The status as the API server holds it.
    pub last: RightsizingRecommendationStatus,
    /// The resourceVersions this pass wrote over.
    pub replaced: Vec<String>,
}

impl Writer {
    /// A writer for the rsr of `entry`, as the cache shows it.
    pub fn new(ctx: &Context, entry: &RsrEntry) -> Writer {
        let rsr = entry.rsr.as_ref().ok();
        Writer {
            api: rsr_api(ctx.client.clone(), &entry.namespace),
            name: entry.name.clone(),
            rv: entry.resource_version.clone(),
            spec: rsr.and_then(|r| serde_json::to_value(&r.spec).ok()),
            last: rsr.and_then(|r| r.status.clone()).unwrap_or_default(),
            replaced: Vec::new(),
        }
    }

    /// Writes `s` unless the API server already holds it.
    pub async fn write(&mut self, s: &RightsizingRecommendationStatus) -> Result<(), IntentError> {
        if *s == self.last {
            return Ok(());
        }
        let started = std::time::Instant::now();
        let rv =
            intent::write_status(&self.api, &self.name, &self.rv, self.spec.as_ref(), s).await?;
        tracing::debug!(rsr = %self.name, took_ms = started.elapsed().as_millis(), "rsr status written");
        self.replaced.push(std::mem::replace(&mut self.rv, rv));
        self.last = s.clone();
        Ok(())
    }

    /// Reads the raw spec of an rsr that does not convert, so its status write keeps it.
    pub async fn read_raw_spec(&mut self) {
        if self.spec.is_none()
            && let Ok(Some(raw)) = self.api.get_opt(&self.name).await
        {
            self.spec = raw.data.get("spec").cloned();
        }
    }
}

impl health::StatusWriter for Writer {
    async fn write(&mut self, s: &RightsizingRecommendationStatus) -> Result<(), IntentError> {
        Writer::write(self, s).await
    }
}
