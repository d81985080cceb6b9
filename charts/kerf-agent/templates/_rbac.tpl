{{/*
The agent's RBAC rules, written once. The namespaced rules go into the ClusterRole
(clusterrole.yaml) without scope.namespaces, and into a Role in each listed namespace
(scope-roles.yaml) with it; the cluster rules are always the ClusterRole's. docs/install.md
explains every rule.
*/}}

{{/* Rules on kinds that live in a namespace: the workloads the agent manages and what
they write. */}}
{{- define "kerf-agent.namespacedRules" -}}
# Watches (list and watch) of pods. A pod is read again (get) when its resize met a
# conflict.
- apiGroups: [""]
  resources: ["pods"]
  verbs: ["get", "list", "watch"]
# In-place changes: the resize subresource only.
- apiGroups: [""]
  resources: ["pods/resize"]
  verbs: ["patch"]
# OnDelete StatefulSets: replace outdated pods through the eviction API (PDBs apply).
- apiGroups: [""]
  resources: ["pods/eviction"]
  verbs: ["create"]
# Kubernetes Events (core/v1) on the rsr{{ if not .Values.scope.namespaces }}, and on policies (in `default`){{ end }}.
- apiGroups: [""]
  resources: ["events"]
  verbs: ["create"]
# Rollouts: the live workload is read (get), then the pod template's resources are
# server-side applied (field manager kerf).
- apiGroups: ["apps"]
  resources: ["deployments", "statefulsets", "daemonsets"]
  verbs: ["get", "list", "watch", "patch"]
# ReplicaSet to Deployment owners (webhook, current revision).
- apiGroups: ["apps"]
  resources: ["replicasets"]
  verbs: ["list", "watch"]
# HPA coordination: the target utilization of a coupled HPA (a JSON patch).
- apiGroups: ["autoscaling"]
  resources: ["horizontalpodautoscalers"]
  verbs: ["list", "watch", "patch"]
# Single-replica safety.
- apiGroups: ["policy"]
  resources: ["poddisruptionbudgets"]
  verbs: ["list", "watch"]
# Recommendations: mirrored from the hub by server-side apply (which creates them) and
# their status (replaced), the agent's record of every change. An rsr is read (get) when
# its spec does not convert.
- apiGroups: ["kerf.getkerf.dev"]
  resources: ["rightsizingrecommendations"]
  verbs: ["get", "list", "watch", "create", "patch"]
- apiGroups: ["kerf.getkerf.dev"]
  resources: ["rightsizingrecommendations/status"]
  verbs: ["update"]
{{- end }}

{{/* Rules that cannot be namespaced: cluster-scoped kinds, and the VPAs the vpa source
watches over the cluster whatever the scope. */}}
{{- define "kerf-agent.clusterRules" -}}
# Watches (list and watch) of nodes (resize support, swap, unsupportedNodeSelectors) and
# namespaces (policy selectors, scope.namespaceSelector).
- apiGroups: [""]
  resources: ["nodes", "namespaces"]
  verbs: ["list", "watch"]
# Policies: read; the Valid condition goes into their status (read, then replaced).
- apiGroups: ["kerf.getkerf.dev"]
  resources: ["rightsizingpolicies"]
  verbs: ["get", "list", "watch"]
- apiGroups: ["kerf.getkerf.dev"]
  resources: ["rightsizingpolicies/status"]
  verbs: ["update"]
{{- if eq .Values.recommendations.source "vpa" }}
# recommendations.source vpa: the VerticalPodAutoscalers' recommendations (read only),
# watched over the cluster whatever the scope.
- apiGroups: ["autoscaling.k8s.io"]
  resources: ["verticalpodautoscalers"]
  verbs: ["get", "list", "watch"]
{{- end }}
{{- if .Values.health.cadvisorFallback }}
# health.cadvisorFallback: the kubelets' cAdvisor metrics through the node proxy.
- apiGroups: [""]
  resources: ["nodes/proxy"]
  verbs: ["get"]
{{- end }}
{{- end }}
