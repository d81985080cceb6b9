//! The CRD descriptions (what `kubectl explain` and `kubectl describe` show) and docs/ read
//! on their own: no design decision id (`D25`), no `design section N`, and in the CRDs no
//! rule id (`EV-48`) of a document that is not in this repository.

use std::path::Path;

use serde::Deserialize as _;
use serde_yaml::Value;

/// Where text cites a decision id: `D` and digits, standing as a word.
fn decision_id(text: &str) -> Option<String> {
    let chars: Vec<char> = text.chars().collect();
    (0..chars.len()).find_map(|i| {
        let starts = chars[i] == 'D' && (i == 0 || !chars[i - 1].is_alphanumeric());
        let digits = chars[i + 1..]
            .iter()
            .take_while(|c| c.is_ascii_digit())
            .count();
        let ends = chars
            .get(i + 1 + digits)
            .is_none_or(|c| !c.is_alphanumeric());
        (starts && digits > 0 && ends).then(|| chars[i..=i + digits].iter().collect())
    })
}

/// Where text cites a rule id: two capitals, a hyphen and two digits (`AP-24`).
fn rule_id(text: &str) -> Option<String> {
    let chars: Vec<char> = text.chars().collect();
    (0..chars.len().saturating_sub(4)).find_map(|i| {
        let w = &chars[i..i + 5];
        let free_before = i == 0 || !chars[i - 1].is_alphanumeric();
        let free_after = chars.get(i + 5).is_none_or(|c| !c.is_alphanumeric());
        let shaped = w[0].is_ascii_uppercase()
            && w[1].is_ascii_uppercase()
            && w[2] == '-'
            && w[3].is_ascii_digit()
            && w[4].is_ascii_digit();
        (free_before && shaped && free_after).then(|| w.iter().collect())
    })
}

/// What in `text` cites the design document, if anything.
fn design_citation(text: &str) -> Option<String> {
    if text.to_lowercase().contains("design section") {
        return Some("design section".into());
    }
    decision_id(text)
}

/// Every `description` string under `v`, with its path.
fn descriptions(v: &Value, path: &str, out: &mut Vec<(String, String)>) {
    match v {
        Value::Mapping(m) => {
            for (k, child) in m {
                let key = k.as_str().unwrap_or("?");
                let here = format!("{path}.{key}");
                match (key, child) {
                    ("description", Value::String(s)) => out.push((here, s.clone())),
                    _ => descriptions(child, &here, out),
                }
            }
        }
        Value::Sequence(items) => {
            for (i, child) in items.iter().enumerate() {
                descriptions(child, &format!("{path}[{i}]"), out);
            }
        }
        _ => {}
    }
}

fn crd_descriptions(yaml: &str) -> Vec<(String, String)> {
    let mut out = Vec::new();
    for doc in serde_yaml::Deserializer::from_str(yaml) {
        let v = Value::deserialize(doc).unwrap_or(Value::Null);
        assert_ne!(v, Value::Null, "a CRD document does not parse");
        let kind = v["spec"]["names"]["kind"]
            .as_str()
            .unwrap_or("?")
            .to_owned();
        descriptions(&v, &kind, &mut out);
    }
    out
}

fn root() -> &'static Path {
    Path::new(concat!(env!("CARGO_MANIFEST_DIR"), "/../.."))
}

#[allow(clippy::panic)]
fn read(rel: &str) -> String {
    std::fs::read_to_string(root().join(rel)).unwrap_or_else(|e| panic!("cannot read {rel}: {e}"))
}

#[test]
fn the_checks_find_what_they_look_for() {
    assert_eq!(decision_id("events (design D25)."), Some("D25".into()));
    assert_eq!(decision_id("D7 first"), Some("D7".into()));
    assert_eq!(decision_id("IPv4, 3D5, DNS, D, Dx1"), None);
    assert_eq!(
        design_citation("values (Design section 13)"),
        Some("design section".into())
    );
    assert_eq!(rule_id("see rule EV-48."), Some("EV-48".into()));
    assert_eq!(rule_id("UTF-8, XEV-481, RFC 3339"), None);
}

#[test]
fn crd_descriptions_cite_no_design_decision_or_rule() {
    let generated = kerf_api::crds_yaml().unwrap_or_default();
    assert!(!generated.is_empty(), "the CRDs do not render");
    for (source, yaml) in [
        ("kerf_api::crds_yaml()".to_owned(), generated),
        (
            "config/crds/kerf.getkerf.dev.yaml".to_owned(),
            read("config/crds/kerf.getkerf.dev.yaml"),
        ),
        (
            "charts/kerf-agent/crds/kerf.getkerf.dev.yaml".to_owned(),
            read("charts/kerf-agent/crds/kerf.getkerf.dev.yaml"),
        ),
    ] {
        let found = crd_descriptions(&yaml);
        assert!(found.len() > 50, "{source}: too few descriptions read");
        let bad: Vec<_> = found
            .iter()
            .filter_map(|(path, text)| {
                let cite = design_citation(text).or_else(|| rule_id(text))?;
                Some(format!("{path}: {cite} in {text:?}"))
            })
            .collect();
        assert!(bad.is_empty(), "{source}:\n{}", bad.join("\n"));
    }
}

#[test]
fn docs_cite_no_design_decision() {
    let dir = root().join("docs");
    let mut pages: Vec<_> = std::fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("cannot list docs/: {e}"))
        .filter_map(Result::ok)
        .map(|e| e.path())
        .filter(|p| p.extension().is_some_and(|x| x == "md"))
        .collect();
    pages.sort();
    assert!(pages.len() > 5, "too few pages in docs/");
    let mut bad = Vec::new();
    for page in &pages {
        let text = std::fs::read_to_string(page).unwrap_or_default();
        for (n, line) in text.lines().enumerate() {
            if let Some(cite) = design_citation(line) {
                bad.push(format!("{}:{}: {cite}", page.display(), n + 1));
            }
        }
    }
    assert!(bad.is_empty(), "{}", bad.join("\n"));
}
