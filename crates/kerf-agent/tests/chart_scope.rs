//! The chart's scope values (docs/install.md#scoped-install): `scope.namespaces`,
//! `scope.namespaceSelector` and `scope.workloadSelector` reach the agent through the
//! ConfigMap; a namespace list moves the namespaced RBAC rules from the ClusterRole into a
//! Role per listed namespace; the mutating webhook's namespaceSelector follows the scope;
//! the chart refuses what the agent refuses. Rendered by `helm template`; needs helm (see
//! chart_support).

mod chart_support;

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;
use std::process::Command;

use serde_yaml::Value;

type Res<T> = Result<T, Box<dyn std::error::Error>>;

/// The release namespace of every render (the release is `kerf-agent`).
const RELEASE_NS: &str = "kerf-system";

/// The rules on namespaced kinds, as `group resource verb` (`core` for ""): what a Role
/// of each listed namespace grants with `scope.namespaces`, and the ClusterRole without.
const NAMESPACED: [&str; 25] = [
    "core pods get",
    "core pods list",
    "core pods watch",
    "core pods/resize patch",
    "core pods/eviction create",
    "core events create",
    "apps deployments get",
    "apps deployments list",
    "apps deployments watch",
    "apps deployments patch",
    "apps statefulsets get",
    "apps statefulsets list",
    "apps statefulsets watch",
    "apps statefulsets patch",
    "apps daemonsets get",
    "apps daemonsets list",
    "apps daemonsets watch",
    "apps daemonsets patch",
    "apps replicasets list",
    "apps replicasets watch",
    "autoscaling horizontalpodautoscalers list",
    "autoscaling horizontalpodautoscalers watch",
    "autoscaling horizontalpodautoscalers patch",
    "policy poddisruptionbudgets list",
    "policy poddisruptionbudgets watch",
];

/// The rsr rules, namespaced as well.
const RSR: [&str; 6] = [
    "kerf.getkerf.dev rightsizingrecommendations get",
    "kerf.getkerf.dev rightsizingrecommendations list",
    "kerf.getkerf.dev rightsizingrecommendations watch",
    "kerf.getkerf.dev rightsizingrecommendations create",
    "kerf.getkerf.dev rightsizingrecommendations patch",
    "kerf.getkerf.dev rightsizingrecommendations/status update",
];

/// What cannot be namespaced: the ClusterRole's rules whatever the scope (without the
/// vpa source and the cAdvisor fallback).
const CLUSTER: [&str; 8] = [
    "core nodes list",
    "core nodes watch",
    "core namespaces list",
    "core namespaces watch",
    "kerf.getkerf.dev rightsizingpolicies get",
    "kerf.getkerf.dev rightsizingpolicies list",
    "kerf.getkerf.dev rightsizingpolicies watch",
    "kerf.getkerf.dev rightsizingpolicies/status update",
];

const VPA_READ: [&str; 3] = [
    "autoscaling.k8s.io verticalpodautoscalers get",
    "autoscaling.k8s.io verticalpodautoscalers list",
    "autoscaling.k8s.io verticalpodautoscalers watch",
];

fn set(groups: &[&[&str]]) -> BTreeSet<String> {
    groups
        .iter()
        .flat_map(|g| g.iter().map(|s| (*s).to_owned()))
        .collect()
}

fn namespaced() -> BTreeSet<String> {
    set(&[&NAMESPACED, &RSR])
}

/// `helm template` of the chart in kerf-system with `args`; helm's stderr when it fails.
fn render(args: &[&str]) -> Res<Vec<Value>> {
    let fixed = ["-n", RELEASE_NS, "--set", "clusterName=prod"];
    chart_support::template(&chart_support::helm(), fixed.iter().chain(args))
}

/// `--set-json scope.<key>=<value as JSON>`.
fn scope_json(key: &str, value: &serde_json::Value) -> [String; 2] {
    ["--set-json".to_owned(), format!("scope.{key}={value}")]
}

/// The render with `scope.namespaces` = `namespaces` and `args`.
fn render_list(namespaces: &[&str], args: &[&str]) -> Res<Vec<Value>> {
    let list = scope_json("namespaces", &serde_json::json!(namespaces));
    let all: Vec<&str> = list
        .iter()
        .map(String::as_str)
        .chain(args.iter().copied())
        .collect();
    render(&all)
}

/// The render with `scope.<key>` = `text` (a selector, commas included).
fn render_selector(key: &str, text: &str) -> Res<Vec<Value>> {
    let [flag, value] = scope_json(key, &serde_json::json!(text));
    render(&[&flag, &value])
}

