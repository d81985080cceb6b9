//! `Accept: application/json;as=Table;v=v1;g=meta.k8s.io`: server-side printing with the
//! CRD's additionalPrinterColumns, and a few columns for the built-in kinds.

use chrono::{DateTime, Utc};
use serde_json::{Value, json};

use super::Req;
use crate::sim::SimContext;
use crate::store::{Gvr, gvr};

/// kubectl's human duration (`45s`, `3m12s`, `5h`, `2d3h`, `40d`).
pub fn human_duration(secs: i64) -> String {
    let s = secs.max(0);
    let (m, h, d) = (s / 60, s / 3600, s / 86400);
    if s < 120 {
        format!("{s}s")
    } else if m < 10 {
        format!("{m}m{}s", s % 60)
    } else if m < 180 {
        format!("{m}m")
    } else if h < 8 {
        format!("{h}h{}m", m % 60)
    } else if h < 48 {
        format!("{h}h")
    } else if h < 192 {
        format!("{d}d{}h", h % 24)
    } else if d < 365 * 2 {
        format!("{d}d")
    } else {
        format!("{}y{}d", d / 365, d % 365)
    }
}

fn age(ts: &Value, now: DateTime<Utc>) -> Value {
    match ts
        .as_str()
        .and_then(|t| DateTime::parse_from_rfc3339(t).ok())
    {
        Some(t) => json!(human_duration((now - t.with_timezone(&Utc)).num_seconds())),
        None => json!("<unknown>"),
    }
}

/// Evaluates the JSONPath subset printer columns use: `.a.b`, `.a[0]`, `.a[?(@.k=="v")].b`.
pub fn json_path<'a>(obj: &'a Value, path: &str) -> Option<&'a Value> {
    let mut cur = obj;
    let mut rest = path
        .trim()
        .trim_start_matches('{')
        .trim_end_matches('}')
        .trim_start_matches('.');
    while !rest.is_empty() {
        if let Some(after) = rest.strip_prefix('[') {
            let end = after.find(']')?;
            let inner = &after[..end];
            rest = after[end + 1..].trim_start_matches('.');
            if let Some(filter) = inner.strip_prefix("?(@.").and_then(|f| f.strip_suffix(')')) {
                let (k, v) = filter.split_once("==")?;
                let v = v.trim().trim_matches('"').trim_matches('\'');
                cur = cur.as_array()?.iter().find(|i| {
                    i.get(k.trim()).is_some_and(|x| {
                        x.as_str() == Some(v)
                            || *x == Value::String(v.to_string())
                            || x.to_string().as_str() == v
                    })
                })?;
            } else {
                cur = cur.as_array()?.get(inner.parse::<usize>().ok()?)?;
            }
            continue;
        }
        let end = rest.find(['.', '[']).unwrap_or(rest.len());
        cur = cur.get(&rest[..end])?;
        rest = rest[end..].trim_start_matches('.');
    }
    Some(cur)
}

fn col(name: &str, ty: &str) -> Value {
    let format = if name == "Name" { "name" } else { "" };
    json!({"name": name, "type": ty, "format": format, "description": name, "priority": 0})
}

fn ready_count(pod: &Value) -> String {
    let total = pod["spec"]["containers"].as_array().map_or(0, Vec::len);
    let ready = pod["status"]["containerStatuses"]
        .as_array()
        .map_or(0, |s| s.iter().filter(|c| c["ready"] == true).count());
    format!("{ready}/{total}")
}

fn pod_status(pod: &Value) -> Value {
    if pod.pointer("/metadata/deletionTimestamp").is_some() {
        return json!("Terminating");
    }
    for cs in pod["status"]["containerStatuses"]
        .as_array()
        .into_iter()
        .flatten()
    {
        if let Some(r) = cs
            .pointer("/state/waiting/reason")
            .or(cs.pointer("/state/terminated/reason"))
        {
            return r.clone();
        }
    }
    pod["status"]["phase"].clone()
}

