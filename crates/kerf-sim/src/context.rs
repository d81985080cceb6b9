//! What the API server, the controllers, the kubelet and admission share: the configuration
//! a cluster is built from and the [`SimContext`] (store, clock, run-time state, request log).
//! Every component of the simulation stands above this module; it names only their state.

use std::path::PathBuf;
use std::time::Duration;

use crate::admission::webhook_routes::WebhookRoutes;
use crate::api::audit::Audit;
use crate::api::resize::faults::ResizeFaults;
use crate::clock::Clock;
use crate::kubelet::state::KubeletState;
use crate::store::Store;

/// How to build a simulated cluster.
#[derive(Debug, Clone)]
pub struct SimConfig {
    /// Number of nodes (`sim-node-1` ..).
    pub nodes: usize,
    /// Allocatable CPU of each node.
    pub node_cpu: String,
    /// Allocatable memory of each node.
    pub node_memory: String,
    /// Kubernetes minor version served (33..=36).
    pub kubernetes_minor: u32,
    /// How long the kubelet takes to make a pod Ready.
    pub kubelet_ready_delay: Duration,
    /// Names of the nodes with swap enabled.
    pub swap_nodes: Vec<String>,
    /// Maximum pods per node.
    pub node_max_pods: u32,
    /// Where to write the kubeconfig (None: a temporary directory).
    pub kubeconfig_path: Option<PathBuf>,
    /// Port to listen on (0: any free port).
    pub port: u16,
    /// The clock the controllers and the kubelet use.
    pub clock: Clock,
    /// Whether to start the controllers and the kubelet.
    pub run_controllers: bool,
    /// How late each watch stream delivers a change: a random time within the range, in
    /// order (see [`crate::api::watch_delay`]). `d..d` is a fixed delay; the default, zero,
    /// delivers at once.
    pub watch_delay: std::ops::Range<Duration>,
    /// How long the kubelet defers each resize it could actuate (`PodResizePending` with
    /// reason `Deferred`, as on a node without room) before it actuates it. Zero: at once.
    pub resize_defer: Duration,
}

impl Default for SimConfig {
    fn default() -> Self {
        SimConfig {
            nodes: 3,
            node_cpu: "4".into(),
            node_memory: "16Gi".into(),
            kubernetes_minor: 36,
            kubelet_ready_delay: Duration::from_millis(200),
            swap_nodes: Vec::new(),
            node_max_pods: 110,
            kubeconfig_path: None,
            port: 0,
            clock: Clock::default(),
            run_controllers: true,
            watch_delay: crate::api::watch_delay::NONE,
            resize_defer: Duration::ZERO,
        }
    }
}

/// What the API server, the controllers and the kubelet share.
#[derive(Clone)]
pub struct SimContext {
    /// The object store.
    pub store: Store,
    /// The configuration the cluster was started with.
    pub config: SimConfig,
    /// The simulated clock.
    pub clock: Clock,
    /// Run-time state of the kubelet and admission (injected faults, counters, webhook routes).
    pub state: SimState,
    /// Every request the API server answered (see [`crate::api::audit`]).
    pub audit: Audit,
}

impl SimContext {
    /// A context over a fresh store.
    pub fn new(config: SimConfig) -> SimContext {
        let clock = config.clock.clone();
        SimContext {
            store: Store::new(),
            config,
            clock,
            state: Default::default(),
            audit: Default::default(),
        }
    }
}

/// Run-time state of the simulated node agents and admission, shared through
/// [`SimContext`]: the kubelet's bookkeeping (start times, counters, injected
/// throttling) and the addresses of webhook Services.
#[derive(Clone, Debug, Default)]
pub struct SimState {
    pub(crate) kubelet: KubeletState,
    pub(crate) webhooks: WebhookRoutes,
    /// RBAC and ResourceQuota refusals of `pods/resize`.
    pub resize: ResizeFaults,
    /// The API server's outage switch.
    pub outage: crate::api::outage::Outage,
    /// The CRDs as their objects' validation reads them.
    pub(crate) crds: crate::api::crd_view::CrdCache,
}

impl SimState {
    /// Routes calls to the webhook Service `namespace/name` to `addr` (TLS is still verified
    /// against the configuration's caBundle, for the name `<name>.<namespace>.svc`).
    pub fn route_webhook_service(&self, namespace: &str, name: &str, addr: std::net::SocketAddr) {
        self.webhooks.set(namespace, name, addr);
    }
}