/// The documents of `kind` named `name`, by namespace (`""` for cluster-scoped ones).
fn named<'a>(docs: &'a [Value], kind: &str, name: &str) -> BTreeMap<&'a str, &'a Value> {
    docs.iter()
        .filter(|d| d["kind"].as_str() == Some(kind) && d["metadata"]["name"] == name)
        .map(|d| (d["metadata"]["namespace"].as_str().unwrap_or(""), d))
        .collect()
}

fn one<'a>(docs: &'a [Value], kind: &str) -> Res<&'a Value> {
    let mut all = docs.iter().filter(|d| d["kind"].as_str() == Some(kind));
    let first = all.next().ok_or_else(|| format!("no {kind} rendered"))?;
    match all.next() {
        None => Ok(first),
        Some(_) => Err(format!("more than one {kind}").into()),
    }
}

/// The rules of a Role or ClusterRole as `group resource verb`; a rule naming objects
/// (resourceNames) fails the test, since none of the scope's rules may.
fn perms(role: &Value) -> BTreeSet<String> {
    let mut out = BTreeSet::new();
    for rule in role["rules"].as_sequence().into_iter().flatten() {
        assert!(rule.get("resourceNames").is_none(), "{rule:?}");
        for group in chart_support::strs(&rule["apiGroups"]) {
            let group = if group.is_empty() { "core" } else { group };
            for resource in chart_support::strs(&rule["resources"]) {
                for verb in chart_support::strs(&rule["verbs"]) {
                    out.insert(format!("{group} {resource} {verb}"));
                }
            }
        }
    }
    out
}

fn cluster_role_perms(docs: &[Value]) -> Res<BTreeSet<String>> {
    Ok(perms(one(docs, "ClusterRole")?))
}

/// Asserts the RoleBinding `name` in `namespace` binds Role `name` to the agent's
/// service account.
#[allow(clippy::panic)] // test helper: a missing binding fails the test
#[track_caller]
fn assert_bound(docs: &[Value], name: &str, namespace: &str) {
    let bindings = named(docs, "RoleBinding", name);
    let b = bindings
        .get(namespace)
        .unwrap_or_else(|| panic!("no RoleBinding {name} in {namespace}"));
    assert_eq!(b["roleRef"]["kind"], "Role");
    assert_eq!(b["roleRef"]["name"], name);
    let subjects = b["subjects"].as_sequence().cloned().unwrap_or_default();
    assert_eq!(subjects.len(), 1, "{subjects:?}");
    assert_eq!(subjects[0]["kind"], "ServiceAccount");
    assert_eq!(subjects[0]["name"], "kerf-agent");
    assert_eq!(subjects[0]["namespace"], RELEASE_NS);
}

fn config_data(docs: &[Value]) -> Res<BTreeMap<String, String>> {
    let cm = one(docs, "ConfigMap")?;
    let data = cm["data"].as_mapping().ok_or("ConfigMap without data")?;
    Ok(data
        .iter()
        .filter_map(|(k, v)| Some((k.as_str()?.to_owned(), v.as_str()?.to_owned())))
        .collect())
}

/// The `KERF_SCOPE_*` keys of the ConfigMap, and the Deployment's env entries taking
/// them from it (which must be the same keys).
fn scope_settings(docs: &[Value]) -> Res<BTreeMap<String, String>> {
    let data = config_data(docs)?;
    let scope: BTreeMap<String, String> = data
        .into_iter()
        .filter(|(k, _)| k.starts_with("KERF_SCOPE_"))
        .collect();
    let container = &one(docs, "Deployment")?["spec"]["template"]["spec"]["containers"][0];
    let from_config: BTreeSet<&str> = container["env"]
        .as_sequence()
        .into_iter()
        .flatten()
        .filter(|e| {
            e["name"]
                .as_str()
                .is_some_and(|n| n.starts_with("KERF_SCOPE_"))
        })
        .filter_map(|e| {
            let r = &e["valueFrom"]["configMapKeyRef"];
            (r["name"] == "kerf-agent-config" && r["key"] == e["name"])
                .then(|| r["key"].as_str())?
        })
        .collect();
    let keys: BTreeSet<&str> = scope.keys().map(String::as_str).collect();
    assert_eq!(from_config, keys, "the Deployment's KERF_SCOPE_* env");
    Ok(scope)
}

/// The scope the agent makes of the rendered `KERF_SCOPE_*` settings
/// (`kerf-agent run --print-settings`).
fn agent_scope(scope: &BTreeMap<String, String>) -> Res<serde_json::Value> {
    let mut env = scope.clone();
    env.insert("KERF_CLUSTER_NAME".into(), "prod".into());
    let s = chart_support::print_settings(&env)?;
    Ok(s["scope"].clone())
}

