//! What the kubelet loop keeps between passes so that a pass touches only the pods whose
//! state must move: what each pod holds on its node (so node usage needs no pod list) and
//! the set of pods to look at (changed since they last settled, or waiting on time or room).

use std::collections::{BTreeSet, HashMap};

use serde_json::Value;

use super::resources::{Amount, pod_allocated};
use crate::controllers::common::{pod_terminal, terminating};

/// What the pods bound to a node hold.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct NodeUse {
    /// Allocated (else requested) resources of the node's pods that have not finished.
    pub used: Amount,
    /// Number of those pods.
    pub pods: i64,
}

#[derive(Debug)]
struct Slim {
    node: Option<String>,
    allocated: Amount,
}

/// Pods by `namespace/name`, node usage and the pods to look at.
#[derive(Debug, Default)]
pub struct Tracker {
    pods: HashMap<String, Slim>,
    usage: HashMap<String, NodeUse>,
    active: BTreeSet<String>,
    /// A node changed (or nothing was seen yet) since the last pass.
    nodes_changed: bool,
}

/// The tracker's key of a pod.
pub fn pod_key(namespace: &str, name: &str) -> String {
    format!("{namespace}/{name}")
}

impl Tracker {
    /// Takes the current version of the pod `key` (None: deleted). A pod that is neither
    /// finished nor terminating is to be looked at.
    pub fn observe(&mut self, key: &str, pod: Option<&Value>) {
        if let Some(old) = self.pods.remove(key)
            && let Some(node) = old.node
        {
            let u = self.usage.entry(node).or_default();
            u.used = u.used.minus(old.allocated);
            u.pods -= 1;
        }
        let Some(pod) = pod else {
            self.active.remove(key);
            return;
        };
        let node = pod
            .pointer("/spec/nodeName")
            .and_then(Value::as_str)
            .filter(|_| !pod_terminal(pod))
            .map(str::to_string);
        let allocated = pod_allocated(pod);
        if let Some(n) = &node {
            let u = self.usage.entry(n.clone()).or_default();
            u.used = u.used.plus(allocated);
            u.pods += 1;
        }
        self.pods.insert(key.to_string(), Slim { node, allocated });
        if pod_terminal(pod) || terminating(pod) {
            self.active.remove(key);
        } else {
            self.active.insert(key.to_string());
        }
    }

    /// Forgets everything (before taking a full list again); the next pass looks at the
    /// nodes too.
    pub fn clear(&mut self) {
        *self = Tracker {
            nodes_changed: true,
            ..Tracker::default()
        };
    }

    /// What the pods bound to `node` hold.
    pub fn usage(&self, node: &str) -> NodeUse {
        self.usage.get(node).copied().unwrap_or_default()
    }

    /// The pods to look at, in key order.
    pub fn active(&self) -> Vec<String> {
        self.active.iter().cloned().collect()
    }

    /// Whether no pod and no node is to be looked at.
    pub fn is_idle(&self) -> bool {
        self.active.is_empty() && !self.nodes_changed
    }

    /// The pass has looked at the nodes.
    pub fn nodes_changed(&self) -> bool {
        self.nodes_changed
    }

    /// The nodes were read after their last change.
    pub fn nodes_seen(&mut self) {
        self.nodes_changed = false;
    }

    /// The pod `key` has reached a state only a change of its own moves it from.
    pub fn settle(&mut self, key: &str) {
        self.active.remove(key);
    }

    /// A node changed: the nodes and every known pod are to be looked at.
    pub fn node_changed(&mut self) {
        self.nodes_changed = true;
        self.active = self.pods.keys().cloned().collect();
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn pod(node: Option<&str>, cpu: &str, phase: &str) -> Value {
        json!({"metadata": {"name": "p", "namespace": "ns"},
            "spec": {"nodeName": node, "containers": [{"name": "c",
                "resources": {"requests": {"cpu": cpu, "memory": "1Gi"}}}]},
            "status": {"phase": phase}})
    }

    #[test]
    fn node_usage_follows_binding_resizes_and_deletion() {
        let mut t = Tracker::default();
        t.observe("ns/p", Some(&pod(None, "100m", "Pending")));
        assert_eq!(t.usage("n1"), NodeUse::default());
        t.observe("ns/p", Some(&pod(Some("n1"), "100m", "Running")));
        assert_eq!((t.usage("n1").used.cpu_milli, t.usage("n1").pods), (100, 1));
        t.observe("ns/p", Some(&pod(Some("n1"), "300m", "Running")));
        assert_eq!((t.usage("n1").used.cpu_milli, t.usage("n1").pods), (300, 1));
        t.observe("ns/p", Some(&pod(Some("n1"), "300m", "Succeeded")));
        assert_eq!(t.usage("n1").pods, 0);
        t.observe("ns/p", None);
        assert_eq!(t.usage("n1"), NodeUse::default());
    }

    #[test]
    fn settled_pods_wait_for_their_own_change() {
        let mut t = Tracker::default();
        t.observe("ns/p", Some(&pod(Some("n1"), "100m", "Running")));
        assert_eq!(t.active(), vec!["ns/p".to_string()]);
        t.settle("ns/p");
        assert!(t.is_idle());
        t.observe("ns/p", Some(&pod(Some("n1"), "200m", "Running")));
        assert!(!t.is_idle());
        t.observe("ns/p", Some(&pod(Some("n1"), "200m", "Failed")));
        assert!(t.is_idle());
    }
}
