//! Request accounting: every request the API server answers, in order, with its verb, path,
//! client and status, so a test can count what its clients wrote ("after the first pass,
//! nothing but Lease renewals").
//!
//! [`super::server`] records each answer; the [`Audit`] log lives in
//! the [`crate::context::SimContext`] and is reached from the in-process `Sim` through `Sim::audit`. The
//! counters are exact; the log keeps the last [`CAPACITY`] requests.

use std::collections::VecDeque;
use std::fmt;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::Duration;

use http::Method;

/// How many requests the log keeps; older ones are dropped (the counters still count them).
pub const CAPACITY: usize = 50_000;

/// One request the API server answered.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct AuditRecord {
    /// Position since the sim started (1-based; survives resets).
    pub seq: u64,
    /// HTTP method.
    pub method: Method,
    /// Path without the query.
    pub path: String,
    /// The query parameters, `k=v` sorted by key and `&`-joined.
    pub query: String,
    /// The User-Agent header.
    pub user_agent: String,
    /// The field manager a write would be recorded under (`?fieldManager=` or the
    /// User-Agent up to its first '/').
    pub manager: String,
    /// Whether the request asked for a dry run (`?dryRun=All`).
    pub dry_run: bool,
    /// The status code of the answer (of its headers, for a watch).
    pub status: u16,
    /// How long the API server took to answer (to its headers, for a watch).
    pub duration: Duration,
    /// When the request arrived.
    pub received: std::time::Instant,
}

impl AuditRecord {
    /// A request that may change stored state: POST, PUT, PATCH or DELETE that is not a
    /// dry run (whatever its answer; a refused write still counts as a write attempt).
    pub fn is_mutating(&self) -> bool {
        is_mutating_method(&self.method) && !self.dry_run
    }

    /// A mutating request that renews or takes a Lease: PUT or PATCH on
    /// `/apis/coordination.k8s.io/v1/namespaces/{ns}/leases/{name}`.
    pub fn is_lease_renewal(&self) -> bool {
        if !matches!(self.method, Method::PUT | Method::PATCH) || !self.is_mutating() {
            return false;
        }
        let segs: Vec<&str> = self.path.trim_matches('/').split('/').collect();
        matches!(
            segs.as_slice(),
            [
                "apis",
                "coordination.k8s.io",
                _,
                "namespaces",
                _,
                "leases",
                _
            ]
        )
    }
}

impl fmt::Display for AuditRecord {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "#{} {} {}", self.seq, self.method, self.path)?;
        if !self.query.is_empty() {
            write!(f, "?{}", self.query)?;
        }
        write!(
            f,
            " -> {} in {:?} (manager {}, agent {})",
            self.status, self.duration, self.manager, self.user_agent
        )
    }
}

fn is_mutating_method(m: &Method) -> bool {
    matches!(
        *m,
        Method::POST | Method::PUT | Method::PATCH | Method::DELETE
    )
}

/// The requests answered since the log was started or last reset.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct AuditSnapshot {
    /// Requests answered.
    pub total: u64,
    /// Mutating requests answered (see [`AuditRecord::is_mutating`]).
    pub mutating: u64,
    /// Mutating requests other than Lease renewals.
    pub mutating_except_leases: u64,
    /// Requests no longer in the log (older than the last [`CAPACITY`]).
    pub dropped: u64,
    /// The requests still in the log, oldest first.
    pub records: Vec<AuditRecord>,
}

impl AuditSnapshot {
    /// The mutating requests still in the log.
    pub fn mutating_records(&self) -> Vec<&AuditRecord> {
        self.records.iter().filter(|r| r.is_mutating()).collect()
    }

    /// The mutating requests other than Lease renewals still in the log.
    pub fn writes_except_leases(&self) -> Vec<&AuditRecord> {
        self.records
            .iter()
            .filter(|r| r.is_mutating() && !r.is_lease_renewal())
            .collect()
    }
}

#[derive(Debug, Default)]
struct Log {
    next_seq: u64,
    total: u64,
    mutating: u64,
    mutating_except_leases: u64,
    dropped: u64,
    records: VecDeque<AuditRecord>,
}

/// The request log of one API server (cheap to clone; clones share the log).
#[derive(Clone, Debug, Default)]
pub struct Audit {
    log: Arc<Mutex<Log>>,
}

