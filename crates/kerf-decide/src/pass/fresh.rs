//! No decision on facts older than the agent's own last write. After the agent wrote a
//! workload, one of its pods or its HPA, a pass over the workload waits until the cache
//! shows that object at a resourceVersion at least as new as the write's answer (or shows
//! it gone).
//!
//! Kubernetes calls resourceVersions opaque. Every etcd-backed API server answers with
//! integers that grow with each write, so two versions that both parse as integers are
//! compared as numbers. A version that does not parse is compared for equality only: the
//! cache has caught up once it shows the write's answer, or any version other than the one
//! the write replaced. A write the cache does not show within [`WRITE_VISIBLE_WITHIN`] (a
//! watch that restarted on a relist, an object replaced under the same name) stops holding
//! passes back.

use chrono::{DateTime, Duration, Utc};

/// How long a write the cache does not show holds the passes of its workload back.
pub const WRITE_VISIBLE_WITHIN: Duration = Duration::seconds(30);

/// How soon a pass that waits for the cache to show a write is tried again, besides the
/// watch event that brings the write.
pub const FRESH_RECHECK: Duration = Duration::milliseconds(250);

/// One write of the agent to an object, as the cache must show it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct OwnWrite {
    /// The resourceVersion of the write's answer (none for an eviction, whose answer is
    /// a Status).
    pub answer: Option<String>,
    /// The resourceVersion the cache showed when the write was sent.
    pub replaced: Option<String>,
    /// When the write was answered.
    pub at: DateTime<Utc>,
}

/// Whether the cache shows `write`: `cached` is the resourceVersion the cache holds for the
/// object now (none when the object is gone from it).
pub fn cache_shows(write: &OwnWrite, cached: Option<&str>) -> bool {
    let Some(cached) = cached else {
        return true;
    };
    if let Some(answer) = write.answer.as_deref() {
        match compare(cached, answer) {
            Some(ord) => return ord.is_ge(),
            None if cached == answer => return true,
            None => {}
        }
    } else if let Some(newer) = write.replaced.as_deref().and_then(|r| compare(cached, r)) {
        return newer.is_gt();
    }
    write.replaced.as_deref().is_some_and(|r| r != cached)
}

/// Whether `write` still holds passes back at `now`: the cache does not show it and it is
/// younger than [`WRITE_VISIBLE_WITHIN`].
pub fn holds_back(write: &OwnWrite, cached: Option<&str>, now: DateTime<Utc>) -> bool {
    !cache_shows(write, cached) && now < write.at + WRITE_VISIBLE_WITHIN
}

/// Two resourceVersions compared as numbers, when both parse as integers.
pub fn compare(a: &str, b: &str) -> Option<std::cmp::Ordering> {
    let a: u128 = a.parse().ok()?;
    let b: u128 = b.parse().ok()?;
    Some(a.cmp(&b))
}
