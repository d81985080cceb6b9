//! The values schema's checks of `freeze.windows` beyond their shape: a cron schedule
//! whose fields are out of range (`0 25 * * *`), a time zone that is not shaped as an IANA
//! name, a start or end that is not an RFC 3339 time, and a duration not in Go's form are
//! refused by `helm template` and `helm install`. A pattern never refuses what the agent
//! accepts; what a pattern cannot see (`Europe/Berln`) renders, and the agent then holds
//! (tests/e2e/tests/e2e_bad_setting.rs). Needs helm (see chart_support).

mod chart_support;

use std::process::Command;

use kerf_api::validate::{parse_schedule, parse_time_zone};
use regex::Regex;
use serde_json::Value;

type Res<T> = Result<T, Box<dyn std::error::Error>>;

/// The schema's pattern for one field of a freeze window.
fn pattern(field: &str) -> Res<Regex> {
    let text = std::fs::read_to_string(chart_support::chart_dir().join("values.schema.json"))?;
    let schema: Value = serde_json::from_str(&text)?;
    let p = schema["definitions"]["windowValues"]["properties"][field]["pattern"]
        .as_str()
        .ok_or_else(|| format!("no pattern for {field}"))?;
    Ok(Regex::new(p)?)
}

/// Field values to try, valid and not, for every position of a schedule.
const TOKENS: &[&str] = &[
    "*", "*/5", "*/0", "0", "00", "007", "1", "7", "8", "12", "13", "23", "24", "29", "31", "32",
    "59", "60", "1-5", "5-1", "1-5/2", "0-7", "5/10", "1,2,3", "1,60", "MON", "mon", "MON-FRI",
    "FRI-SUN", "JAN", "jan-mar", "FOO", "L", "?", "5#2", "-1", "",
];

#[test]
fn the_schedule_pattern_never_refuses_a_schedule_the_agent_accepts() -> Res<()> {
    let re = pattern("schedule")?;
    let mut tried = 0;
    for position in 0..5 {
        for token in TOKENS {
            let mut fields = ["*"; 5];
            fields[position] = token;
            let schedule = fields.join(" ");
            if parse_schedule(&schedule).is_ok() {
                assert!(re.is_match(&schedule), "the pattern refuses {schedule:?}");
                tried += 1;
            }
        }
    }
    for schedule in [
        "0 18 * * 5",
        " 30  2 * * MON-FRI ",
        "0 0 1 */3 *",
        "*/15 9-17 * * 1-5",
    ] {
        assert!(parse_schedule(schedule).is_ok(), "{schedule:?}");
        assert!(re.is_match(schedule), "the pattern refuses {schedule:?}");
    }
    assert!(tried > 60, "only {tried} accepted schedules tried");
    Ok(())
}

#[test]
fn the_schedule_pattern_refuses_fields_out_of_range() -> Res<()> {
    let re = pattern("schedule")?;
    for schedule in [
        "0 25 * * *",
        "60 * * * *",
        "* * 32 * *",
        "* * 0 * *",
        "* * * 13 *",
        "* * * * 8",
        "5/10 * * * *",
        "*/0 * * * *",
        "0 0 * *",
        "0 0 0 * * *",
        "@daily",
        "0 0 L * *",
        "0 0 * * 5#2",
    ] {
        assert!(
            parse_schedule(schedule).is_err(),
            "the agent accepts {schedule:?}"
        );
        assert!(!re.is_match(schedule), "the pattern accepts {schedule:?}");
    }
    Ok(())
}

#[test]
fn the_time_zone_pattern_accepts_every_iana_name_and_refuses_other_shapes() -> Res<()> {
    let re = pattern("timeZone")?;
    for tz in chrono_tz::TZ_VARIANTS {
        assert!(re.is_match(tz.name()), "the pattern refuses {}", tz.name());
    }
    for shape in [
        "Europe Berlin",
        "+02:00",
        "",
        "Europe/",
        "/Berlin",
        "Europe//Berlin",
    ] {
        assert!(parse_time_zone(shape).is_err(), "{shape:?}");
        assert!(!re.is_match(shape), "the pattern accepts {shape:?}");
    }
    assert!(parse_time_zone("Europe/Berln").is_err());
    assert!(
        re.is_match("Europe/Berln"),
        "well-formed: left to the agent"
    );
    Ok(())
}

#[test]
fn the_time_pattern_accepts_rfc_3339_and_refuses_dates_alone() -> Res<()> {
    let re = pattern("start")?;
    assert_eq!(re.as_str(), pattern("end")?.as_str());
    for t in [
        "2026-12-23T00:00:00Z",
        "2026-12-23T08:30:00.5+01:00",
        "2026-12-23t00:00:00z",
    ] {
        assert!(chrono::DateTime::parse_from_rfc3339(t).is_ok(), "{t}");
        assert!(re.is_match(t), "the pattern refuses {t:?}");
    }
    for t in [
        "2026-12-23",
        "2026-12-23T00:00:00",
        "23.12.2026 00:00",
        "2026-13-01T00:00:00Z",
    ] {
        assert!(chrono::DateTime::parse_from_rfc3339(t).is_err(), "{t}");
        assert!(!re.is_match(t), "the pattern accepts {t:?}");
    }
    Ok(())
}

/// `helm <verb>` of the chart with `freeze.windows` set to `windows`.
fn helm(verb: &[&str], windows: &str) -> Res<std::process::Output> {
    Ok(Command::new(chart_support::helm())
        .args(verb)
        .arg("kerf-agent")
        .arg(chart_support::chart_dir())
        .args(["-n", "kerf-system", "--set", "clusterName=prod"])
        .args(["--set-json", &format!("freeze.windows={windows}")])
        .env("KUBECONFIG", "/nonexistent")
        .output()?)
}

#[test]
fn helm_refuses_bad_freeze_windows_naming_the_field() -> Res<()> {
    for (windows, field) in [
        (
            r#"[{"schedule":"0 25 * * *","duration":"2h"}]"#,
            "/freeze/windows/0/schedule",
        ),
        (
            r#"[{"schedule":"0 2 * * *","duration":"2h","timeZone":"Europe Berlin"}]"#,
            "/freeze/windows/0/timeZone",
        ),
        (
            r#"[{"schedule":"0 2 * * *","duration":"2 hours"}]"#,
            "/freeze/windows/0/duration",
        ),
        (
            r#"[{"start":"2026-12-23","end":"2027-01-02T00:00:00Z"}]"#,
            "/freeze/windows/0/start",
        ),
    ] {
        for verb in [&["template"][..], &["install", "--dry-run=client"][..]] {
            let out = helm(verb, windows)?;
            let stderr = String::from_utf8_lossy(&out.stderr);
            assert!(!out.status.success(), "helm {verb:?} rendered {windows}");
            assert!(stderr.contains(field), "{verb:?} {windows}: {stderr}");
            assert!(stderr.contains("does not match pattern"), "{stderr}");
        }
    }
    let unknown_zone = r#"[{"schedule":"0 18 * * 5","duration":"62h","timeZone":"Europe/Berln"}]"#;
    let out = helm(&["template"], unknown_zone)?;
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    Ok(())
}
