//! The dev hub: the agent's side of the hub API (design section 9,
//! `docs/contracts/hub-api.yaml`) on loopback, for one or more clusters.
//!
//! Recommendations and configuration come from a YAML file ([`DevHub::from_file`]) or the
//! test handle ([`DevHub::set_recommendations`], [`DevHub::set_config`], [`DevHub::pause`]).
//! Posted events are validated strictly (a batch with an invalid item is refused whole
//! with 400 `invalid_item`, design D28), stored once per id and counted per type. Fault
//! switches make the hub refuse connections, answer slowly, answer 429, 5xx or 403, or
//! answer with a malformed body.

pub mod fault;
mod routes;
pub mod state;

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use kerf_api::event::{Event, EventType};
use kerf_api::hub::{ClusterConfig, Inventory, PauseScope, Recommendation};
use tokio::net::{TcpListener, TcpSocket};
use tokio::sync::watch;
use tokio::task::JoinHandle;

use fault::FaultRule;
pub use fault::{Endpoint, Fault, RequestRecord};
use routes::{Shared, lock};
use state::HubData;
pub use state::{HubFile, HubFileCluster};

use crate::clock::Clock;

/// Default limit of a request body: 4 MiB.
pub const DEFAULT_BODY_LIMIT: usize = 4 << 20;

/// Errors of the dev hub.
#[derive(Debug, thiserror::Error)]
pub enum DevHubError {
    /// The listener could not be bound.
    #[error("cannot listen on {addr}: {source}")]
    Bind {
        /// The address.
        addr: SocketAddr,
        /// The cause.
        #[source]
        source: std::io::Error,
    },
    /// The hub file could not be read.
    #[error("cannot read hub file {path}: {source}")]
    Read {
        /// The file.
        path: String,
        /// The cause.
        #[source]
        source: std::io::Error,
    },
    /// The hub file is not valid.
    #[error("invalid hub file {path}: {source}")]
    Parse {
        /// The file.
        path: String,
        /// The cause.
        #[source]
        source: serde_yaml::Error,
    },
}

/// How to start a dev hub.
#[derive(Clone, Debug)]
pub struct DevHubConfig {
    /// Where to listen; port 0 picks a free port. Default `127.0.0.1:0`.
    pub addr: SocketAddr,
    /// The bearer token every request must carry; `None` accepts any request.
    pub token: Option<String>,
    /// Largest request body; larger ones get 413 `too_large`.
    pub body_limit: usize,
    /// The clock that stamps `generatedAt`.
    pub clock: Clock,
}

impl Default for DevHubConfig {
    fn default() -> Self {
        DevHubConfig {
            addr: SocketAddr::from(([127, 0, 0, 1], 0)),
            token: None,
            body_limit: DEFAULT_BODY_LIMIT,
            clock: Clock::real(),
        }
    }
}

/// A running dev hub and the handle tests use to drive and inspect it. Dropping it stops
/// the server.
pub struct DevHub {
    shared: Arc<Shared>,
    addr: SocketAddr,
    down: watch::Sender<bool>,
    listening: watch::Receiver<bool>,
    task: JoinHandle<()>,
}

/// Starts a dev hub.
pub async fn start(config: DevHubConfig) -> Result<DevHub, DevHubError> {
    let listener = bind(config.addr)?;
    let addr = listener.local_addr().map_err(|source| DevHubError::Bind {
        addr: config.addr,
        source,
    })?;
    let shared = Arc::new(Shared {
        data: Mutex::new(HubData::default()),
        faults: Mutex::new(Vec::new()),
        token: Mutex::new(config.token),
        rejected: Mutex::new(Default::default()),
        log: Mutex::new(Vec::new()),
        clock: config.clock,
        body_limit: config.body_limit,
    });
    let (down, down_rx) = watch::channel(false);
    let (listening_tx, listening) = watch::channel(true);
    let router = routes::router(shared.clone());
    let task = tokio::spawn(serve(addr, router, listener, down_rx, listening_tx));
    Ok(DevHub {
        shared,
        addr,
        down,
        listening,
        task,
    })
}

fn bind(addr: SocketAddr) -> Result<TcpListener, DevHubError> {
    let err = |source| DevHubError::Bind { addr, source };
    let socket = if addr.is_ipv4() {
        TcpSocket::new_v4()
    } else {
        TcpSocket::new_v6()
    }
    .map_err(err)?;
    socket.set_reuseaddr(true).map_err(err)?;
    socket.bind(addr).map_err(err)?;
    socket.listen(1024).map_err(err)
}

