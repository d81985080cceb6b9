//! Fail points for crash tests (design D29): `KERF_FAILPOINTS=after-intent=exit,...`.
//!
//! Built only with the cargo feature `failpoints`; without it [`hit`] is an empty inline
//! function and release builds carry nothing. Actions: `exit` ends the process at once
//! (exit code [`EXIT_CODE`]), as a kill would; `error` makes the step fail as if the agent
//! had stopped there, so in-process tests can drop the reconciler and start a new one.
//!
//! Points: `after-intent` (intent recorded, nothing actuated), `after-resize` (resizes
//! sent, not yet Applied), `after-apply` (template patched, not yet Applied),
//! `before-applied-event` (status Applied written, event not yet queued). Switch:
//! `write-guard-off` (any action) turns off the guard that holds actuating writes while
//! the API server is down ([`crate::apiclient`]), so a test can show it fails without it;
//! `breach-guard-off` hides a health breach from the pass of an OnDelete StatefulSet, so
//! neither the rollback nor the hold on the next eviction (AP-58) happens.

/// The exit code of an `exit` fail point.
pub const EXIT_CODE: i32 = 86;

/// The environment variable read by [`init_from_env`].
pub const ENV: &str = "KERF_FAILPOINTS";

/// A fail point stopped the step.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("fail point {0} triggered")]
pub struct Triggered(pub String);

#[cfg(feature = "failpoints")]
mod imp {
    use std::collections::BTreeMap;
    use std::sync::{Mutex, PoisonError};

    use super::{EXIT_CODE, Triggered};

    static POINTS: Mutex<BTreeMap<String, String>> = Mutex::new(BTreeMap::new());

    /// Parses `name=action,...` and replaces the active fail points.
    pub fn configure(spec: &str) {
        let mut points = POINTS.lock().unwrap_or_else(PoisonError::into_inner);
        points.clear();
        for part in spec.split(',').map(str::trim).filter(|p| !p.is_empty()) {
            let (name, action) = part.split_once('=').unwrap_or((part, "exit"));
            points.insert(name.trim().to_owned(), action.trim().to_owned());
        }
    }

    /// Whether fail point `name` is configured with an action other than `off`.
    pub fn is_set(name: &str) -> bool {
        let points = POINTS.lock().unwrap_or_else(PoisonError::into_inner);
        points.get(name).is_some_and(|a| a != "off")
    }

    /// Runs fail point `name`.
    pub fn hit(name: &str) -> Result<(), Triggered> {
        let action = {
            let points = POINTS.lock().unwrap_or_else(PoisonError::into_inner);
            points.get(name).cloned()
        };
        match action.as_deref() {
            None | Some("off") => Ok(()),
            Some("exit") => {
                tracing::warn!(failpoint = name, "fail point: exiting");
                std::process::exit(EXIT_CODE)
            }
            Some(_) => {
                tracing::warn!(failpoint = name, "fail point: step stops");
                Err(Triggered(name.to_owned()))
            }
        }
    }
}

/// Reads [`ENV`] once at start.
pub fn init_from_env() {
    #[cfg(feature = "failpoints")]
    if let Ok(spec) = std::env::var(ENV) {
        imp::configure(&spec);
    }
}

/// Replaces the active fail points (`name=action,...`); without the feature it does nothing.
pub fn configure(spec: &str) {
    #[cfg(feature = "failpoints")]
    imp::configure(spec);
    #[cfg(not(feature = "failpoints"))]
    let _ = spec;
}

/// Runs fail point `name`: nothing unless it is configured.
#[cfg(feature = "failpoints")]
pub fn hit(name: &str) -> Result<(), Triggered> {
    imp::hit(name)
}

/// Runs fail point `name`: compiled to nothing without the `failpoints` feature.
#[cfg(not(feature = "failpoints"))]
#[inline(always)]
pub fn hit(_name: &str) -> Result<(), Triggered> {
    Ok(())
}

/// Whether switch `name` is on (configured with an action other than `off`); always false
/// without the `failpoints` feature.
#[inline(always)]
pub fn is_set(name: &str) -> bool {
    #[cfg(feature = "failpoints")]
    return imp::is_set(name);
    #[cfg(not(feature = "failpoints"))]
    {
        let _ = name;
        false
    }
}
