//! `Accept: application/json;as=Table;v=v1;g=meta.k8s.io`: server-side printing with the
//! CRD's additionalPrinterColumns, and a few columns for the built-in kinds.

use chrono::{DateTime, Utc};
use serde_json::{Value, json};

use super::Req;
use crate::context::SimContext;
use crate::store::Gvr;

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

/// A `date` printer column cell as the API server renders it: no value stays empty (kubectl
/// prints `<none>`), a time in the future is `<invalid>` (a negative age), one that does
/// not parse is `<invalid>`, and any other time is its age.
fn date_cell(v: &Value, now: DateTime<Utc>) -> Value {
    let Some(text) = v.as_str() else {
        return Value::Null;
    };
    match DateTime::parse_from_rfc3339(text) {
        Ok(t) if (now - t.with_timezone(&Utc)).num_seconds() < -1 => json!("<invalid>"),
        Ok(_) => age(v, now),
        Err(_) => json!("<invalid>"),
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
    col_p(name, ty, 0)
}

/// String columns: `shown` by default, then `wide` only with `-o wide`.
fn string_columns(shown: &[&str], wide: &[&str]) -> Vec<Value> {
    let shown = shown.iter().map(|n| col(n, "string"));
    shown
        .chain(wide.iter().map(|n| col_p(n, "string", 1)))
        .collect()
}

/// A column with a priority: 0 shows by default, 1 only with `-o wide`.
fn col_p(name: &str, ty: &str, priority: u8) -> Value {
    let format = if name == "Name" { "name" } else { "" };
    json!({"name": name, "type": ty, "format": format, "description": name, "priority": priority})
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

/// A text cell, `<none>` when the field is absent or empty (as kubectl's printers do).
fn text_or_none(v: &Value) -> Value {
    match v.as_str() {
        Some(s) if !s.is_empty() => json!(s),
        _ => json!("<none>"),
    }
}

/// `3` or `3 (5m ago)`: restarts and how long ago the last one ended.
fn restarts(pod: &Value, now: DateTime<Utc>) -> Value {
    let statuses = pod["status"]["containerStatuses"].as_array();
    let count: i64 = statuses
        .into_iter()
        .flatten()
        .filter_map(|c| c["restartCount"].as_i64())
        .sum();
    let last = statuses
        .into_iter()
        .flatten()
        .filter_map(|c| c.pointer("/lastState/terminated/finishedAt")?.as_str())
        .filter_map(|t| DateTime::parse_from_rfc3339(t).ok())
        .max();
    match last {
        Some(t) if count > 0 => {
            let secs = (now - t.with_timezone(&Utc)).num_seconds();
            json!(format!("{count} ({} ago)", human_duration(secs)))
        }
        _ => json!(count.to_string()),
    }
}

fn node_roles(node: &Value) -> Value {
    let mut roles: Vec<&str> = node["metadata"]["labels"]
        .as_object()
        .into_iter()
        .flatten()
        .filter_map(|(k, _)| k.strip_prefix("node-role.kubernetes.io/"))
        .filter(|r| !r.is_empty())
        .collect();
    roles.sort_unstable();
    if roles.is_empty() {
        json!("<none>")
    } else {
        json!(roles.join(","))
    }
}

fn node_address(node: &Value, kind: &str) -> Value {
    let found = node["status"]["addresses"]
        .as_array()
        .into_iter()
        .flatten()
        .find(|a| a["type"] == kind);
    text_or_none(found.map_or(&Value::Null, |a| &a["address"]))
}

/// The columns and the cells of one row of a Table.
type Row = (Vec<Value>, Vec<Value>);

/// The columns and cells of a built-in kind, in the real server's order (Name and Age
/// included); None for kinds without a printer here.
fn builtin(g: &Gvr, o: &Value, now: DateTime<Utc>) -> Option<Row> {
    let row = Cells {
        o,
        name: o["metadata"]["name"].clone(),
        created: age(&o["metadata"]["creationTimestamp"], now),
    };
    Some(match (g.group, g.resource) {
        ("", "pods") => row.pod(now),
        ("apps", "deployments") => row.deployment(),
        ("apps", "statefulsets") => row.statefulset(),
        ("apps", "replicasets") => row.replicaset(),
        ("apps", "daemonsets") => row.daemonset(),
        ("", "nodes") => row.node(),
        ("", "namespaces") => row.namespace(),
        ("policy", "poddisruptionbudgets") => row.pdb(),
        ("", "events") => event_row(o, now),
        _ => return None,
    })
}

/// One object and the cells every printer starts or ends with.
struct Cells<'a> {
    o: &'a Value,
    name: Value,
    created: Value,
}

impl Cells<'_> {
    /// The value at `p`, 0 when absent.
    fn n(&self, p: &str) -> Value {
        self.o.pointer(p).cloned().unwrap_or(json!(0))
    }

    /// `ready/desired` replicas.
    fn ready_of_replicas(&self) -> Value {
        json!(format!(
            "{}/{}",
            self.n("/status/readyReplicas"),
            self.n("/spec/replicas")
        ))
    }

    fn pod(self, now: DateTime<Utc>) -> Row {
        let o = self.o;
        (
            string_columns(
                &["Name", "Ready", "Status", "Restarts", "Age"],
                &["IP", "Node", "Nominated Node", "Readiness Gates"],
            ),
            vec![
                self.name,
                json!(ready_count(o)),
                pod_status(o),
                restarts(o, now),
                self.created,
                text_or_none(&o["status"]["podIP"]),
                text_or_none(&o["spec"]["nodeName"]),
                text_or_none(&o["status"]["nominatedNodeName"]),
                json!("<none>"),
            ],
        )
    }

    fn deployment(self) -> Row {
        (
            vec![
                col("Name", "string"),
                col("Ready", "string"),
                col("Up-to-date", "integer"),
                col("Available", "integer"),
                col("Age", "string"),
            ],
            vec![
                self.name.clone(),
                self.ready_of_replicas(),
                self.n("/status/updatedReplicas"),
                self.n("/status/availableReplicas"),
                self.created,
            ],
        )
    }

    fn statefulset(self) -> Row {
        (
            string_columns(&["Name", "Ready", "Age"], &[]),
            vec![self.name.clone(), self.ready_of_replicas(), self.created],
        )
    }

    fn replicaset(self) -> Row {
        (
            vec![
                col("Name", "string"),
                col("Desired", "integer"),
                col("Current", "integer"),
                col("Ready", "integer"),
                col("Age", "string"),
            ],
            vec![
                self.name.clone(),
                self.n("/spec/replicas"),
                self.n("/status/replicas"),
                self.n("/status/readyReplicas"),
                self.created,
            ],
        )
    }

    fn daemonset(self) -> Row {
        (
            vec![
                col("Name", "string"),
                col("Desired", "integer"),
                col("Current", "integer"),
                col("Ready", "integer"),
                col("Up-to-date", "integer"),
                col("Available", "integer"),
                col("Node Selector", "string"),
                col("Age", "string"),
            ],
            vec![
                self.name.clone(),
                self.n("/status/desiredNumberScheduled"),
                self.n("/status/currentNumberScheduled"),
                self.n("/status/numberReady"),
                self.n("/status/updatedNumberScheduled"),
                self.n("/status/numberAvailable"),
                node_selector(self.o),
                self.created,
            ],
        )
    }

    fn node(self) -> Row {
        let o = self.o;
        let ready = o["status"]["conditions"]
            .as_array()
            .into_iter()
            .flatten()
            .any(|c| c["type"] == "Ready" && c["status"] == "True");
        let info = &o["status"]["nodeInfo"];
        (
            string_columns(
                &["Name", "Status", "Roles", "Age", "Version"],
                &[
                    "Internal-IP",
                    "External-IP",
                    "OS-Image",
                    "Kernel-Version",
                    "Container-Runtime",
                ],
            ),
            vec![
                self.name,
                json!(if ready { "Ready" } else { "NotReady" }),
                node_roles(o),
                self.created,
                info["kubeletVersion"].clone(),
                node_address(o, "InternalIP"),
                node_address(o, "ExternalIP"),
                text_or_none(&info["osImage"]),
                text_or_none(&info["kernelVersion"]),
                text_or_none(&info["containerRuntimeVersion"]),
            ],
        )
    }

    fn namespace(self) -> Row {
        (
            string_columns(&["Name", "Status", "Age"], &[]),
            vec![self.name, self.o["status"]["phase"].clone(), self.created],
        )
    }

    fn pdb(self) -> Row {
        let or_na = |p: &str| self.o.pointer(p).cloned().unwrap_or(json!("N/A"));
        (
            vec![
                col("Name", "string"),
                col("Min Available", "string"),
                col("Max Unavailable", "string"),
                col("Allowed Disruptions", "integer"),
                col("Age", "string"),
            ],
            vec![
                self.name.clone(),
                or_na("/spec/minAvailable"),
                or_na("/spec/maxUnavailable"),
                self.n("/status/disruptionsAllowed"),
                self.created.clone(),
            ],
        )
    }
}

