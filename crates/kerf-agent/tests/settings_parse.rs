//! Settings of `kerf-agent run`: flags, environment, defaults and every validation error.

use std::collections::HashMap;
use std::process::Command;
use std::time::Duration;

use clap::Parser;
use kerf_agent::cli::{Cli, Command as Sub, RunArgs};
use kerf_agent::settings::{Settings, SettingsError};

fn args(extra: &[&str]) -> Result<RunArgs, clap::Error> {
    let mut v = vec!["kerf-agent", "run", "--cluster-name", "prod-eu"];
    v.extend_from_slice(extra);
    match Cli::try_parse_from(v)?.command {
        Sub::Run(a) => Ok(*a),
        _ => Err(clap::Error::new(clap::error::ErrorKind::InvalidSubcommand)),
    }
}

fn settings(extra: &[&str]) -> Result<Settings, SettingsError> {
    let env: HashMap<&str, &str> =
        HashMap::from([("POD_NAMESPACE", "kerf"), ("POD_NAME", "kerf-agent-0")]);
    let a = args(extra).map_err(|e| SettingsError::Invalid {
        flag: "clap",
        value: e.to_string(),
        reason: String::new(),
    })?;
    Settings::from_args(&a, &|k| env.get(k).map(|v| (*v).to_owned()))
}

#[allow(clippy::expect_used)] // test helper: an accepted value fails the test
fn err(extra: &[&str]) -> String {
    settings(extra).expect_err("must be rejected").to_string()
}

// rule: GR-25, AP-55, AP-57
#[test]
fn defaults_are_the_documented_ones() {
    let s = settings(&[]).unwrap();
    assert_eq!(s.cluster_name, "prod-eu");
    assert_eq!(s.namespace, "kerf");
    assert_eq!(s.tolerance.percent_milli, 5_000);
    assert_eq!(s.hub.poll_interval, Duration::from_secs(60));
    assert_eq!(s.hub.stale_after, Duration::from_secs(30 * 60));
    assert_eq!(s.hub.url, None);
    assert_eq!(s.health.throttling_delay, Duration::from_secs(120));
    assert!(!s.health.cadvisor_fallback);
    assert_eq!(s.on_delete.max_pod_deletes_per_run, 1);
    assert_eq!(s.on_delete.settle, Duration::from_secs(30));
    assert!(!s.freeze.now);
    assert!(s.freeze.windows.is_empty());
    assert!(s.cluster_defaults.is_none());
    let le = &s.leader_election;
    assert!(le.enabled);
    assert_eq!(le.lease_name, "kerf-agent");
    assert_eq!(le.namespace, "kerf");
    assert_eq!(le.identity, "kerf-agent-0");
    assert_eq!(le.lease_duration, Duration::from_secs(15));
    assert_eq!(le.renew_deadline, Duration::from_secs(10));
    assert_eq!(le.retry_period, Duration::from_secs(2));
    assert_eq!(s.outbox.max_events, 10_000);
    assert_eq!(s.outbox.max_bytes, 8 * 1024 * 1024);
    assert_eq!(s.reconcile.concurrency, 16);
    assert_eq!(s.reconcile.writes_per_second, 20);
    assert_eq!(s.reconcile.write_burst, 40);
    assert_eq!(s.metrics_addr.to_string(), "0.0.0.0:8080");
    assert_eq!(s.webhook.addr.to_string(), "0.0.0.0:8443");
}

