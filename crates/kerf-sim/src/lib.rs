//! kerf-sim: a simulated Kubernetes API server, controllers, kubelet and dev hub.