/// Serves until the handle is dropped; closes the listener while the hub is down, so
/// connections are refused, and binds the same port again when it is up.
async fn serve(
    addr: SocketAddr,
    router: axum::Router,
    first: TcpListener,
    mut down: watch::Receiver<bool>,
    listening: watch::Sender<bool>,
) {
    let mut listener = Some(first);
    loop {
        if let Some(l) = listener.take() {
            listening.send_replace(true);
            let mut stop = down.clone();
            let signal = async move {
                let _ = stop.wait_for(|d| *d).await;
            };
            let _ = axum::serve(l, router.clone())
                .with_graceful_shutdown(signal)
                .await;
            listening.send_replace(false);
        }
        if down.wait_for(|d| !*d).await.is_err() {
            return;
        }
        match bind(addr) {
            Ok(l) => listener = Some(l),
            Err(e) => {
                tracing::warn!(error = %e, "dev hub cannot listen again; retrying");
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
        }
    }
}

impl DevHub {
    /// Starts a dev hub with the clusters of a YAML hub file.
    pub async fn from_file(path: &Path, config: DevHubConfig) -> Result<DevHub, DevHubError> {
        let hub = start(config).await?;
        hub.load_file(path)?;
        Ok(hub)
    }

    /// Loads (again) the clusters of a YAML hub file.
    pub fn load_file(&self, path: &Path) -> Result<(), DevHubError> {
        let shown = path.display().to_string();
        let text = std::fs::read_to_string(path).map_err(|source| DevHubError::Read {
            path: shown.clone(),
            source,
        })?;
        let file: HubFile = serde_yaml::from_str(&text).map_err(|source| DevHubError::Parse {
            path: shown,
            source,
        })?;
        let now = self.shared.clock.now();
        lock(&self.shared.data).load(file, now);
        Ok(())
    }

    /// The base URL, `http://127.0.0.1:<port>`.
    pub fn url(&self) -> String {
        format!("http://{}", self.addr)
    }

    /// The address the hub listens on.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// Replaces a cluster's recommendations (a new ETag and `generatedAt`).
    pub fn set_recommendations(&self, cluster: &str, recommendations: Vec<Recommendation>) {
        let now = self.shared.clock.now();
        let mut data = lock(&self.shared.data);
        let c = data.cluster(cluster, now);
        c.recommendations = recommendations;
        c.generated_at = now;
    }

    /// Replaces a cluster's configuration.
    pub fn set_config(&self, cluster: &str, config: ClusterConfig) {
        let now = self.shared.clock.now();
        lock(&self.shared.data).cluster(cluster, now).config = config;
    }

    /// Pauses a cluster's automation (`Some(scope)`) or resumes it (`None`).
    pub fn pause(&self, cluster: &str, scope: Option<PauseScope>) {
        let now = self.shared.clock.now();
        lock(&self.shared.data).cluster(cluster, now).pause(scope);
    }

    /// Sets the bearer token requests must carry; `None` accepts any request.
    pub fn set_token(&self, token: Option<&str>) {
        *lock(&self.shared.token) = token.map(str::to_owned);
    }

    /// Makes the hub refuse every batch holding this event id with 400 `invalid_item`
    /// naming it, as if its validation found the item invalid.
    pub fn reject_event(&self, id: uuid::Uuid) {
        lock(&self.shared.rejected).insert(id);
    }

    /// The events stored for a cluster, in the order first received.
    pub fn events(&self, cluster: &str) -> Vec<Event> {
        let data = lock(&self.shared.data);
        data.clusters
            .get(cluster)
            .map(|c| c.events.clone())
            .unwrap_or_default()
    }

    /// Stored events of a cluster per type.
    pub fn counts(&self, cluster: &str) -> BTreeMap<EventType, usize> {
        let data = lock(&self.shared.data);
        data.clusters
            .get(cluster)
            .map(|c| c.counts.clone())
            .unwrap_or_default()
    }

    /// Deliveries of an already stored id that the hub ignored.
    pub fn duplicates(&self, cluster: &str) -> usize {
        let data = lock(&self.shared.data);
        data.clusters.get(cluster).map_or(0, |c| c.duplicates)
    }

    /// The last inventory the agent put for a cluster.
    pub fn inventory(&self, cluster: &str) -> Option<Inventory> {
        let data = lock(&self.shared.data);
        data.clusters.get(cluster).and_then(|c| c.inventory.clone())
    }

    /// Injects a fault into every answer of `endpoint` (all endpoints for `None`) until
    /// [`DevHub::clear_faults`].
    pub fn set_fault(&self, endpoint: Option<Endpoint>, fault: Fault) {
        self.push_fault(endpoint, fault, None);
    }

    /// Injects a fault into the next `times` answers of `endpoint` (all for `None`).
    pub fn fail_next(&self, endpoint: Option<Endpoint>, fault: Fault, times: u32) {
        if times > 0 {
            self.push_fault(endpoint, fault, Some(times));
        }
    }

    fn push_fault(&self, endpoint: Option<Endpoint>, fault: Fault, remaining: Option<u32>) {
        lock(&self.shared.faults).push(FaultRule {
            endpoint,
            fault,
            remaining,
        });
    }

    /// Removes every fault.
    pub fn clear_faults(&self) {
        lock(&self.shared.faults).clear();
    }

    /// Takes the hub down (connections refused) or brings it back up, and waits until the
    /// listener is closed or listening again.
    pub async fn set_down(&self, down: bool) {
        self.down.send_replace(down);
        let mut listening = self.listening.clone();
        let _ =
            tokio::time::timeout(Duration::from_secs(5), listening.wait_for(|l| *l != down)).await;
    }

    /// Every request answered so far.
    pub fn requests(&self) -> Vec<RequestRecord> {
        lock(&self.shared.log).clone()
    }

    /// The requests answered so far to one endpoint.
    pub fn requests_to(&self, endpoint: Endpoint) -> Vec<RequestRecord> {
        lock(&self.shared.log)
            .iter()
            .filter(|r| r.endpoint == endpoint)
            .cloned()
            .collect()
    }
}

impl Drop for DevHub {
    fn drop(&mut self) {
        self.task.abort();
    }
}