impl Audit {
    fn lock(&self) -> MutexGuard<'_, Log> {
        self.log.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Appends one answered request; its `seq` is assigned here.
    pub fn record(&self, mut r: AuditRecord) {
        let mut log = self.lock();
        log.next_seq += 1;
        r.seq = log.next_seq;
        log.total += 1;
        if r.is_mutating() {
            log.mutating += 1;
            if !r.is_lease_renewal() {
                log.mutating_except_leases += 1;
            }
        }
        if log.records.len() >= CAPACITY {
            log.records.pop_front();
            log.dropped += 1;
        }
        log.records.push_back(r);
    }

    /// The requests answered since the start or the last reset.
    pub fn snapshot(&self) -> AuditSnapshot {
        let log = self.lock();
        AuditSnapshot {
            total: log.total,
            mutating: log.mutating,
            mutating_except_leases: log.mutating_except_leases,
            dropped: log.dropped,
            records: log.records.iter().cloned().collect(),
        }
    }

    /// Empties the log and zeroes the counters; returns what they held.
    pub fn reset(&self) -> AuditSnapshot {
        let mut log = self.lock();
        let next_seq = log.next_seq;
        let old = std::mem::take(&mut *log);
        log.next_seq = next_seq;
        AuditSnapshot {
            total: old.total,
            mutating: old.mutating,
            mutating_except_leases: old.mutating_except_leases,
            dropped: old.dropped,
            records: old.records.into(),
        }
    }

    /// Requests answered since the start or the last reset.
    pub fn total(&self) -> u64 {
        self.lock().total
    }

    /// Mutating requests answered since the start or the last reset.
    pub fn mutating(&self) -> u64 {
        self.lock().mutating
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rec(method: Method, path: &str, query: &str) -> AuditRecord {
        AuditRecord {
            seq: 0,
            method,
            path: path.to_owned(),
            query: query.to_owned(),
            user_agent: "test".to_owned(),
            manager: "test".to_owned(),
            dry_run: query.contains("dryRun"),
            status: 200,
            duration: Duration::from_millis(1),
            received: std::time::Instant::now(),
        }
    }

    const LEASE: &str = "/apis/coordination.k8s.io/v1/namespaces/kerf-system/leases/kerf-agent";

    #[test]
    fn writes_count_and_lease_renewals_are_told_apart() {
        let audit = Audit::default();
        audit.record(rec(Method::GET, "/api/v1/pods", ""));
        audit.record(rec(Method::PUT, LEASE, ""));
        audit.record(rec(Method::PATCH, LEASE, ""));
        audit.record(rec(
            Method::POST,
            "/apis/coordination.k8s.io/v1/namespaces/kerf-system/leases",
            "",
        ));
        audit.record(rec(Method::PATCH, "/api/v1/namespaces/a/configmaps/x", ""));
        audit.record(rec(
            Method::POST,
            "/api/v1/namespaces/a/configmaps",
            "dryRun=All",
        ));
        let s = audit.snapshot();
        assert_eq!(s.total, 6);
        assert_eq!(s.mutating, 4);
        assert_eq!(s.mutating_except_leases, 2);
        let writes: Vec<String> = s
            .writes_except_leases()
            .iter()
            .map(|r| r.path.clone())
            .collect();
        assert_eq!(
            writes,
            [
                "/apis/coordination.k8s.io/v1/namespaces/kerf-system/leases",
                "/api/v1/namespaces/a/configmaps/x"
            ]
        );
        assert_eq!(
            s.records.iter().map(|r| r.seq).collect::<Vec<_>>(),
            [1, 2, 3, 4, 5, 6]
        );
    }

    #[test]
    fn reset_returns_what_was_counted_and_starts_over() {
        let audit = Audit::default();
        audit.record(rec(Method::DELETE, "/api/v1/namespaces/a/pods/p", ""));
        let before = audit.reset();
        assert_eq!((before.total, before.mutating), (1, 1));
        assert_eq!(audit.snapshot(), AuditSnapshot::default());
        audit.record(rec(Method::GET, "/api/v1/pods", ""));
        let after = audit.snapshot();
        assert_eq!((after.total, after.mutating), (1, 0));
        assert_eq!(after.records[0].seq, 2, "seq keeps counting across resets");
    }

    #[test]
    fn the_log_is_bounded_and_the_counters_stay_exact() {
        let audit = Audit::default();
        for _ in 0..CAPACITY + 3 {
            audit.record(rec(Method::POST, "/api/v1/namespaces/a/events", ""));
        }
        let s = audit.snapshot();
        assert_eq!(s.records.len(), CAPACITY);
        assert_eq!(s.dropped, 3);
        assert_eq!(s.mutating, u64::try_from(CAPACITY + 3).unwrap());
        assert_eq!(s.records[0].seq, 4);
    }
}
