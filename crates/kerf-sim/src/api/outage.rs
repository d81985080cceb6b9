//! API server outages on demand: refused connections, then 503s, then requests left
//! hanging, each for a set time (see [`OutagePlan`]). [`super::server`] reads the mode:
//! while connections are refused the listener is closed, and every connection open when an
//! outage starts is cut; a 503 is answered (and recorded) at once; a hanging request is
//! held until its phase ends and then answered 503, as a server that gave up on it.

use std::sync::Arc;
use std::time::Duration;

use tokio::sync::watch;

/// How the API server answers.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum OutageMode {
    /// Normally.
    #[default]
    Up,
    /// Not at all: connections are refused.
    Refused,
    /// Every request gets a 503.
    Unavailable,
    /// Requests are accepted and held without an answer.
    Hanging,
}

/// The three phases of an outage, in order.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct OutagePlan {
    /// How long connections are refused.
    pub refused: Duration,
    /// How long every request gets a 503.
    pub unavailable: Duration,
    /// How long requests hang.
    pub hanging: Duration,
}

impl OutagePlan {
    /// An outage of `total`, a third in each phase.
    pub fn even(total: Duration) -> OutagePlan {
        let third = total / 3;
        OutagePlan {
            refused: third,
            unavailable: third,
            hanging: total.saturating_sub(third * 2),
        }
    }
}

/// The API server's outage switch; cheap to clone, shared through the sim's state.
#[derive(Clone, Debug)]
pub struct Outage {
    mode: Arc<watch::Sender<OutageMode>>,
}

impl Default for Outage {
    fn default() -> Self {
        Outage {
            mode: Arc::new(watch::channel(OutageMode::Up).0),
        }
    }
}

impl Outage {
    /// The mode now.
    pub fn mode(&self) -> OutageMode {
        *self.mode.borrow()
    }

    /// Switches to `mode`.
    pub fn set(&self, mode: OutageMode) {
        self.mode.send_replace(mode);
        tracing::info!(?mode, "API server outage mode");
    }

    /// Follows the mode.
    pub fn subscribe(&self) -> watch::Receiver<OutageMode> {
        self.mode.subscribe()
    }

    /// Waits until the mode is no longer `mode`.
    pub async fn wait_past(&self, mode: OutageMode) {
        let mut rx = self.subscribe();
        let _ = rx.wait_for(|m| *m != mode).await;
    }

    /// Runs `plan` to its end: refused, 503s, hanging, then up again.
    pub async fn run(&self, plan: OutagePlan) {
        for (mode, d) in [
            (OutageMode::Refused, plan.refused),
            (OutageMode::Unavailable, plan.unavailable),
            (OutageMode::Hanging, plan.hanging),
        ] {
            self.set(mode);
            tokio::time::sleep(d).await;
        }
        self.set(OutageMode::Up);
    }
}

/// The body of `POST /sim/outage` on the control listener: the whole outage in seconds,
/// a third in each phase.
#[derive(Debug, serde::Deserialize)]
pub struct OutageRequest {
    /// Length of the outage.
    pub seconds: u64,
}

/// `POST /sim/outage` with `body`: starts an outage on `outage` (202) unless one is running
/// (409).
pub fn post_outage(outage: &Outage, body: &[u8]) -> (http::StatusCode, String) {
    let req: OutageRequest = match serde_json::from_slice(body) {
        Ok(r) => r,
        Err(e) => return (http::StatusCode::BAD_REQUEST, format!("bad outage: {e}\n")),
    };
    if outage.mode() != OutageMode::Up {
        return (http::StatusCode::CONFLICT, "an outage is running\n".into());
    }
    let plan = OutagePlan::even(Duration::from_secs(req.seconds));
    let outage = outage.clone();
    tokio::spawn(async move { outage.run(plan).await });
    (http::StatusCode::ACCEPTED, format!("{plan:?}\n"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_even_plan_splits_the_whole_outage() {
        let p = OutagePlan::even(Duration::from_secs(120));
        assert_eq!(
            p.refused + p.unavailable + p.hanging,
            Duration::from_secs(120)
        );
        assert_eq!(p.refused, Duration::from_secs(40));
        let odd = OutagePlan::even(Duration::from_millis(1000));
        assert_eq!(
            odd.refused + odd.unavailable + odd.hanging,
            Duration::from_millis(1000)
        );
    }
}
