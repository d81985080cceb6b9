//! cAdvisor CFS counters: `container_cpu_cfs_periods_total` and
//! `container_cpu_cfs_throttled_periods_total`, advanced from sim time at 10 periods per
//! second per running container, the throttled share as injected.

use std::collections::BTreeMap;
use std::fmt::Write as _;

use chrono::{DateTime, Utc};
use serde_json::Value;

use crate::controllers::common::{name, namespace};

/// CFS periods per second of a running container (a 100 ms period).
pub const PERIODS_PER_SECOND: f64 = 10.0;

/// (namespace, pod, container).
pub type ContainerKey = (String, String, String);

#[derive(Clone, Debug)]
struct Cfs {
    periods: f64,
    throttled: f64,
    ratio: f64,
    last: DateTime<Utc>,
    node: String,
    /// Running when last seen (its periods accrue until the next look).
    running: bool,
}

impl Cfs {
    /// Fresh counters from `now`.
    fn new(now: DateTime<Utc>, node: String, running: bool) -> Cfs {
        Cfs {
            periods: 0.0,
            throttled: 0.0,
            ratio: 0.0,
            last: now,
            node,
            running,
        }
    }
}

/// The counters of every container seen running.
#[derive(Clone, Debug, Default)]
pub struct Counters {
    map: BTreeMap<ContainerKey, Cfs>,
}

fn running_keys(pods: &[Value]) -> BTreeMap<ContainerKey, String> {
    let mut out = BTreeMap::new();
    for pod in pods {
        if pod.pointer("/status/phase").and_then(Value::as_str) != Some("Running") {
            continue;
        }
        let node = pod
            .pointer("/spec/nodeName")
            .and_then(Value::as_str)
            .unwrap_or("");
        for key in ["containerStatuses", "initContainerStatuses"] {
            let list = pod
                .pointer(&format!("/status/{key}"))
                .and_then(Value::as_array);
            for c in list
                .into_iter()
                .flatten()
                .filter(|c| c.pointer("/state/running").is_some())
            {
                let cname = c.get("name").and_then(Value::as_str).unwrap_or("");
                let k = (
                    namespace(pod).to_string(),
                    name(pod).to_string(),
                    cname.to_string(),
                );
                out.insert(k, node.to_string());
            }
        }
    }
    out
}

impl Counters {
    /// Advances every running container's counters to `now`; containers not running do not
    /// count; containers of vanished pods are dropped.
    pub fn advance(&mut self, pods: &[Value], now: DateTime<Utc>) {
        let running = running_keys(pods);
        let alive: std::collections::BTreeSet<(String, String)> = pods
            .iter()
            .map(|p| (namespace(p).to_string(), name(p).to_string()))
            .collect();
        self.map
            .retain(|(ns, pod, _), _| alive.contains(&(ns.clone(), pod.clone())));
        for (key, node) in &running {
            let e = self
                .map
                .entry(key.clone())
                .or_insert_with(|| Cfs::new(now, node.clone(), true));
            let dt = (now - e.last).num_milliseconds().max(0) as f64 / 1000.0;
            e.periods += PERIODS_PER_SECOND * dt;
            e.throttled += PERIODS_PER_SECOND * dt * e.ratio;
            e.last = now;
            e.running = true;
            e.node.clone_from(node);
        }
        for (key, e) in &mut self.map {
            if !running.contains_key(key) {
                e.last = now;
                e.running = false;
            }
        }
    }

    /// Takes a change of one pod: its containers' counters advance to `now` as they were
    /// (running or not), then follow the pod's state. What [`Counters::advance`] does for a
    /// list of every pod, for the one pod that changed.
    pub fn observe(&mut self, pod: &Value, now: DateTime<Utc>) {
        let running = running_keys(std::slice::from_ref(pod));
        let (ns, pod_name) = (namespace(pod), name(pod));
        for (key, e) in self.pod_entries(ns, pod_name) {
            if e.running {
                let dt = (now - e.last).num_milliseconds().max(0) as f64 / 1000.0;
                e.periods += PERIODS_PER_SECOND * dt;
                e.throttled += PERIODS_PER_SECOND * dt * e.ratio;
            }
            e.last = now;
            e.running = running.contains_key(key);
        }
        for (key, node) in running {
            let e = self
                .map
                .entry(key)
                .or_insert_with(|| Cfs::new(now, node.clone(), true));
            e.running = true;
            e.node = node;
        }
    }

