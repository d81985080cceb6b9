//! The simulated cluster as a whole: configuration, the shared context handed to the API
//! server, the controllers and the kubelet, and [`Sim`], which starts them all.

use std::path::{Path, PathBuf};

use std::sync::Arc;

use serde_json::{Value, json};
use tokio::net::TcpListener;
use tokio::sync::watch;
use tokio::task::JoinHandle;

pub use crate::context::{SimConfig, SimContext};
use crate::store::gvr;

/// A running simulated cluster: API server on `127.0.0.1`, controllers and kubelet. Stops
/// when dropped.
pub struct Sim {
    ctx: SimContext,
    url: String,
    kubeconfig: PathBuf,
    _tempdir: Option<tempfile::TempDir>,
    client: kube::Client,
    ca_pem: String,
    stop: watch::Sender<bool>,
    tasks: Vec<JoinHandle<()>>,
}

impl Sim {
    /// Starts a cluster: CA and serving certificate, HTTPS listener, kubeconfig, nodes,
    /// the `default`, `kube-system`, `kube-public` and `kube-node-lease` namespaces, then the
    /// controllers and the kubelet.
    pub async fn start(config: SimConfig) -> anyhow::Result<Sim> {
        Sim::start_filled(config, |_| Ok(())).await
    }

    /// The same, with `fill` writing objects straight into the store before the
    /// controllers and the kubelet start, as if they had been there all along: the
    /// controllers then find them at their first list and race no write of `fill`.
    pub async fn start_filled(
        config: SimConfig,
        fill: impl FnOnce(&SimContext) -> anyhow::Result<()>,
    ) -> anyhow::Result<Sim> {
        let ctx = SimContext::new(config);
        let clock = ctx.clock.clone();
        ctx.store.set_time_source(Arc::new(move || clock.now()));
        let tls = crate::api::tls::generate()?;
        let listener = TcpListener::bind(("127.0.0.1", ctx.config.port)).await?;
        let url = format!("https://127.0.0.1:{}", listener.local_addr()?.port());
        let (tempdir, kubeconfig) = match &ctx.config.kubeconfig_path {
            Some(p) => (None, p.clone()),
            None => {
                let dir = tempfile::tempdir()?;
                let path = dir.path().join("kubeconfig");
                (Some(dir), path)
            }
        };
        crate::api::kubeconfig::write(&kubeconfig, &url, &tls.ca_pem)?;
        seed(&ctx)?;
        fill(&ctx)?;
        let (stop, stop_rx) = watch::channel(false);
        let mut tasks = vec![tokio::spawn(crate::api::server::serve(
            ctx.clone(),
            listener,
            tls.server_config.clone(),
            stop_rx,
        ))];
        if ctx.config.run_controllers {
            tasks.extend(crate::controllers::spawn_all(&ctx));
        }
        let client = client_for(&kubeconfig).await?;
        Ok(Sim {
            ctx,
            url,
            kubeconfig,
            _tempdir: tempdir,
            client,
            ca_pem: tls.ca_pem,
            stop,
            tasks,
        })
    }

    /// A real kube Client talking HTTPS to this cluster.
    pub fn client(&self) -> kube::Client {
        self.client.clone()
    }

    /// PEM of the cluster CA (what clients must trust).
    pub fn ca_pem(&self) -> &str {
        &self.ca_pem
    }

    /// The kubeconfig file.
    pub fn kubeconfig_path(&self) -> &Path {
        &self.kubeconfig
    }

    /// The API server URL (`https://127.0.0.1:PORT`).
    pub fn url(&self) -> &str {
        &self.url
    }

    /// The shared context (store, configuration, clock).
    pub fn context(&self) -> &SimContext {
        &self.ctx
    }

    /// The log of the requests the API server answered: counters of all and of mutating
    /// requests, snapshot and reset (see [`crate::api::audit`]).
    pub fn audit(&self) -> &crate::api::audit::Audit {
        &self.ctx.audit
    }

    /// Stops the server, the controllers and the kubelet.
    pub fn shutdown(&mut self) {
        let _ = self.stop.send(true);
        for t in self.tasks.drain(..) {
            t.abort();
        }
    }
}

impl Drop for Sim {
    fn drop(&mut self) {
        self.shutdown();
    }
}

/// A kube Client from a kubeconfig file.
pub async fn client_for(path: &Path) -> anyhow::Result<kube::Client> {
    crate::api::tls::ensure_crypto_provider();
    let kc = kube::config::Kubeconfig::read_from(path)?;
    let config =
        kube::Config::from_custom_kubeconfig(kc, &kube::config::KubeConfigOptions::default())
            .await?;
    Ok(kube::Client::try_from(config)?)
}

/// The name of the i-th node (1-based).
pub fn node_name(i: usize) -> String {
    format!("sim-node-{i}")
}

/// A node object as the simulated kubelet registers it.
pub fn node_object(config: &SimConfig, i: usize) -> Value {
    let name = node_name(i);
    let version = format!("v1.{}.0", config.kubernetes_minor);
    let res = json!({"cpu": config.node_cpu, "memory": config.node_memory, "pods": config.node_max_pods.to_string(), "ephemeral-storage": "100Gi"});
    json!({
        "apiVersion": "v1", "kind": "Node",
        "metadata": {"name": name, "labels": {
            "kubernetes.io/hostname": name, "kubernetes.io/os": "linux", "kubernetes.io/arch": "amd64",
            "beta.kubernetes.io/os": "linux", "beta.kubernetes.io/arch": "amd64",
            "node.kubernetes.io/instance-type": "kerf-sim", "topology.kubernetes.io/zone": format!("sim-zone-{}", i % 3),
        }},
        "spec": {"podCIDR": format!("10.244.{i}.0/24")},
        "status": {
            "capacity": res, "allocatable": res,
            "conditions": [{"type": "Ready", "status": "True", "reason": "KubeletReady", "message": "kubelet is posting ready status",
                "lastHeartbeatTime": null, "lastTransitionTime": null}],
            "addresses": [{"type": "InternalIP", "address": format!("10.0.0.{i}")}, {"type": "Hostname", "address": name}],
            "nodeInfo": {"kubeletVersion": version, "kubeProxyVersion": version, "containerRuntimeVersion": "containerd://2.0.0",
                "operatingSystem": "linux", "architecture": "amd64", "osImage": "kerf-sim", "kernelVersion": "6.1.0",
                "machineID": "", "systemUUID": "", "bootID": ""},
        },
    })
}

/// Creates the namespaces and the nodes of a fresh cluster.
pub fn seed(ctx: &SimContext) -> anyhow::Result<()> {
    let now = crate::store::format_time(ctx.store.now());
    for ns in ["default", "kube-system", "kube-public", "kube-node-lease"] {
        let obj = json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns, "labels": {"kubernetes.io/metadata.name": ns}},
            "spec": {"finalizers": ["kubernetes"]}, "status": {"phase": "Active"}});
        ctx.store.create(&gvr::NAMESPACES, obj, "kube-apiserver")?;
    }
    for i in 1..=ctx.config.nodes {
        let mut node = node_object(&ctx.config, i);
        for c in node["status"]["conditions"]
            .as_array_mut()
            .into_iter()
            .flatten()
        {
            c["lastHeartbeatTime"] = json!(now);
            c["lastTransitionTime"] = json!(now);
        }
        ctx.store.create(&gvr::NODES, node, "kubelet")?;
    }
    Ok(())
}
