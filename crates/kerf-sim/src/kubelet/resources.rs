//! Pure helpers on pod resources: quantity parsing, per-pod requests and the QoS class.

use serde_json::Value;

/// CPU in millicores and memory in bytes.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Amount {
    /// CPU in millicores.
    pub cpu_milli: i64,
    /// Memory in bytes.
    pub memory: i64,
}

impl Amount {
    /// Component-wise sum.
    pub fn plus(self, o: Amount) -> Amount {
        Amount {
            cpu_milli: self.cpu_milli + o.cpu_milli,
            memory: self.memory + o.memory,
        }
    }

    /// Component-wise difference.
    pub fn minus(self, o: Amount) -> Amount {
        Amount {
            cpu_milli: self.cpu_milli - o.cpu_milli,
            memory: self.memory - o.memory,
        }
    }

    /// Whether both components fit in `room`.
    pub fn fits_in(self, room: Amount) -> bool {
        self.cpu_milli <= room.cpu_milli && self.memory <= room.memory
    }
}

/// Parses a Kubernetes quantity (`250m`, `1.5`, `512Mi`, `1e3`, JSON integer) scaled by
/// `scale` (1000 for millicores, 1 for bytes), rounded up. `None` if malformed.
pub fn parse_quantity(v: &Value, scale: f64) -> Option<i64> {
    let s = match v {
        Value::String(s) => s.trim().to_string(),
        Value::Number(n) => n.to_string(),
        _ => return None,
    };
    let split = s
        .find(|c: char| !(c.is_ascii_digit() || c == '.' || c == '+' || c == '-'))
        .unwrap_or(s.len());
    let (num, suffix) = s.split_at(split);
    let base: f64 = num.parse().ok()?;
    let mult = match suffix {
        "" => 1.0,
        "n" => 1e-9,
        "u" => 1e-6,
        "m" => 1e-3,
        "k" => 1e3,
        "M" => 1e6,
        "G" => 1e9,
        "T" => 1e12,
        "P" => 1e15,
        "E" => 1e18,
        "Ki" => 1024.0,
        "Mi" => 1024.0 * 1024.0,
        "Gi" => 1024.0f64.powi(3),
        "Ti" => 1024.0f64.powi(4),
        "Pi" => 1024.0f64.powi(5),
        "Ei" => 1024.0f64.powi(6),
        e if e.starts_with(['e', 'E']) => 10f64.powi(e[1..].parse().ok()?),
        _ => return None,
    };
    let value = (base * mult * scale).ceil();
    value.is_finite().then_some(value as i64)
}

/// CPU quantity in millicores.
pub fn cpu_milli(v: &Value) -> Option<i64> {
    parse_quantity(v, 1000.0)
}

/// Memory quantity in bytes.
pub fn bytes(v: &Value) -> Option<i64> {
    parse_quantity(v, 1.0)
}

/// The amount in a resource map (`{cpu, memory}`); absent entries count as zero.
pub fn amount_of(map: &Value) -> Amount {
    Amount {
        cpu_milli: map.get("cpu").and_then(cpu_milli).unwrap_or(0),
        memory: map.get("memory").and_then(bytes).unwrap_or(0),
    }
}

/// The long-running containers of a pod with the status list each reports in:
/// `spec.containers` (`containerStatuses`) and restartable init containers, i.e. sidecars
/// (`initContainerStatuses`).
pub fn running_containers(pod: &Value) -> Vec<(&'static str, &Value)> {
    let list = |p: &str| {
        pod.pointer(p)
            .and_then(Value::as_array)
            .map(Vec::as_slice)
            .unwrap_or(&[])
    };
    let sidecars = list("/spec/initContainers")
        .iter()
        .filter(|c| c.get("restartPolicy").and_then(Value::as_str) == Some("Always"))
        .map(|c| ("initContainerStatuses", c));
    list("/spec/containers")
        .iter()
        .map(|c| ("containerStatuses", c))
        .chain(sidecars)
        .collect()
}

/// The long-running containers of a pod (see [`running_containers`]).
pub fn containers(pod: &Value) -> Vec<&Value> {
    running_containers(pod)
        .into_iter()
        .map(|(_, c)| c)
        .collect()
}

/// The effective requests of a container: requests, or limits where a request is absent (the
/// API server defaults requests to limits).
pub fn container_requests(resources: &Value) -> Amount {
    let req = resources.get("requests").cloned().unwrap_or(Value::Null);
    let lim = resources.get("limits").cloned().unwrap_or(Value::Null);
    let pick = |name: &str, f: fn(&Value) -> Option<i64>| {
        req.get(name)
            .and_then(f)
            .or_else(|| lim.get(name).and_then(f))
            .unwrap_or(0)
    };
    Amount {
        cpu_milli: pick("cpu", cpu_milli),
        memory: pick("memory", bytes),
    }
}

/// The sum of the spec requests of a pod's containers.
pub fn pod_spec_requests(pod: &Value) -> Amount {
    containers(pod).iter().fold(Amount::default(), |acc, c| {
        acc.plus(container_requests(
            c.get("resources").unwrap_or(&Value::Null),
        ))
    })
}

/// What the kubelet has allocated to a pod: `allocatedResources` of each container status,
/// falling back to the spec requests of containers without one.
pub fn pod_allocated(pod: &Value) -> Amount {
    containers(pod).iter().fold(Amount::default(), |acc, c| {
        let name = c.get("name").and_then(Value::as_str).unwrap_or("");
        let allocated = container_status(pod, name)
            .and_then(|s| s.get("allocatedResources"))
            .map(amount_of);
        acc.plus(
            allocated
                .unwrap_or_else(|| container_requests(c.get("resources").unwrap_or(&Value::Null))),
        )
    })
}

