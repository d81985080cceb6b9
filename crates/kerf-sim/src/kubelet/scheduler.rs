//! The scheduler's pure part: which node has room for a pod.

use serde_json::Value;

use super::resources::{Amount, amount_of, pod_allocated};
use crate::controllers::common::{map_selector_matches, name, pod_terminal};

/// A node as the scheduler and the resize logic see it.
#[derive(Clone, Debug)]
pub struct NodeView {
    /// Node name.
    pub name: String,
    /// `metadata.labels`.
    pub labels: Value,
    /// `status.allocatable` (cpu, memory).
    pub allocatable: Amount,
    /// `status.allocatable.pods` (110 when absent).
    pub max_pods: i64,
    /// What the pods bound to the node hold (allocated, else requested).
    pub used: Amount,
    /// Pods bound to the node.
    pub pods: i64,
    /// Not cordoned.
    pub schedulable: bool,
}

impl NodeView {
    /// Builds the view of `node` from every pod in the cluster.
    pub fn build(node: &Value, pods: &[Value]) -> NodeView {
        let n = name(node);
        let on_node: Vec<&Value> = pods
            .iter()
            .filter(|p| p.pointer("/spec/nodeName").and_then(Value::as_str) == Some(n))
            .filter(|p| !pod_terminal(p))
            .collect();
        let used = on_node
            .iter()
            .fold(Amount::default(), |a, p| a.plus(pod_allocated(p)));
        let pods = i64::try_from(on_node.len()).unwrap_or(i64::MAX);
        NodeView::with_usage(node, used, pods)
    }

    /// The view of `node` whose bound, unfinished pods hold `used` and number `pods`.
    pub fn with_usage(node: &Value, used: Amount, pods: i64) -> NodeView {
        NodeView {
            name: name(node).to_string(),
            labels: node
                .pointer("/metadata/labels")
                .cloned()
                .unwrap_or(Value::Null),
            allocatable: amount_of(node.pointer("/status/allocatable").unwrap_or(&Value::Null)),
            max_pods: node
                .pointer("/status/allocatable/pods")
                .and_then(|v| super::resources::parse_quantity(v, 1.0))
                .unwrap_or(110),
            used,
            pods,
            schedulable: node.pointer("/spec/unschedulable").and_then(Value::as_bool) != Some(true),
        }
    }

    /// Room left on the node.
    pub fn free(&self) -> Amount {
        self.allocatable.minus(self.used)
    }
}

/// Picks the node with the most free CPU among those that match the pod's nodeSelector and
/// have room for its requests; otherwise the scheduler's "0/N nodes are available" message.
pub fn pick_node(
    request: Amount,
    node_selector: Option<&Value>,
    nodes: &[NodeView],
) -> Result<usize, String> {
    let (mut cpu, mut mem, mut selector, mut cordoned, mut full) = (0, 0, 0, 0, 0);
    let mut best: Option<usize> = None;
    for (i, n) in nodes.iter().enumerate() {
        let free = n.free();
        if !n.schedulable {
            cordoned += 1;
        } else if !map_selector_matches(node_selector, Some(&n.labels)) {
            selector += 1;
        } else if n.pods >= n.max_pods {
            full += 1;
        } else if request.cpu_milli > free.cpu_milli || request.memory > free.memory {
            cpu += i32::from(request.cpu_milli > free.cpu_milli);
            mem += i32::from(request.memory > free.memory);
        } else if best.is_none_or(|b| free.cpu_milli > nodes[b].free().cpu_milli) {
            best = Some(i);
        }
    }
    best.ok_or_else(|| {
        let mut reasons = Vec::new();
        for (count, text) in [
            (cpu, "Insufficient cpu"),
            (mem, "Insufficient memory"),
            (full, "Too many pods"),
            (
                selector,
                "node(s) didn't match Pod's node affinity/selector",
            ),
            (cordoned, "node(s) were unschedulable"),
        ] {
            if count > 0 {
                reasons.push(format!("{count} {text}"));
            }
        }
        format!(
            "0/{} nodes are available: {}.",
            nodes.len(),
            reasons.join(", ")
        )
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn node(name: &str, cpu: i64, used_cpu: i64, labels: Value) -> NodeView {
        NodeView {
            name: name.into(),
            labels,
            allocatable: Amount {
                cpu_milli: cpu,
                memory: 8 << 30,
            },
            max_pods: 110,
            used: Amount {
                cpu_milli: used_cpu,
                memory: 0,
            },
            pods: 0,
            schedulable: true,
        }
    }

    #[test]
    fn picks_node_with_room_and_matching_selector() {
        let nodes = [
            node("a", 4000, 3900, json!({"zone": "x"})),
            node("b", 4000, 1000, json!({"zone": "y"})),
            node("c", 4000, 0, json!({"zone": "x"})),
        ];
        let req = Amount {
            cpu_milli: 500,
            memory: 0,
        };
        assert_eq!(pick_node(req, Some(&json!({"zone": "x"})), &nodes), Ok(2));
        assert_eq!(pick_node(req, None, &nodes), Ok(2));
    }

    #[test]
    fn unschedulable_pod_gets_the_scheduler_message() {
        let nodes = [
            node("a", 4000, 3900, json!({"gpu": "yes"})),
            node("b", 4000, 0, json!({"gpu": "no"})),
        ];
        let req = Amount {
            cpu_milli: 500,
            memory: 0,
        };
        assert_eq!(
            pick_node(req, Some(&json!({"gpu": "yes"})), &nodes),
            Err("0/2 nodes are available: 1 Insufficient cpu, 1 node(s) didn't match Pod's node affinity/selector.".into())
        );
    }
}
