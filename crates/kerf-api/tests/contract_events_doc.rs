//! `docs/contracts/events.md` and the well-known names agree.

use std::collections::{BTreeMap, BTreeSet};

use kerf_api::EventType;
use kerf_api::wellknown::{DETAIL_KEYS, REASONS, reasons_for};

const DOC: &str = include_str!("../../../docs/contracts/events.md");

/// The rows of the markdown table under `## {section}`, as cells without backticks.
fn table_rows(section: &str) -> Vec<Vec<String>> {
    let heading = format!("## {section}");
    let mut in_section = false;
    let mut rows = Vec::new();
    for line in DOC.lines() {
        if line.starts_with("## ") {
            in_section = line.trim() == heading;
            continue;
        }
        if !in_section || !line.starts_with("| `") {
            continue;
        }
        let cells = line
            .trim()
            .trim_matches('|')
            .split('|')
            .map(|c| c.trim().to_owned())
            .collect();
        rows.push(cells);
    }
    rows
}

fn names(cell: &str) -> Vec<String> {
    cell.split(',')
        .map(|s| s.trim().trim_matches('`').to_owned())
        .collect()
}

/// Reason -> types, from the doc's reason table.
fn doc_reasons() -> BTreeMap<String, BTreeSet<String>> {
    table_rows("Reasons")
        .into_iter()
        .map(|row| {
            (
                row[0].trim_matches('`').to_owned(),
                names(&row[1]).into_iter().collect(),
            )
        })
        .collect()
}

// rule: EV-21
#[test]
fn ev_21_every_reason_constant_has_a_row_in_the_doc() {
    let doc = doc_reasons();
    for reason in REASONS {
        assert!(
            doc.contains_key(*reason),
            "{reason} has no row in events.md"
        );
    }
}

// rule: EV-21
#[test]
fn ev_21_every_reason_of_the_doc_has_a_constant() {
    for reason in doc_reasons().keys() {
        assert!(
            REASONS.contains(&reason.as_str()),
            "{reason} in events.md has no REASON_ constant"
        );
    }
    assert_eq!(doc_reasons().len(), REASONS.len());
}

// rule: EV-09, EV-21
#[test]
fn ev_09_the_doc_gives_each_reason_the_type_of_the_constants() {
    let doc = doc_reasons();
    for t in EventType::ALL {
        for reason in reasons_for(t) {
            let types = &doc[*reason];
            assert_eq!(
                types,
                &BTreeSet::from([t.as_str().to_owned()]),
                "{reason}: type in events.md"
            );
        }
    }
}

// rule: EV-09, EV-62
#[test]
fn ev_09_the_doc_lists_exactly_the_seven_types() {
    let doc: Vec<String> = table_rows("Types")
        .into_iter()
        .map(|row| row[0].trim_matches('`').to_owned())
        .collect();
    let expected: Vec<String> = EventType::ALL
        .iter()
        .map(|t| t.as_str().to_owned())
        .collect();
    assert_eq!(doc, expected);
    assert!(!doc.contains(&"config_changed".to_owned()));
}

// rule: EV-61
#[test]
fn ev_61_the_doc_lists_every_well_known_details_key() {
    let doc: BTreeSet<String> = table_rows("Payload")
        .into_iter()
        .flat_map(|row| names(&row[0]))
        .collect();
    for key in DETAIL_KEYS {
        assert!(
            doc.contains(*key),
            "details key {key} missing from events.md"
        );
    }
}
