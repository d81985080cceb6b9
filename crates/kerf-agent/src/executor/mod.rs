//! The executor: the Kubernetes writes that put a change onto a workload.
//!
//! Each write has a pure part that plans it (the request body, the state of a resize, the
//! pods to replace) and a thin I/O part that sends it and classifies the answer:
//!
//! - [`resize`]: the `pods/resize` subresource (in-place, design D16, D17, D19);
//! - [`rollout`]: server-side apply of the pod template, the release hand-over and the
//!   rollout completion check (design section 13, D21, D23);
//! - [`hpa`]: the coordinated HPA target (design D22);
//! - [`template`]: the apply body of a pod template change, shared by the rollout and the
//!   release hand-over;
//! - [`ondelete`]: replacing outdated pods of an OnDelete StatefulSet through evictions.
//!
//! Nothing here decides whether a change may go in: the reconciler calls these after the
//! decision pipeline and the lease check.

pub mod error;
pub mod hpa;
pub mod metrics;
pub mod ondelete;
pub mod release;
pub mod resize;
pub mod rollout;
pub mod rollout_status;
pub mod template;

use kerf_api::WorkloadKind;

pub use error::ErrorClass;

/// The workload a write is for.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct WorkloadId {
    /// Namespace.
    pub namespace: String,
    /// Name.
    pub name: String,
    /// UID the change was decided for; a live object with another UID is not written.
    pub uid: String,
    /// Kind.
    pub kind: WorkloadKind,
}

/// A pod a write is for.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct PodId {
    /// Namespace.
    pub namespace: String,
    /// Name.
    pub name: String,
    /// UID.
    pub uid: String,
}

pub use kerf_decide::values::{
    ContainerResources, container, requirements_cover, same_quantity, values_cover,
};
