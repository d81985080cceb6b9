//! A window's cron schedule and time zone are checked by `validate_policy`, so the policy's
//! `Valid` condition names a bad one (design D2), with the same reading that evaluates
//! windows (`parse_schedule`, `parse_time_zone`).

use kerf_api::validate::{parse_schedule, parse_time_zone};

use kerf_testkit::api::{errors_of, only_error, paths};

// rule: AP-29, AP-33
#[test]
fn ap_29_a_bad_schedule_is_named_with_its_index() {
    let err = only_error(
        r#"apply: {maintenanceWindows: [{schedule: "0 2 * * *", duration: 1h}, {schedule: "61 * * * *", duration: 1h}]}"#,
        "spec.apply.maintenanceWindows[1].schedule",
    );
    assert!(err.message.contains("minute out of range"), "{err:?}");
    assert!(err.message.contains("\"61 * * * *\""), "{err:?}");
}

// rule: AP-29, AP-39
#[test]
fn ap_29_schedules_outside_the_5_field_form_or_that_never_fire_are_named() {
    let errs = errors_of(
        r#"apply: {freezeWindows: [{schedule: "@daily", duration: 1h}, {schedule: "0 0 30 2 *", duration: 1h}, {schedule: "0 0 L * *", duration: 1h}, {schedule: "0 0 * * * *", duration: 1h}]}"#,
    );
    assert_eq!(
        paths(&errs),
        [
            "spec.apply.freezeWindows[0].schedule",
            "spec.apply.freezeWindows[1].schedule",
            "spec.apply.freezeWindows[2].schedule",
            "spec.apply.freezeWindows[3].schedule",
        ]
    );
    assert!(errs[1].message.contains("never fires"), "{errs:?}");
}

// rule: AP-30, AP-33
#[test]
fn ap_30_an_unknown_time_zone_is_named() {
    let err = only_error(
        r#"apply: {maintenanceWindows: [{schedule: "0 2 * * *", duration: 1h, timeZone: Europe/Berlin}, {schedule: "0 2 * * *", duration: 1h, timeZone: Mars/Olympus}]}"#,
        "spec.apply.maintenanceWindows[1].timeZone",
    );
    assert!(err.message.contains("Mars/Olympus"), "{err:?}");
}

// rule: AP-29, AP-30
#[test]
fn ap_29_valid_schedules_and_zones_pass() {
    let spec = r#"apply: {maintenanceWindows: [{schedule: "30 22 * * MON-FRI", duration: 90m, timeZone: America/New_York}, {schedule: "*/15 1-3 1,15 JAN-MAR SUN", duration: 5m}], freezeWindows: [{schedule: "0 0 29 2 *", duration: 24h, timeZone: UTC}]}"#;
    assert_eq!(errors_of(spec), []);
    assert!(parse_schedule("0 0 29 2 *").is_ok());
    assert!(parse_time_zone("Australia/Lord_Howe").is_ok());
    assert!(parse_time_zone("").is_err());
}
