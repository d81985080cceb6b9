//! Workload annotation keys under Kerf's prefix (`kerf.getkerf.dev/`) that Kerf does not
//! read: a misspelt key (`kerf.getkerf.dev/modee`) is named with the nearest known key
//! (edit distance over [`ANNOTATIONS`]) so that an opt-out that is not one is seen. An
//! unknown key never changes what the agent does.

use kerf_api::wellknown::{ANNOTATIONS, API_GROUP};

use super::{Layer, PolicyProblem};

/// An annotation key under Kerf's prefix that Kerf does not read.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct UnknownKey<'a> {
    /// The key as written.
    pub key: &'a str,
    /// The known key nearest to it (ties: the first in [`ANNOTATIONS`]).
    pub nearest: &'static str,
}

impl PolicyProblem {
    /// Whether this problem is an annotation key Kerf does not read (not a bad value).
    pub fn is_unknown_key(&self) -> bool {
        self.layer == Layer::Annotation && !ANNOTATIONS.contains(&self.field.as_str())
    }
}

/// Whether `key` is under Kerf's prefix (`kerf.getkerf.dev/`).
pub fn has_kerf_prefix(key: &str) -> bool {
    key.strip_prefix(API_GROUP)
        .is_some_and(|rest| rest.starts_with('/'))
}

/// The keys of `keys` under Kerf's prefix that are not in [`ANNOTATIONS`], in the order
/// given, each with the nearest known key.
pub fn unknown_keys<'a>(keys: impl IntoIterator<Item = &'a str>) -> Vec<UnknownKey<'a>> {
    keys.into_iter()
        .filter(|k| has_kerf_prefix(k) && !ANNOTATIONS.contains(k))
        .filter_map(|key| {
            Some(UnknownKey {
                key,
                nearest: nearest_known(key)?,
            })
        })
        .collect()
}

/// The known annotation key with the fewest edits from `key` (`None` only if Kerf read no
/// annotation at all).
pub fn nearest_known(key: &str) -> Option<&'static str> {
    ANNOTATIONS
        .iter()
        .copied()
        .min_by_key(|known| edit_distance(key, known))
}

/// The Levenshtein distance between `a` and `b`, in characters.
pub fn edit_distance(a: &str, b: &str) -> usize {
    let b: Vec<char> = b.chars().collect();
    let mut row: Vec<usize> = (0..=b.len()).collect();
    for (i, ca) in a.chars().enumerate() {
        let mut diagonal = row[0];
        row[0] = i + 1;
        for (j, cb) in b.iter().enumerate() {
            let substitute = diagonal + usize::from(ca != *cb);
            diagonal = row[j + 1];
            row[j + 1] = substitute.min(row[j] + 1).min(diagonal + 1);
        }
    }
    row[b.len()]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn edit_distance_counts_inserts_deletes_and_substitutions() {
        for (a, b, want) in [
            ("", "", 0),
            ("mode", "mode", 0),
            ("modee", "mode", 1),
            ("mdoe", "mode", 2),
            ("strategi", "strategy", 1),
            ("", "abc", 3),
            ("kitten", "sitting", 3),
        ] {
            assert_eq!(edit_distance(a, b), want, "{a} {b}");
            assert_eq!(edit_distance(b, a), want, "{b} {a}");
        }
    }

    #[test]
    fn only_keys_under_the_prefix_count() {
        assert!(has_kerf_prefix("kerf.getkerf.dev/modee"));
        assert!(!has_kerf_prefix("kerf.getkerf.dev.example/mode"));
        assert!(!has_kerf_prefix("example.com/kerf.getkerf.dev/mode"));
        assert!(!has_kerf_prefix("kerf.getkerf.devmode"));
    }
}
