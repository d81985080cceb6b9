//! The client's metrics: actuating writes sent to the API server, and those the guard held
//! back while the server was down.

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;

use crate::metrics::set::metric_set;

/// What became of an actuating write.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct WriteOutcome {
    /// `sent` (it went out, whatever the answer) or `held` (not sent: the server was down).
    pub outcome: String,
}

impl WriteOutcome {
    /// The label of a write that went out.
    pub fn sent() -> WriteOutcome {
        WriteOutcome {
            outcome: "sent".to_owned(),
        }
    }

    /// The label of a write the guard held back.
    pub fn held() -> WriteOutcome {
        WriteOutcome {
            outcome: "held".to_owned(),
        }
    }
}

metric_set! {
    /// The client's metrics, registered under `api_`.
    pub struct ApiMetrics in "api" {
        /// `kerf_agent_api_actuating_requests_total{outcome}`: actuating writes sent
        /// (`sent`, counted before the answer, so a refused connection counts) or held back
        /// because the API server was down (`held`).
        actuating: Family<WriteOutcome, Counter> => "actuating_requests", "Actuating writes sent to the API server (sent) or held back while it was down (held)";
    }
}