fn builtin(g: &Gvr, o: &Value) -> (Vec<Value>, Vec<Value>) {
    let n = |p: &str| o.pointer(p).cloned().unwrap_or(json!(0));
    match (g.group, g.resource) {
        ("", "pods") => {
            let restarts: i64 = o["status"]["containerStatuses"]
                .as_array()
                .into_iter()
                .flatten()
                .filter_map(|c| c["restartCount"].as_i64())
                .sum();
            (
                vec![
                    col("Ready", "string"),
                    col("Status", "string"),
                    col("Restarts", "string"),
                    col("IP", "string"),
                    col("Node", "string"),
                ],
                vec![
                    json!(ready_count(o)),
                    pod_status(o),
                    json!(restarts.to_string()),
                    o["status"]["podIP"].clone(),
                    o["spec"]["nodeName"].clone(),
                ],
            )
        }
        ("apps", "deployments") | ("apps", "statefulsets") => (
            vec![
                col("Ready", "string"),
                col("Up-to-date", "integer"),
                col("Available", "integer"),
            ],
            vec![
                json!(format!(
                    "{}/{}",
                    n("/status/readyReplicas"),
                    n("/spec/replicas")
                )),
                n("/status/updatedReplicas"),
                n("/status/availableReplicas"),
            ],
        ),
        ("apps", "replicasets") => (
            vec![
                col("Desired", "integer"),
                col("Current", "integer"),
                col("Ready", "integer"),
            ],
            vec![
                n("/spec/replicas"),
                n("/status/replicas"),
                n("/status/readyReplicas"),
            ],
        ),
        ("apps", "daemonsets") => (
            vec![
                col("Desired", "integer"),
                col("Current", "integer"),
                col("Ready", "integer"),
            ],
            vec![
                n("/status/desiredNumberScheduled"),
                n("/status/currentNumberScheduled"),
                n("/status/numberReady"),
            ],
        ),
        ("", "nodes") => {
            let ready = o["status"]["conditions"]
                .as_array()
                .into_iter()
                .flatten()
                .any(|c| c["type"] == "Ready" && c["status"] == "True");
            (
                vec![col("Status", "string"), col("Version", "string")],
                vec![
                    json!(if ready { "Ready" } else { "NotReady" }),
                    o["status"]["nodeInfo"]["kubeletVersion"].clone(),
                ],
            )
        }
        ("", "namespaces") => (
            vec![col("Status", "string")],
            vec![o["status"]["phase"].clone()],
        ),
        ("policy", "poddisruptionbudgets") => (
            vec![
                col("Min Available", "string"),
                col("Max Unavailable", "string"),
                col("Allowed Disruptions", "integer"),
            ],
            vec![
                o.pointer("/spec/minAvailable")
                    .cloned()
                    .unwrap_or(json!("N/A")),
                o.pointer("/spec/maxUnavailable")
                    .cloned()
                    .unwrap_or(json!("N/A")),
                n("/status/disruptionsAllowed"),
            ],
        ),
        ("", "events") => (
            vec![
                col("Type", "string"),
                col("Reason", "string"),
                col("Object", "string"),
                col("Message", "string"),
            ],
            vec![
                o["type"].clone(),
                o["reason"].clone(),
                json!(format!(
                    "{}/{}",
                    o["involvedObject"]["kind"]
                        .as_str()
                        .unwrap_or_default()
                        .to_lowercase(),
                    o["involvedObject"]["name"].as_str().unwrap_or_default()
                )),
                o["message"].clone(),
            ],
        ),
        _ => (Vec::new(), Vec::new()),
    }
}

fn printer_columns(ctx: &SimContext, g: &Gvr) -> Option<Vec<Value>> {
    let crd = super::crd_schema::crd_for(ctx, g)?;
    let versions = crd["spec"]["versions"].as_array()?;
    let v = versions.iter().find(|v| v["name"] == g.version)?;
    Some(
        v["additionalPrinterColumns"]
            .as_array()
            .cloned()
            .unwrap_or_default(),
    )
}

fn partial(o: &Value) -> Value {
    json!({"kind": "PartialObjectMetadata", "apiVersion": "meta.k8s.io/v1", "metadata": o["metadata"]})
}

/// Renders an object or a list as a Table.
pub fn to_table(ctx: &SimContext, g: &Gvr, body: &Value, req: &Req) -> Value {
    let now = ctx.store.now();
    let items: Vec<&Value> = match body.get("items").and_then(Value::as_array) {
        Some(items) => items.iter().collect(),
        None => vec![body],
    };
    let include = req.q("includeObject").unwrap_or("PartialObjectMetadata");
    let custom = printer_columns(ctx, g);
    let mut columns = vec![col("Name", "string")];
    let mut rows = Vec::new();
    match &custom {
        Some(cols) => {
            for c in cols {
                columns.push(json!({"name": c["name"], "type": c["type"], "format": c.get("format").cloned().unwrap_or(json!("")), "description": c.get("description").cloned().unwrap_or(json!("")), "priority": c.get("priority").cloned().unwrap_or(json!(0))}));
            }
            if cols.is_empty() {
                columns.push(col("Age", "date"));
            }
        }
        None => {
            let sample = items.first().copied().unwrap_or(&Value::Null);
            columns.extend(builtin(g, sample).0);
            columns.push(col("Age", "string"));
        }
    }
    for o in &items {
        let mut cells = vec![o["metadata"]["name"].clone()];
        match &custom {
            Some(cols) => {
                for c in cols {
                    let v = json_path(o, c["jsonPath"].as_str().unwrap_or_default())
                        .cloned()
                        .unwrap_or(Value::Null);
                    cells.push(if c["type"] == "date" { age(&v, now) } else { v });
                }
                if cols.is_empty() {
                    cells.push(age(&o["metadata"]["creationTimestamp"], now));
                }
            }
            None => {
                cells.extend(builtin(g, o).1);
                cells.push(age(&o["metadata"]["creationTimestamp"], now));
            }
        }
        let object = match include {
            "None" => Value::Null,
            "Object" => (*o).clone(),
            _ => partial(o),
        };
        rows.push(json!({"cells": cells, "object": object}));
    }
    let mut meta = json!({"resourceVersion": body["metadata"]["resourceVersion"].clone()});
    if let Some(c) = body.pointer("/metadata/continue") {
        meta["continue"] = c.clone();
    }
    let _ = gvr::PODS;
    json!({"kind": "Table", "apiVersion": "meta.k8s.io/v1", "metadata": meta, "columnDefinitions": columns, "rows": rows})
}