#[test]
fn flags_set_every_value() {
    let s = settings(&[
        "--hub-url",
        "https://hub.example.com/",
        "--hub-token-file",
        "/t",
        "--hub-poll-interval",
        "1m30s",
        "--hub-stale-after",
        "1h",
        "--tolerance",
        "2.5",
        "--health-metrics-url",
        "http://prom:9090",
        "--health-cadvisor-fallback",
        "--health-throttling-delay",
        "90s",
        "--unsupported-node-selector",
        "cpu-manager=static,pool=db",
        "--unsupported-node-selector",
        "mem=static",
        "--on-delete-max-pod-deletes-per-run",
        "3",
        "--on-delete-settle",
        "1m",
        "--freeze-now",
        "--freeze-windows",
        r#"[{"start":"2025-12-20T00:00:00Z","end":"2026-01-02T00:00:00Z"}]"#,
        "--leader-election=false",
        "--lease-name",
        "kerf",
        "--leader-identity",
        "me",
        "--outbox-max-events",
        "50",
        "--outbox-max-bytes",
        "1048576",
        "--metrics-addr",
        "127.0.0.1:9000",
        "--webhook-addr",
        "127.0.0.1:9443",
        "--log-format",
        "json",
        "--namespace",
        "ops",
    ])
    .unwrap();
    assert_eq!(s.hub.url.as_deref(), Some("https://hub.example.com"));
    assert_eq!(s.hub.poll_interval, Duration::from_secs(90));
    assert_eq!(s.tolerance.percent_milli, 2_500);
    assert!(s.health.cadvisor_fallback);
    assert_eq!(s.unsupported_node_selectors.len(), 2);
    assert_eq!(
        s.unsupported_node_selectors[0]
            .0
            .get("pool")
            .map(String::as_str),
        Some("db")
    );
    assert_eq!(s.on_delete.max_pod_deletes_per_run, 3);
    assert!(s.freeze.now);
    assert_eq!(s.freeze.windows.len(), 1);
    assert!(!s.leader_election.enabled);
    assert_eq!(s.leader_election.identity, "me");
    assert_eq!(s.namespace, "ops");
    assert_eq!(s.outbox.max_bytes, 1_048_576);
    assert_eq!(s.metrics_addr.to_string(), "127.0.0.1:9000");
}

/// Flags with an invalid value, each with a part of the error that names it.
const INVALID_VALUES: &[(&[&str], &str)] = &[
    (
        &["--tolerance", "150"],
        r#"invalid --tolerance "150": must be between 0 and 100 (exclusive)"#,
    ),
    (
        &["--tolerance", "0"],
        "invalid --tolerance \"0\": must be between 0 and 100",
    ),
    (&["--tolerance", "100"], "must be between 0 and 100"),
    (&["--tolerance", "abc"], "invalid --tolerance \"abc\""),
    (&["--tolerance", "1.23456"], "at most 3 decimals"),
    (
        &["--hub-poll-interval", "soon"],
        "invalid --hub-poll-interval \"soon\"",
    ),
    (
        &["--hub-stale-after", "0s"],
        "invalid --hub-stale-after \"0s\": must be at least 1s",
    ),
    (
        &["--health-throttling-delay=-2m"],
        r#"invalid --health-throttling-delay "-2m": must not be negative"#,
    ),
    (
        &["--on-delete-settle", "30"],
        "invalid --on-delete-settle \"30\"",
    ),
    (
        &["--on-delete-max-pod-deletes-per-run", "0"],
        "invalid --on-delete-max-pod-deletes-per-run",
    ),
    (&["--hub-url", "ftp://x"], "invalid --hub-url"),
    (
        &["--health-metrics-url", "prometheus:9090"],
        "invalid --health-metrics-url",
    ),
    (
        &["--unsupported-node-selector", "nokey"],
        "invalid --unsupported-node-selector",
    ),
    (
        &["--unsupported-node-selector", "a=b,=c"],
        "is not a label key",
    ),
    (
        &["--lease-renew-deadline", "20s"],
        "invalid --lease-renew-deadline \"20s\": must be shorter than --lease-duration",
    ),
    (
        &["--lease-retry-period", "10s"],
        "invalid --lease-retry-period",
    ),
    (
        &[
            "--lease-duration",
            "3s",
            "--lease-renew-deadline",
            "2s",
            "--lease-retry-period",
            "1s",
        ],
        "invalid --lease-duration",
    ),
    (&["--outbox-max-events=-1"], "invalid --outbox-max-events"),
    (&["--outbox-max-bytes", "8MB"], "invalid --outbox-max-bytes"),
    (
        &["--reconcile-concurrency=0"],
        "invalid --reconcile-concurrency",
    ),
    (
        &["--max-writes-per-second", "0"],
        "invalid --max-writes-per-second",
    ),
    (&["--write-burst", "lots"], "invalid --write-burst"),
    (&["--metrics-addr", "localhost"], "invalid --metrics-addr"),
    (&["--webhook-addr", "x:y"], "invalid --webhook-addr"),
    (
        &["--freeze-windows", "[{\"schedule\": \"0 0 * * *\"}]"],
        "invalid --freeze-windows",
    ),
    (
        &["--freeze-windows", "/nonexistent/windows.yaml"],
        "cannot read the file",
    ),
    (
        &["--cluster-defaults-file", "/nonexistent/defaults.yaml"],
        "invalid --cluster-defaults-file",
    ),
    (&["--namespace", "Bad_NS"], "invalid --namespace"),
    (&["--log-filter", "kerf=loud"], "invalid --log-filter"),
];