fn node_selector(o: &Value) -> Value {
    let sel = o
        .pointer("/spec/template/spec/nodeSelector")
        .and_then(Value::as_object);
    match sel {
        Some(m) if !m.is_empty() => json!(
            m.iter()
                .map(|(k, v)| format!("{k}={}", v.as_str().unwrap_or_default()))
                .collect::<Vec<_>>()
                .join(",")
        ),
        _ => json!("<none>"),
    }
}

/// The events printer: Last Seen first, no Name column by default.
fn event_row(o: &Value, now: DateTime<Utc>) -> (Vec<Value>, Vec<Value>) {
    let last = ["lastTimestamp", "eventTime", "firstTimestamp"]
        .iter()
        .map(|k| &o[*k])
        .find(|v| v.is_string())
        .or(Some(&o["metadata"]["creationTimestamp"]))
        .map_or(json!("<unknown>"), |t| age(t, now));
    (
        string_columns(
            &["Last Seen", "Type", "Reason", "Object", "Message"],
            &["Name"],
        ),
        vec![
            last,
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
            o["metadata"]["name"].clone(),
        ],
    )
}

fn printer_columns(ctx: &SimContext, g: &Gvr) -> Option<Vec<Value>> {
    let crd = super::crd_schema::crd_for(ctx, g)?;
    let versions = crd.crd["spec"]["versions"].as_array()?;
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
        None => match builtin(g, &Value::Null, now) {
            Some((cols, _)) => columns = cols,
            None => columns.push(col("Age", "string")),
        },
    }
    for o in &items {
        let cells = match &custom {
            Some(cols) => {
                let mut cells = vec![o["metadata"]["name"].clone()];
                for c in cols {
                    let v = json_path(o, c["jsonPath"].as_str().unwrap_or_default())
                        .cloned()
                        .unwrap_or(Value::Null);
                    cells.push(if c["type"] == "date" {
                        date_cell(&v, now)
                    } else {
                        v
                    });
                }
                if cols.is_empty() {
                    cells.push(age(&o["metadata"]["creationTimestamp"], now));
                }
                cells
            }
            None => match builtin(g, o, now) {
                Some((_, cells)) => cells,
                None => vec![
                    o["metadata"]["name"].clone(),
                    age(&o["metadata"]["creationTimestamp"], now),
                ],
            },
        };
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
    json!({"kind": "Table", "apiVersion": "meta.k8s.io/v1", "metadata": meta, "columnDefinitions": columns, "rows": rows})
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(t: &str) -> DateTime<Utc> {
        t.parse().unwrap()
    }

    #[test]
    fn date_cells_read_as_the_api_server_renders_them() {
        let now = at("2026-12-01T12:00:00Z");
        assert_eq!(date_cell(&Value::Null, now), Value::Null);
        assert_eq!(
            date_cell(&json!("2026-12-01T11:55:00Z"), now),
            json!("5m0s")
        );
        assert_eq!(
            date_cell(&json!("2026-12-01T13:00:00Z"), now),
            json!("<invalid>")
        );
        assert_eq!(date_cell(&json!("yesterday"), now), json!("<invalid>"));
    }
}
