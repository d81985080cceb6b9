//! No pass acts on facts older than the agent's own last write: when the cache shows a
//! write, compared by resourceVersion.

use chrono::{DateTime, Duration, TimeZone, Utc};
use kerf_decide::pass::fresh::{OwnWrite, WRITE_VISIBLE_WITHIN, cache_shows, compare, holds_back};

fn at() -> DateTime<Utc> {
    Utc.with_ymd_and_hms(2026, 6, 3, 12, 0, 0)
        .single()
        .unwrap_or_default()
}

fn write(answer: Option<&str>, replaced: Option<&str>) -> OwnWrite {
    OwnWrite {
        answer: answer.map(str::to_owned),
        replaced: replaced.map(str::to_owned),
        at: at(),
    }
}

#[test]
fn integer_versions_compare_as_numbers() {
    let w = write(Some("1200"), Some("999"));
    assert!(!cache_shows(&w, Some("999")), "the version written over");
    assert!(!cache_shows(&w, Some("1100")), "a version between them");
    assert!(cache_shows(&w, Some("1200")), "the answer");
    assert!(cache_shows(&w, Some("1201")), "a later version");
    assert_eq!(compare("10", "9"), Some(std::cmp::Ordering::Greater));
}

#[test]
fn an_object_gone_from_the_cache_shows_the_write() {
    assert!(cache_shows(&write(Some("7"), Some("5")), None));
}

#[test]
fn an_eviction_is_shown_by_any_later_version_of_the_pod() {
    let w = write(None, Some("41"));
    assert!(!cache_shows(&w, Some("41")));
    assert!(cache_shows(&w, Some("42")));
}

#[test]
fn opaque_versions_compare_for_equality_only() {
    let w = write(Some("b7f"), Some("a13"));
    assert_eq!(compare("b7f", "a13"), None);
    assert!(!cache_shows(&w, Some("a13")), "the version written over");
    assert!(cache_shows(&w, Some("b7f")), "the answer");
    assert!(cache_shows(&w, Some("c01")), "another version");
    assert!(!cache_shows(&write(Some("b7f"), None), Some("c01")));
}

#[test]
fn a_write_the_cache_never_shows_stops_holding_passes_back() {
    let w = write(Some("1200"), Some("999"));
    assert!(holds_back(&w, Some("999"), at()));
    assert!(holds_back(
        &w,
        Some("999"),
        at() + WRITE_VISIBLE_WITHIN - Duration::milliseconds(1)
    ));
    assert!(!holds_back(&w, Some("999"), at() + WRITE_VISIBLE_WITHIN));
    assert!(!holds_back(&w, Some("1200"), at()));
}