    /// Drops the counters of a deleted pod.
    pub fn forget(&mut self, namespace: &str, pod: &str) {
        let keys: Vec<ContainerKey> = self
            .pod_entries(namespace, pod)
            .map(|(k, _)| k.clone())
            .collect();
        for k in keys {
            self.map.remove(&k);
        }
    }

    /// The entries of one pod's containers.
    fn pod_entries<'a>(
        &'a mut self,
        ns: &'a str,
        pod: &'a str,
    ) -> impl Iterator<Item = (&'a ContainerKey, &'a mut Cfs)> {
        let from = (ns.to_string(), pod.to_string(), String::new());
        self.map
            .range_mut(from..)
            .take_while(move |(k, _)| k.0 == ns && k.1 == pod)
    }

    /// Sets the throttled share of a container's periods from `now` on (clamped to 0..=1).
    pub fn set_ratio(&mut self, key: ContainerKey, ratio: f64, now: DateTime<Utc>) {
        let e = self
            .map
            .entry(key)
            .or_insert_with(|| Cfs::new(now, String::new(), false));
        e.ratio = ratio.clamp(0.0, 1.0);
    }

    /// The counters in Prometheus text format, for one node or all.
    pub fn render(&self, node: Option<&str>) -> String {
        let rows: Vec<(&ContainerKey, &Cfs)> = self
            .map
            .iter()
            .filter(|(_, e)| node.is_none_or(|n| n == e.node))
            .collect();
        let mut out = String::new();
        for (metric, help, pick) in [
            (
                "container_cpu_cfs_periods_total",
                "Number of elapsed enforcement period intervals.",
                (|e: &Cfs| e.periods) as fn(&Cfs) -> f64,
            ),
            (
                "container_cpu_cfs_throttled_periods_total",
                "Number of throttled period intervals.",
                |e: &Cfs| e.throttled,
            ),
        ] {
            let _ = writeln!(out, "# HELP {metric} {help}");
            let _ = writeln!(out, "# TYPE {metric} counter");
            for ((ns, pod, container), e) in &rows {
                let _ = writeln!(
                    out,
                    "{metric}{{container=\"{}\",namespace=\"{}\",pod=\"{}\"}} {}",
                    escape(container),
                    escape(ns),
                    escape(pod),
                    pick(e).floor()
                );
            }
        }
        out
    }
}

fn escape(s: &str) -> String {
    s.replace('\\', "\\\\")
        .replace('"', "\\\"")
        .replace('\n', "\\n")
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn pod() -> Value {
        json!({"metadata": {"namespace": "ns", "name": "p"}, "spec": {"nodeName": "n1"},
               "status": {"phase": "Running", "containerStatuses": [{"name": "app", "state": {"running": {}}}]}})
    }

    #[test]
    fn counters_follow_sim_time_and_ratio() {
        let t0 = Utc::now();
        let mut c = Counters::default();
        c.advance(&[pod()], t0);
        c.set_ratio(("ns".into(), "p".into(), "app".into()), 0.5, t0);
        c.advance(&[pod()], t0 + chrono::Duration::seconds(60));
        let text = c.render(Some("n1"));
        assert!(text.contains(
            "container_cpu_cfs_periods_total{container=\"app\",namespace=\"ns\",pod=\"p\"} 600"
        ));
        assert!(text.contains("container_cpu_cfs_throttled_periods_total{container=\"app\",namespace=\"ns\",pod=\"p\"} 300"));
        assert!(!c.render(Some("other")).contains("app"));
    }

    #[test]
    fn vanished_pods_are_dropped() {
        let t0 = Utc::now();
        let mut c = Counters::default();
        c.advance(&[pod()], t0);
        c.advance(&[], t0);
        assert!(!c.render(None).contains("pod=\"p\""));
    }

    #[test]
    fn a_pod_change_counts_the_periods_while_it_ran_and_none_after_it_stopped() {
        let t0 = Utc::now();
        let secs = |n| t0 + chrono::Duration::seconds(n);
        let mut stopped = pod();
        stopped["status"]["phase"] = json!("Succeeded");
        let mut c = Counters::default();
        c.observe(&pod(), t0);
        c.observe(&stopped, secs(10));
        c.advance(&[stopped.clone()], secs(60));
        let line = "container_cpu_cfs_periods_total{container=\"app\",namespace=\"ns\",pod=\"p\"}";
        assert!(
            c.render(None).contains(&format!("{line} 100")),
            "{}",
            c.render(None)
        );
        c.forget("ns", "p");
        assert!(!c.render(None).contains("pod=\"p\""));
    }
}