#[test]
fn each_invalid_value_is_named() {
    for (flags, want) in INVALID_VALUES {
        let got = err(flags);
        assert!(got.contains(want), "{flags:?}: got {got:?}, want {want:?}");
    }
    let mut a = args(&[]).unwrap();
    a.decision.cluster_name = Some("Prod EU".into());
    let e = Settings::from_args(&a, &|_| None).unwrap_err().to_string();
    assert!(e.contains(r#"invalid --cluster-name "Prod EU""#), "{e}");
}

#[test]
fn cluster_name_is_required() {
    let e = Cli::try_parse_from(["kerf-agent", "run"]).unwrap_err();
    assert_eq!(e.exit_code(), 2);
    assert!(e.to_string().contains("--cluster-name"), "{e}");
}

/// `--on-delete-settle` as `from_args` reads it (no minimum, so every Go form counts).
fn settle(value: &str) -> Result<Duration, String> {
    let flag = format!("--on-delete-settle={value}");
    settings(&[&flag])
        .map(|s| s.on_delete.settle)
        .map_err(|e| e.to_string())
}

// Durations follow Go's time.ParseDuration: `1.h` and `.5s` are valid there.
#[test]
fn durations_parse_like_go() {
    let cases = [
        ("1h30m", Duration::from_secs(5400)),
        ("1.5h", Duration::from_secs(5400)),
        ("1.h", Duration::from_secs(3600)),
        (".5s", Duration::from_millis(500)),
        ("500ms", Duration::from_millis(500)),
        ("+5m", Duration::from_secs(300)),
        ("1m1m", Duration::from_secs(120)),
        ("1µs", Duration::from_micros(1)),
        ("0", Duration::ZERO),
        ("-0", Duration::ZERO),
    ];
    for (text, want) in cases {
        assert_eq!(settle(text), Ok(want), "{text}");
    }
}

#[test]
fn bad_durations_are_named_with_the_flag() {
    let cases = [
        ("", "empty"),
        ("1", "missing unit"),
        ("1d", "unknown unit"),
        ("h", "expected a number"),
        (".", "expected a number"),
        (".s", "expected a number"),
        ("1.2.3s", "more than one decimal point"),
        ("1h 30m", "unknown unit"),
        (" 1h", "expected a number"),
        ("1h ", "unknown unit"),
    ];
    for (text, reason) in cases {
        let got = settle(text).expect_err(text);
        let want = format!(
            "invalid --on-delete-settle {text:?}: must be a Go duration such as 30s, 2m or 1h30m ({reason})"
        );
        assert_eq!(got, want, "{text}");
    }
    assert_eq!(
        settle("-1s").unwrap_err(),
        r#"invalid --on-delete-settle "-1s": must not be negative"#
    );
    let e = err(&["--health-throttling-delay", "1.5d"]);
    assert!(
        e.starts_with(r#"invalid --health-throttling-delay "1.5d": must be a Go duration"#),
        "{e}"
    );
    let e = err(&["--lease-duration", "500ms"]);
    assert!(
        e.starts_with(r#"invalid --lease-duration "500ms": must be at least 1s"#),
        "{e}"
    );
}

#[test]
fn files_are_read_for_windows_and_cluster_defaults() {
    let dir = tempfile::tempdir().unwrap();
    let windows = dir.path().join("windows.yaml");
    std::fs::write(
        &windows,
        "- schedule: \"0 22 * * 5\"\n  duration: 48h\n  timeZone: Europe/Berlin\n",
    )
    .unwrap();
    let defaults = dir.path().join("defaults.yaml");
    std::fs::write(
        &defaults,
        "mode: auto-patch\nguardrails:\n  cooldown: 12h\n",
    )
    .unwrap();
    let s = settings(&[
        "--freeze-windows",
        windows.to_str().unwrap(),
        "--cluster-defaults-file",
        defaults.to_str().unwrap(),
    ])
    .unwrap();
    assert_eq!(
        s.freeze.windows[0].time_zone.as_deref(),
        Some("Europe/Berlin")
    );
    let d = s.cluster_defaults.unwrap();
    assert_eq!(d.mode, Some(kerf_api::Mode::AutoPatch));
    assert_eq!(d.guardrails.unwrap().cooldown.unwrap().as_str(), "12h");

    std::fs::write(&defaults, "priority: 3\n").unwrap();
    let e = err(&["--cluster-defaults-file", defaults.to_str().unwrap()]);
    assert!(e.contains("selector and priority"), "{e}");
    std::fs::write(&defaults, "guardrails:\n  maxChangePercent: lots\n").unwrap();
    let e = err(&["--cluster-defaults-file", defaults.to_str().unwrap()]);
    assert!(e.contains("guardrails.maxChangePercent"), "{e}");
}

fn agent() -> Command {
    let mut c = Command::new(env!("CARGO_BIN_EXE_kerf-agent"));
    c.env_clear()
        .env("PATH", std::env::var("PATH").unwrap_or_default());
    c
}

#[test]
fn environment_variables_set_values() {
    let v = kerf_testkit::printed_settings(
        agent()
            .args(["run", "--print-settings"])
            .env("KERF_CLUSTER_NAME", "from-env")
            .env("KERF_TOLERANCE", "7.5")
            .env("KERF_UNSUPPORTED_NODE_SELECTORS", "a=b,c=d;e=f")
            .env("KERF_FREEZE_NOW", "true")
            .env("KERF_LEADER_ELECTION", "false")
            .env("KERF_HUB_STALE_AFTER", "45m")
            .env("KERF_HUB_POLL_INTERVAL", "1.m")
            .env("POD_NAMESPACE", "kerf-ns")
            .env("POD_NAME", "agent-1"),
    )
    .unwrap();
    assert_eq!(v["clusterName"], "from-env");
    assert_eq!(v["tolerance"], "7.5%");
    assert_eq!(
        v["unsupportedNodeSelectors"],
        serde_json::json!([{"a": "b", "c": "d"}, {"e": "f"}])
    );
    assert_eq!(v["freeze"]["now"], true);
    assert_eq!(v["leaderElection"]["enabled"], false);
    assert_eq!(v["leaderElection"]["identity"], "agent-1");
    assert_eq!(v["namespace"], "kerf-ns");
    assert_eq!(v["hub"]["staleAfter"], "45m");
    assert_eq!(v["hub"]["pollInterval"], "1m");
}

#[test]
fn an_invalid_setting_exits_with_code_2_naming_it() {
    let out = agent()
        .args(["run", "--cluster-name", "c", "--tolerance", "150"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains(r#"invalid --tolerance "150": must be between 0 and 100 (exclusive)"#),
        "{stderr}"
    );
}

#[test]
fn run_help_documents_every_flag_with_its_variable() {
    let out = agent().args(["run", "--help"]).output().unwrap();
    let help = String::from_utf8_lossy(&out.stdout);
    for var in [
        "KERF_CLUSTER_NAME",
        "KERF_HUB_URL",
        "KERF_HUB_TOKEN_FILE",
        "KERF_HUB_POLL_INTERVAL",
        "KERF_HUB_STALE_AFTER",
        "KERF_TOLERANCE",
        "KERF_HEALTH_METRICS_URL",
        "KERF_HEALTH_CADVISOR_FALLBACK",
        "KERF_HEALTH_THROTTLING_DELAY",
        "KERF_UNSUPPORTED_NODE_SELECTORS",
        "KERF_ON_DELETE_MAX_POD_DELETES_PER_RUN",
        "KERF_ON_DELETE_SETTLE",
        "KERF_FREEZE_NOW",
        "KERF_FREEZE_WINDOWS",
        "KERF_CLUSTER_DEFAULTS_FILE",
        "KERF_LEADER_ELECTION",
        "KERF_LEASE_NAME",
        "KERF_NAMESPACE",
        "KERF_LEADER_IDENTITY",
        "KERF_LEASE_DURATION",
        "KERF_LEASE_RENEW_DEADLINE",
        "KERF_LEASE_RETRY_PERIOD",
        "KERF_OUTBOX_MAX_EVENTS",
        "KERF_OUTBOX_MAX_BYTES",
        "KERF_METRICS_ADDR",
        "KERF_WEBHOOK_ADDR",
        "KERF_WEBHOOK_CERT_FILE",
        "KERF_WEBHOOK_KEY_FILE",
        "KERF_LOG_FORMAT",
        "KERF_LOG",
        "KERF_SCOPE_NAMESPACES",
        "KERF_SCOPE_NAMESPACE_SELECTOR",
        "KERF_SCOPE_WORKLOAD_SELECTOR",
    ] {
        assert!(
            help.contains(&format!("env: {var}=")) || help.contains(&format!("env: {var}]")),
            "{var} missing from --help"
        );
    }
}

// rule: AP-39
#[test]
fn an_invalid_cluster_freeze_window_is_refused_naming_it() {
    let e = err(&[
        "--freeze-windows",
        r#"[{"schedule":"0 25 * * *","duration":"2h"}]"#,
    ]);
    assert!(e.starts_with("invalid --freeze-windows "), "{e}");
    assert!(e.contains(r#"window 0: schedule "0 25 * * *""#), "{e}");
    let e = err(&[
        "--freeze-windows",
        r#"[{"schedule":"0 22 * * 5","duration":"2h","timeZone":"Mars/Olympus"}]"#,
    ]);
    assert!(e.contains(r#"window 0: timeZone "Mars/Olympus""#), "{e}");
    let e = err(&[
        "--freeze-windows",
        r#"[{"start":"2026-01-02T00:00:00Z","end":"2025-12-20T00:00:00Z"}]"#,
    ]);
    assert!(e.contains("window 0: "), "{e}");
}

#[test]
fn an_unknown_key_in_the_cluster_defaults_file_is_refused_naming_it() {
    let dir = tempfile::tempdir().unwrap();
    let defaults = dir.path().join("defaults.yaml");
    let path = defaults.to_str().unwrap();
    std::fs::write(&defaults, "mode: auto-patch\nguardrail:\n  cooldown: 12h\n").unwrap();
    let e = err(&["--cluster-defaults-file", path]);
    assert!(e.starts_with("invalid --cluster-defaults-file "), "{e}");
    assert!(e.contains("unknown key guardrail"), "{e}");
    std::fs::write(&defaults, "guardrails:\n  cooldwn: 12h\n  minCPU: 20m\n").unwrap();
    let e = err(&["--cluster-defaults-file", path]);
    assert!(e.contains("unknown key guardrails.cooldwn"), "{e}");
    // Every documented field is known, empty values included.
    std::fs::write(
        &defaults,
        "mode: audit\nresources:\n  cpu:\n    mode: auto-patch\napply:\n  strategy: in-place\n  maintenanceWindows: []\n  freezeWindows:\n    - schedule: \"0 22 * * 5\"\n      duration: 2h\nguardrails:\n  cooldown: 12h\n  minCPU: 20m\n  rollback:\n    oomKills: 2\nhpa:\n  coordination: true\nrecommendation:\n  cpuPercentile: 90\n",
    )
    .unwrap();
    let s = settings(&["--cluster-defaults-file", path]);
    assert!(s.is_ok(), "{s:?}");
}

#[test]
fn print_settings_writes_the_units_the_flags_take() {
    let v = kerf_testkit::printed_settings(
        agent()
            .args([
                "run",
                "--print-settings",
                "--cluster-name",
                "c",
                "--leader-identity",
                "a",
            ])
            .args([
                "--tolerance",
                "5",
                "--outbox-max-bytes",
                "500Ki",
                "--on-delete-settle",
                "30s",
            ]),
    )
    .unwrap();
    assert_eq!(v["tolerance"], "5%");
    assert_eq!(v["outbox"]["maxBytes"], "500Ki");
    assert_eq!(v["onDelete"]["settle"], "30s");
    assert_eq!(v["leaderElection"]["leaseDuration"], "15s");
}

#[test]
fn print_settings_with_an_invalid_freeze_window_exits_2_naming_the_field() {
    let out = agent()
        .args(["run", "--cluster-name", "c", "--leader-identity", "a"])
        .args([
            "--freeze-windows",
            r#"[{"schedule":"0 25 * * *","duration":"2h"}]"#,
            "--print-settings",
        ])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("invalid --freeze-windows"), "{stderr}");
    assert!(stderr.contains(r#"schedule "0 25 * * *""#), "{stderr}");
}

#[test]
fn run_with_an_invalid_cluster_setting_does_not_exit_2() {
    // It goes on to the Kubernetes client (none here: exit 1 naming it); with a cluster it
    // stays up, not ready (tests/e2e/tests/e2e_bad_setting.rs).
    let out = agent()
        .args(["run", "--cluster-name", "c", "--leader-identity", "a"])
        .args([
            "--freeze-windows",
            r#"[{"schedule":"0 2 * * *","duration":"2h","timeZone":"Europe/Berln"}]"#,
        ])
        .env("KUBECONFIG", "/nonexistent/kubeconfig")
        .env_remove("KUBERNETES_SERVICE_HOST")
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(1), "{stdout}");
    assert!(
        stdout.contains("cannot build a Kubernetes client"),
        "{stdout}"
    );
}

#[test]
fn an_invalid_cluster_setting_is_held_and_named_and_other_flags_still_fail() {
    let env = |_: &str| None;
    let bad_tz = r#"[{"schedule":"0 2 * * *","duration":"2h","timeZone":"Europe/Berln"}]"#;
    let hub = "--hub-url=https://hub.example";
    let a = args(&["--freeze-windows", bad_tz, "--leader-identity", "a", hub]).unwrap();
    let s = Settings::from_args_holding(&a, &env).unwrap();
    assert!(s.holding());
    assert!(s.freeze.windows.is_empty(), "the setting is left out");
    assert_eq!(s.invalid_settings.len(), 1);
    assert_eq!(s.invalid_settings[0].setting, "freeze.windows");
    assert!(
        s.invalid_settings[0].message.contains("Europe/Berln"),
        "{:?}",
        s.invalid_settings
    );
    let reason = s.holding_reason().unwrap_or_default();
    assert!(
        reason.starts_with("invalid setting freeze.windows: invalid --freeze-windows"),
        "{reason}"
    );
    assert!(
        reason.ends_with("makes no change until it is fixed"),
        "{reason}"
    );

    let dir = tempfile::tempdir().unwrap();
    let defaults = dir.path().join("defaults.yaml");
    std::fs::write(&defaults, "guardrail:\n  cooldown: 12h\n").unwrap();
    let path = defaults.display().to_string();
    let a = args(&[
        "--freeze-windows",
        bad_tz,
        "--cluster-defaults-file",
        &path,
        "--leader-identity",
        "a",
        hub,
    ])
    .unwrap();
    let s = Settings::from_args_holding(&a, &env).unwrap();
    let named: Vec<&str> = s.invalid_settings.iter().map(|i| i.setting).collect();
    assert_eq!(named, ["freeze.windows", "clusterDefaults"]);
    assert_eq!(s.cluster_defaults, None);

    // A bad flag that the chart's schema refuses is still a startup error.
    let a = args(&[
        "--freeze-windows",
        bad_tz,
        "--tolerance",
        "150",
        "--leader-identity",
        "a",
    ])
    .unwrap();
    let e = Settings::from_args_holding(&a, &env)
        .unwrap_err()
        .to_string();
    assert!(e.starts_with("invalid --tolerance"), "{e}");
    // A good setting is not held.
    let a = args(&["--leader-identity", "a", "--hub-url", "https://hub.example"]).unwrap();
    assert!(!Settings::from_args_holding(&a, &env).unwrap().holding());
}

#[test]
fn startup_with_an_unknown_cluster_defaults_key_exits_2_naming_it() {
    let dir = tempfile::tempdir().unwrap();
    let defaults = dir.path().join("defaults.yaml");
    std::fs::write(&defaults, "guardrail:\n  cooldown: 12h\n").unwrap();
    let out = agent()
        .args([
            "run",
            "--cluster-name",
            "c",
            "--leader-identity",
            "a",
            "--print-settings",
        ])
        .arg("--cluster-defaults-file")
        .arg(&defaults)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("invalid --cluster-defaults-file"),
        "{stderr}"
    );
    assert!(stderr.contains("unknown key guardrail"), "{stderr}");
}

#[test]
fn explain_help_shows_only_its_own_flags() {
    let out = agent().args(["explain", "--help"]).output().unwrap();
    assert!(out.status.success());
    let help = String::from_utf8_lossy(&out.stdout);
    for used in [
        "<TARGET>",
        "--cluster-name",
        "--hub-url",
        "--hub-token-file",
        "--hub-stale-after",
        "--tolerance",
        "--unsupported-node-selector",
        "--cluster-defaults-file",
        "--freeze-now",
        "--freeze-windows",
    ] {
        assert!(
            help.contains(used),
            "{used} missing from explain --help:\n{help}"
        );
    }
    for unused in [
        "--hub-poll-interval",
        "--metrics-addr",
        "--webhook-addr",
        "--webhook-cert-file",
        "--lease-duration",
        "--leader-election",
        "--outbox-max-bytes",
        "--on-delete-settle",
        "--health-metrics-url",
        "--log-format",
        "--print-settings",
    ] {
        assert!(
            !help.contains(unused),
            "{unused} in explain --help:\n{help}"
        );
    }
}

#[test]
fn explain_validates_its_settings_like_run() {
    let out = agent()
        .args(["explain", "shop/deployment/web", "--cluster-name", "c"])
        .args([
            "--freeze-windows",
            r#"[{"schedule":"0 25 * * *","duration":"2h"}]"#,
        ])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("invalid --freeze-windows"), "{stderr}");
}

/// Runs `run` where no cluster is reachable: the agent logs why it stops and exits 1.
fn run_without_a_cluster(format: &str) -> std::io::Result<String> {
    let dir = tempfile::tempdir()?;
    let out = agent()
        .args(["run", "--cluster-name", "c", "--leader-identity", "a"])
        .args(["--log-format", format])
        .env("KUBECONFIG", dir.path().join("missing-kubeconfig"))
        .env("HOME", dir.path())
        .output()?;
    assert_eq!(
        out.status.code(),
        Some(1),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    Ok(String::from_utf8_lossy(&out.stdout).into_owned())
}

#[test]
fn text_logs_carry_no_colour_codes_when_not_on_a_terminal() {
    let logs = run_without_a_cluster("text").unwrap();
    assert!(logs.contains("kerf-agent stopped"), "{logs}");
    assert!(!logs.contains('\u{1b}'), "colour codes in {logs:?}");
}

#[test]
fn json_logs_are_one_object_per_line() {
    let logs = run_without_a_cluster("json").unwrap();
    let lines: Vec<&str> = logs.lines().collect();
    assert!(!lines.is_empty());
    for line in &lines {
        let v: serde_json::Value =
            serde_json::from_str(line).unwrap_or_else(|e| panic!("{e}: {line}"));
        assert!(v["level"].is_string(), "{line}");
        assert!(v["timestamp"].is_string(), "{line}");
    }
    let last: serde_json::Value = serde_json::from_str(lines[lines.len() - 1]).unwrap();
    assert_eq!(last["message"], "kerf-agent stopped", "{last}");
    assert_eq!(last["level"], "ERROR");
}

#[allow(clippy::expect_used)] // test helper: a refused setting fails the test
fn held_source(extra: &[&str]) -> Settings {
    let env = |_: &str| None;
    let mut all = vec!["--leader-identity", "a"];
    all.extend_from_slice(extra);
    let a = args(&all).expect("flags parse");
    Settings::from_args_holding(&a, &env).expect("held, not refused")
}

fn source_message(s: &Settings) -> String {
    let held: Vec<&str> = s.invalid_settings.iter().map(|i| i.setting).collect();
    assert_eq!(held, ["recommendations.source"], "{:?}", s.invalid_settings);
    s.invalid_settings[0].message.clone()
}

#[test]
fn the_recommendation_source_is_hub_with_a_hub_url_and_vpa_without_one() {
    use kerf_api::rsr::RecommendationSource;
    let s = held_source(&["--hub-url", "https://hub.example"]);
    assert_eq!(s.recommendation_source, RecommendationSource::Hub);
    assert!(!s.holding());
    let s = held_source(&["--recommendation-source", "vpa"]);
    assert_eq!(s.recommendation_source, RecommendationSource::Vpa);
    assert!(!s.holding());
    let s = held_source(&["--recommendation-source", "hub", "--hub-url", "http://hub"]);
    assert_eq!(s.recommendation_source, RecommendationSource::Hub);
    assert!(!s.holding());
}

#[test]
fn a_bad_recommendation_source_is_held_naming_the_values() {
    let s = held_source(&["--recommendation-source", "vpaa", "--hub-url", "http://hub"]);
    assert!(s.holding());
    let m = source_message(&s);
    assert!(
        m.starts_with(
            r#"invalid --recommendation-source "vpaa": must be one of hub, vpa, prometheus"#
        ),
        "{m}"
    );
    let reason = s.holding_reason().unwrap_or_default();
    assert!(
        reason.starts_with("invalid setting recommendations.source"),
        "{reason}"
    );
    // `run` without holding refuses it outright (explain reads settings this way).
    let e = err(&["--recommendation-source", "Vpa"]);
    assert!(e.starts_with("invalid --recommendation-source"), "{e}");
}

#[test]
fn no_hub_url_and_no_source_is_held_saying_what_to_set() {
    let s = held_source(&[]);
    assert!(s.holding());
    let m = source_message(&s);
    assert!(m.contains("set hub.url (--hub-url)"), "{m}");
    assert!(
        m.contains("recommendations.source (--recommendation-source) to vpa"),
        "{m}"
    );
    let m = source_message(&held_source(&["--recommendation-source", "hub"]));
    assert!(m.contains("needs hub.url"), "{m}");
}

#[test]
fn a_local_source_with_a_hub_url_is_held_one_source_per_agent() {
    let s = held_source(&["--recommendation-source", "vpa", "--hub-url", "http://hub"]);
    let m = source_message(&s);
    assert!(m.contains("runs without a hub, but hub.url"), "{m}");
}

#[test]
fn the_prometheus_source_needs_the_prometheus_it_reads() {
    use kerf_api::rsr::RecommendationSource;
    let m = source_message(&held_source(&["--recommendation-source", "prometheus"]));
    assert!(
        m.contains("needs health.metricsURL (--health-metrics-url)"),
        "{m}"
    );
    let s = held_source(&[
        "--recommendation-source",
        "prometheus",
        "--health-metrics-url",
        "http://prometheus.monitoring:9090",
    ]);
    assert_eq!(s.recommendation_source, RecommendationSource::Prometheus);
    assert!(!s.holding());
    let s = held_source(&[
        "--recommendation-source",
        "prometheus",
        "--health-metrics-url",
        "http://prometheus.monitoring:9090",
        "--hub-url",
        "http://hub",
    ]);
    assert!(source_message(&s).contains("runs without a hub, but hub.url"));
}