fn webhook_selector(docs: &[Value]) -> Res<Value> {
    let hook = one(docs, "MutatingWebhookConfiguration")?;
    Ok(hook["webhooks"][0]["namespaceSelector"].clone())
}

#[allow(clippy::unwrap_used)] // test helper: a bad literal fails the test
fn yaml(text: &str) -> Value {
    serde_yaml::from_str(text).unwrap()
}

/// The webhook's own exclusions: never the agent's namespace nor kube-system.
const EXCLUDED: &str =
    "{key: kubernetes.io/metadata.name, operator: NotIn, values: [kube-system, kerf-system]}";

#[test]
fn without_a_scope_the_cluster_role_holds_every_rule_and_no_scope_role_is_rendered() {
    let docs = render(&[]).unwrap();
    let expected = set(&[&NAMESPACED, &RSR, &CLUSTER]);
    assert_eq!(cluster_role_perms(&docs).unwrap(), expected);
    assert!(named(&docs, "Role", "kerf-agent-scope").is_empty());
    assert!(named(&docs, "Role", "kerf-agent-policy-events").is_empty());
    // The release namespace's Role alone (Lease and hub state ConfigMap).
    let roles: Vec<_> = docs.iter().filter(|d| d["kind"] == "Role").collect();
    assert_eq!(roles.len(), 1);
    assert_eq!(roles[0]["metadata"]["namespace"], RELEASE_NS);
    assert!(scope_settings(&docs).unwrap().is_empty());
    assert_eq!(
        webhook_selector(&docs).unwrap(),
        yaml(&format!("{{matchExpressions: [{EXCLUDED}]}}"))
    );
}

#[test]
fn a_namespace_list_grants_the_namespaced_rules_in_a_role_of_each_listed_namespace() {
    let docs = render_list(&["payments", "shop"], &[]).unwrap();
    let roles = named(&docs, "Role", "kerf-agent-scope");
    assert_eq!(
        roles.keys().copied().collect::<Vec<_>>(),
        ["payments", "shop"]
    );
    for (ns, role) in &roles {
        assert_eq!(perms(role), namespaced(), "the Role in {ns}");
        assert_bound(&docs, "kerf-agent-scope", ns);
    }
}

#[test]
fn a_namespace_list_leaves_no_namespaced_rule_in_the_cluster_role() {
    let docs = render_list(&["payments", "shop"], &[]).unwrap();
    let cluster = cluster_role_perms(&docs).unwrap();
    assert_eq!(cluster, set(&[&CLUSTER]));
    for p in &cluster {
        let resource = p.split(' ').nth(1).unwrap_or_default();
        assert!(
            !["pods", "events", "replicasets", "horizontalpodautoscalers"]
                .iter()
                .any(|r| resource.starts_with(r)),
            "{p}"
        );
        assert!(
            !p.starts_with("apps ") && !p.contains("rightsizingrecommendations"),
            "{p}"
        );
    }
}

#[test]
fn policy_events_get_a_role_in_default_unless_default_is_listed() {
    let docs = render_list(&["payments"], &[]).unwrap();
    let roles = named(&docs, "Role", "kerf-agent-policy-events");
    let role = roles
        .get("default")
        .expect("a policy events Role in default");
    assert_eq!(roles.len(), 1);
    assert_eq!(perms(role), set(&[&["core events create"]]));
    assert_bound(&docs, "kerf-agent-policy-events", "default");
    assert!(!named(&docs, "Role", "kerf-agent-scope").contains_key("default"));

    // Listed, `default` has the scope's Role, whose events rule covers the policies'.
    let docs = render_list(&["default", "payments"], &[]).unwrap();
    assert!(named(&docs, "Role", "kerf-agent-policy-events").is_empty());
    assert!(named(&docs, "RoleBinding", "kerf-agent-policy-events").is_empty());
    let scope = named(&docs, "Role", "kerf-agent-scope");
    assert!(perms(scope["default"]).contains("core events create"));
}

#[test]
fn a_namespace_list_reaches_the_agent_through_the_config_map() {
    let docs = render_list(&["payments", "shop"], &[]).unwrap();
    let scope = scope_settings(&docs).unwrap();
    assert_eq!(
        scope,
        BTreeMap::from([(
            "KERF_SCOPE_NAMESPACES".to_owned(),
            "payments,shop".to_owned()
        )])
    );
    let s = agent_scope(&scope).unwrap();
    assert_eq!(
        s["namespaces"],
        serde_json::json!(["payments", "shop"]),
        "{s}"
    );
}