/// The status entry of a named container (regular or sidecar).
pub fn container_status<'a>(pod: &'a Value, name: &str) -> Option<&'a Value> {
    ["containerStatuses", "initContainerStatuses"]
        .iter()
        .filter_map(|k| pod.pointer(&format!("/status/{k}"))?.as_array())
        .flatten()
        .find(|s| s.get("name").and_then(Value::as_str) == Some(name))
}

/// The pod's QoS class, computed like the API server does from the containers' requests and
/// limits for cpu and memory.
pub fn qos_class(pod: &Value) -> &'static str {
    let mut any_set = false;
    let mut guaranteed = true;
    for c in containers(pod) {
        let res = c.get("resources").unwrap_or(&Value::Null);
        for name in ["cpu", "memory"] {
            let req = res.pointer(&format!("/requests/{name}"));
            let lim = res.pointer(&format!("/limits/{name}"));
            if req.is_some() || lim.is_some() {
                any_set = true;
            }
            let f = if name == "cpu" { cpu_milli } else { bytes };
            match (req.and_then(f), lim.and_then(f)) {
                (_, None) => guaranteed = false,
                (Some(r), Some(l)) if r != l => guaranteed = false,
                _ => {}
            }
        }
    }
    match (any_set, guaranteed) {
        (false, _) => "BestEffort",
        (true, true) => "Guaranteed",
        (true, false) => "Burstable",
    }
}

/// Whether two resource maps hold the same cpu/memory values (compared as quantities).
pub fn same_resources(a: &Value, b: &Value) -> bool {
    ["requests", "limits"].iter().all(|kind| {
        let (x, y) = (
            a.get(*kind).unwrap_or(&Value::Null),
            b.get(*kind).unwrap_or(&Value::Null),
        );
        ["cpu", "memory"].iter().all(|r| {
            let f = if *r == "cpu" { cpu_milli } else { bytes };
            x.get(*r).and_then(f) == y.get(*r).and_then(f)
        })
    })
}

/// The resources (`cpu`, `memory`) whose requests or limits differ between two maps.
pub fn changed_resources(a: &Value, b: &Value) -> Vec<&'static str> {
    ["cpu", "memory"]
        .into_iter()
        .filter(|r| {
            let f = if *r == "cpu" { cpu_milli } else { bytes };
            ["requests", "limits"].iter().any(|kind| {
                a.pointer(&format!("/{kind}/{r}")).and_then(f)
                    != b.pointer(&format!("/{kind}/{r}")).and_then(f)
            })
        })
        .collect()
}

/// The spec resources of a container restricted to cpu and memory, in the shape the kubelet
/// reports as `containerStatuses[].resources`.
pub fn reported_resources(resources: &Value) -> Value {
    let mut out = serde_json::Map::new();
    for kind in ["limits", "requests"] {
        let mut m = serde_json::Map::new();
        for r in ["cpu", "memory"] {
            if let Some(v) = resources.pointer(&format!("/{kind}/{r}")) {
                m.insert(r.to_string(), v.clone());
            }
        }
        // The API server defaults a missing request to the limit.
        if kind == "requests" {
            for r in ["cpu", "memory"] {
                if !m.contains_key(r)
                    && let Some(v) = resources.pointer(&format!("/limits/{r}"))
                {
                    m.insert(r.to_string(), v.clone());
                }
            }
        }
        if !m.is_empty() {
            out.insert(kind.to_string(), Value::Object(m));
        }
    }
    Value::Object(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn parses_quantities() {
        assert_eq!(cpu_milli(&json!("250m")), Some(250));
        assert_eq!(cpu_milli(&json!("1.5")), Some(1500));
        assert_eq!(cpu_milli(&json!(2)), Some(2000));
        assert_eq!(bytes(&json!("128Mi")), Some(128 * 1024 * 1024));
        assert_eq!(bytes(&json!("1G")), Some(1_000_000_000));
        assert_eq!(bytes(&json!("1e3")), Some(1000));
        assert_eq!(bytes(&json!("12x")), None);
    }

    #[test]
    fn qos_classes() {
        let pod = |res: Value| json!({"spec": {"containers": [{"name": "a", "resources": res}]}});
        assert_eq!(qos_class(&pod(json!({}))), "BestEffort");
        assert_eq!(
            qos_class(&pod(json!({"limits": {"cpu": "1", "memory": "1Gi"}}))),
            "Guaranteed"
        );
        assert_eq!(
            qos_class(&pod(json!({"requests": {"cpu": "1000m", "memory": "1Gi"},
                                  "limits": {"cpu": "1", "memory": "1Gi"}}))),
            "Guaranteed"
        );
        assert_eq!(
            qos_class(&pod(json!({"requests": {"cpu": "100m"}}))),
            "Burstable"
        );
    }

    #[test]
    fn requests_default_to_limits() {
        let pod = json!({"spec": {"containers": [
            {"name": "a", "resources": {"limits": {"cpu": "200m", "memory": "64Mi"}}},
            {"name": "b", "resources": {"requests": {"cpu": "100m"}}}
        ]}});
        assert_eq!(
            pod_spec_requests(&pod),
            Amount {
                cpu_milli: 300,
                memory: 64 << 20
            }
        );
    }

    #[test]
    fn compares_resources_as_quantities() {
        let a = json!({"requests": {"cpu": "0.1", "memory": "128Mi"}});
        let b = json!({"requests": {"cpu": "100m", "memory": "134217728"}});
        assert!(same_resources(&a, &b));
        let c = json!({"requests": {"cpu": "150m", "memory": "128Mi"}});
        assert_eq!(changed_resources(&a, &c), vec!["cpu"]);
    }
}
