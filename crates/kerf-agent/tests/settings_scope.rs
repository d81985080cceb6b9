//! The scope settings of `kerf-agent run` (docs/configuration.md#scoped-installs): the
//! flags and variables, their defaults, and the start-up errors that name them.

use std::collections::HashMap;
use std::process::Command;

use clap::Parser;
use kerf_agent::cli::{Cli, Command as Sub};
use kerf_agent::settings::Settings;

fn settings(extra: &[&str]) -> Result<Settings, String> {
    let mut v = vec!["kerf-agent", "run", "--cluster-name", "prod-eu"];
    v.extend_from_slice(extra);
    let Sub::Run(a) = Cli::try_parse_from(v).map_err(|e| e.to_string())?.command else {
        return Err("not run".to_owned());
    };
    let env: HashMap<&str, &str> =
        HashMap::from([("POD_NAMESPACE", "kerf"), ("POD_NAME", "kerf-agent-0")]);
    Settings::from_args(&a, &|k| env.get(k).map(|v| (*v).to_owned())).map_err(|e| e.to_string())
}

fn agent() -> Command {
    let mut c = Command::new(env!("CARGO_BIN_EXE_kerf-agent"));
    c.env_clear()
        .env("PATH", std::env::var("PATH").unwrap_or_default());
    c
}

#[test]
fn the_scope_is_the_whole_cluster_by_default() {
    let s = settings(&[]).unwrap();
    assert!(s.scope.is_cluster(), "{:?}", s.scope);
    assert!(s.scope.namespaces.is_empty());
    // Empty values are no scope either.
    let s = settings(&[
        "--scope-namespaces=",
        "--scope-namespace-selector=",
        "--scope-workload-selector=",
    ])
    .unwrap();
    assert!(s.scope.is_cluster(), "{:?}", s.scope);
}

#[test]
fn the_scope_flags_set_the_namespaces_and_the_selectors() {
    let s = settings(&[
        "--scope-namespaces",
        "a,b",
        "--scope-workload-selector",
        "kerf=on",
    ])
    .unwrap();
    assert_eq!(s.scope.namespaces, ["a", "b"]);
    assert_eq!(
        s.scope.workload_selector.as_ref().map(|w| w.text.as_str()),
        Some("kerf=on")
    );
    let s = settings(&["--scope-namespace-selector", "team in (a,b),!legacy"]).unwrap();
    let ns = s.scope.namespace_selector.as_ref().unwrap();
    assert_eq!(ns.text, "team in (a,b),!legacy");
    assert_eq!(
        ns.selector.match_expressions.as_ref().map(Vec::len),
        Some(2)
    );
}

#[test]
fn a_namespace_list_and_a_namespace_selector_together_are_refused_saying_which_to_choose() {
    let e = settings(&[
        "--scope-namespaces",
        "a",
        "--scope-namespace-selector",
        "team=a",
    ])
    .unwrap_err();
    assert!(
        e.starts_with(r#"invalid --scope-namespace-selector "team=a": cannot be used together with --scope-namespaces (a): choose either"#),
        "{e}"
    );
    assert!(
        e.contains("scope.namespaces") && e.contains("scope.namespaceSelector"),
        "{e}"
    );
}

#[test]
fn a_bad_scope_value_is_refused_naming_the_flag_and_the_key() {
    let rows = [
        (
            &["--scope-namespace-selector", "team in (a"][..],
            r#"invalid --scope-namespace-selector "team in (a": scope.namespaceSelector is not a label selector: a '(' without its ')'"#,
        ),
        (
            &["--scope-workload-selector", "app=web,tier>2"][..],
            r#"invalid --scope-workload-selector "app=web,tier>2": scope.workloadSelector is not a label selector: requirement 2 "tier>2": operator > is not supported"#,
        ),
        (
            &["--scope-namespaces", "a,Bad_NS"][..],
            r#"invalid --scope-namespaces "a,Bad_NS": "Bad_NS" is not a namespace name"#,
        ),
    ];
    for (flags, want) in rows {
        let e = settings(flags).unwrap_err();
        assert!(e.starts_with(want), "{flags:?}: {e}");
    }
}

#[test]
fn a_bad_scope_selector_stops_startup_with_code_2_and_no_panic() {
    let out = agent()
        .args(["run", "--cluster-name", "c"])
        .env("KERF_SCOPE_WORKLOAD_SELECTOR", "a in (b")
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains(r#"invalid --scope-workload-selector "a in (b": scope.workloadSelector"#),
        "{stderr}"
    );
    assert!(!stderr.contains("panicked"), "{stderr}");
}

#[test]
fn the_scope_variables_set_the_scope_and_the_flag_wins() {
    let v = kerf_testkit::printed_settings(
        agent()
            .args(["run", "--print-settings", "--cluster-name", "c"])
            .args([
                "--leader-identity",
                "a",
                "--scope-workload-selector",
                "team=web",
            ])
            .env("KERF_SCOPE_NAMESPACES", "a,b")
            .env("KERF_SCOPE_WORKLOAD_SELECTOR", "team=api"),
    )
    .unwrap();
    assert_eq!(v["scope"]["namespaces"], serde_json::json!(["a", "b"]));
    assert_eq!(v["scope"]["namespaceSelector"], serde_json::Value::Null);
    assert_eq!(v["scope"]["workloadSelector"], "team=web");
}
