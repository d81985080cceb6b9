//! kubelet