#[test]
fn a_namespace_list_limits_the_webhook_to_the_listed_namespaces() {
    let docs = render_list(&["payments", "shop"], &[]).unwrap();
    let in_list = "{key: kubernetes.io/metadata.name, operator: In, values: [payments, shop]}";
    assert_eq!(
        webhook_selector(&docs).unwrap(),
        yaml(&format!("{{matchExpressions: [{EXCLUDED}, {in_list}]}}"))
    );
    // The exclusions stay merged with the list.
    let docs = render_list(
        &["payments"],
        &["--set-json", r#"webhook.excludeNamespaces=["legacy"]"#],
    )
    .unwrap();
    let exprs = webhook_selector(&docs).unwrap()["matchExpressions"].clone();
    assert_eq!(
        exprs,
        yaml(
            "[{key: kubernetes.io/metadata.name, operator: NotIn, \
             values: [kube-system, kerf-system, legacy]}, \
             {key: kubernetes.io/metadata.name, operator: In, values: [payments]}]"
        )
    );
}

#[test]
fn a_namespace_selector_becomes_the_webhook_namespace_selector() {
    let text =
        "team=payments,tier in (web, api),!legacy,env!=dev,zone notin (a,b),kerf.dev/managed";
    let docs = render_selector("namespaceSelector", text).unwrap();
    let expected = format!(
        "{{matchLabels: {{team: payments}}, matchExpressions: [{EXCLUDED}, \
         {{key: tier, operator: In, values: [web, api]}}, \
         {{key: legacy, operator: DoesNotExist}}, \
         {{key: env, operator: NotIn, values: [dev]}}, \
         {{key: zone, operator: NotIn, values: [a, b]}}, \
         {{key: kerf.dev/managed, operator: Exists}}]}}"
    );
    assert_eq!(webhook_selector(&docs).unwrap(), yaml(&expected));
    let scope = scope_settings(&docs).unwrap();
    assert_eq!(
        scope,
        BTreeMap::from([("KERF_SCOPE_NAMESPACE_SELECTOR".to_owned(), text.to_owned())])
    );
    assert_eq!(agent_scope(&scope).unwrap()["namespaceSelector"], text);
}

#[test]
fn a_namespace_selector_keeps_rbac_cluster_wide() {
    let docs = render_selector("namespaceSelector", "team=payments").unwrap();
    assert_eq!(
        cluster_role_perms(&docs).unwrap(),
        set(&[&NAMESPACED, &RSR, &CLUSTER])
    );
    assert!(named(&docs, "Role", "kerf-agent-scope").is_empty());
    assert!(named(&docs, "Role", "kerf-agent-policy-events").is_empty());
}

#[test]
fn the_workload_selector_reaches_the_agent_and_changes_neither_rbac_nor_the_webhook() {
    let text = "kerf.example.com/managed=true";
    let docs = render_selector("workloadSelector", text).unwrap();
    let scope = scope_settings(&docs).unwrap();
    assert_eq!(
        scope,
        BTreeMap::from([("KERF_SCOPE_WORKLOAD_SELECTOR".to_owned(), text.to_owned())])
    );
    assert_eq!(agent_scope(&scope).unwrap()["workloadSelector"], text);
    assert_eq!(
        cluster_role_perms(&docs).unwrap(),
        set(&[&NAMESPACED, &RSR, &CLUSTER])
    );
    let hook = one(&docs, "MutatingWebhookConfiguration").unwrap();
    assert!(hook["webhooks"][0].get("objectSelector").is_none());
    assert_eq!(
        webhook_selector(&docs).unwrap(),
        yaml(&format!("{{matchExpressions: [{EXCLUDED}]}}"))
    );
}

#[test]
fn the_vpa_source_keeps_the_vpa_read_in_the_cluster_role_with_a_namespace_list() {
    let docs = render_list(
        &["payments"],
        &[
            "--set",
            "recommendations.source=vpa",
            "--set",
            "health.cadvisorFallback=true",
        ],
    )
    .unwrap();
    let expected = set(&[&CLUSTER, &VPA_READ, &["core nodes/proxy get"]]);
    assert_eq!(cluster_role_perms(&docs).unwrap(), expected);
    let roles = named(&docs, "Role", "kerf-agent-scope");
    assert_eq!(perms(roles["payments"]), namespaced());
}

#[test]
fn a_namespace_list_and_a_namespace_selector_together_fail_rendering() {
    let [flag, value] = scope_json("namespaceSelector", &serde_json::json!("team=a"));
    let err = render_list(&["payments"], &[&flag, &value]).unwrap_err();
    let err = err.to_string();
    assert!(
        err.contains(
            r#"scope.namespaceSelector "team=a" cannot be used together with scope.namespaces (payments)"#
        ),
        "{err}"
    );
}

/// Whether the agent accepts `text` as its namespace selector.
fn agent_accepts(text: &str) -> bool {
    let env = BTreeMap::from([
        ("KERF_CLUSTER_NAME".to_owned(), "prod".to_owned()),
        ("KERF_SCOPE_NAMESPACE_SELECTOR".to_owned(), text.to_owned()),
    ]);
    chart_support::print_settings(&env).is_ok()
}

#[test]
fn a_selector_that_does_not_parse_fails_rendering_with_its_reason() {
    for (text, reason) in [
        (
            "tier>2",
            r#"requirement 1 "tier>2": operator > is not supported"#,
        ),
        (
            "a in ()",
            "the value list of in and notin must not be empty",
        ),
        ("a,,b", r#"requirement 2 "": empty"#),
        ("a in (b", r#"requirement 1 "a in (b": expected key=value"#),
        (
            "team=a,tier in (web",
            r#"requirement 2 "tier in (web": expected"#,
        ),
        ("Team_=x", "expected key=value"),
        ("a=b=c", "expected key=value"),
        ("a in (b,-c)", r#""-c" is not a label value"#),
        ("x/y/z=1", "expected key=value"),
    ] {
        for key in ["namespaceSelector", "workloadSelector"] {
            let err = render_selector(key, text).unwrap_err().to_string();
            let head = format!("scope.{key} {text:?} is not a label selector: ");
            assert!(err.contains(&head), "{text}: {err}");
            assert!(err.contains(reason), "{text}: {err}");
        }
        assert!(!agent_accepts(text), "the agent accepts {text:?}");
    }
}

#[test]
fn the_chart_accepts_the_selectors_the_agent_accepts() {
    for text in [
        "team=a",
        "team==a",
        " team = a , !legacy ",
        "env!=",
        "tier in (web,api)",
        "tier notin(a, b)",
        "example.com/team",
        "a in (b,)",
    ] {
        assert!(agent_accepts(text), "the agent refuses {text:?}");
        let docs =
            render_selector("namespaceSelector", text).unwrap_or_else(|e| panic!("{text:?}: {e}"));
        assert!(webhook_selector(&docs).is_ok());
    }
}

#[test]
fn a_namespace_name_that_is_not_a_dns_label_is_refused_by_the_schema() {
    for bad in [
        r#"["Payments"]"#,
        r#"["pay_ments"]"#,
        r#"["a","a"]"#,
        r#"[""]"#,
    ] {
        let err = render(&["--set-json", &format!("scope.namespaces={bad}")]).unwrap_err();
        let err = err.to_string();
        assert!(
            err.contains("don't meet the specifications of the schema"),
            "{bad}: {err}"
        );
        assert!(err.contains("/scope/namespaces"), "{bad}: {err}");
    }
}

/// The NOTES helm prints after `helm install --dry-run=client` with `args`.
fn notes(helm: &Path, args: &[&str]) -> Res<String> {
    let out = Command::new(helm)
        .args(["install", "--dry-run=client", "kerf-agent"])
        .arg(chart_support::chart_dir())
        .args(["-n", RELEASE_NS, "--set", "clusterName=prod"])
        .args(args)
        .env("KUBECONFIG", "/nonexistent")
        .output()?;
    if !out.status.success() {
        return Err(String::from_utf8_lossy(&out.stderr).into_owned().into());
    }
    let stdout = String::from_utf8(out.stdout)?;
    let at = stdout.find("NOTES:").ok_or("no NOTES")?;
    Ok(stdout[at..].to_owned())
}

#[test]
fn the_notes_show_the_scope_when_one_is_set() {
    let helm = chart_support::helm();
    let plain = notes(&helm, &[]).unwrap();
    assert!(!plain.contains("Scope"), "{plain}");
    let scoped = notes(
        &helm,
        &[
            "--set-json",
            r#"scope.namespaces=["payments","shop"]"#,
            "--set",
            "scope.workloadSelector=managed",
        ],
    )
    .unwrap();
    assert!(scoped.contains("Scope: the agent manages only"), "{scoped}");
    assert!(scoped.contains("the namespaces payments, shop"), "{scoped}");
    assert!(scoped.contains("kerf-agent-scope"), "{scoped}");
    assert!(scoped.contains(r#"own labels match "managed""#), "{scoped}");
}
