{{/* The chart's name. */}}
{{- define "kerf-agent.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" }}
{{- end }}

{{/* The full name of the release's objects. */}}
{{- define "kerf-agent.fullname" -}}
{{- if .Values.fullnameOverride }}
{{- .Values.fullnameOverride | trunc 63 | trimSuffix "-" }}
{{- else }}
{{- $name := default .Chart.Name .Values.nameOverride }}
{{- if contains $name .Release.Name }}
{{- .Release.Name | trunc 63 | trimSuffix "-" }}
{{- else }}
{{- printf "%s-%s" .Release.Name $name | trunc 63 | trimSuffix "-" }}
{{- end }}
{{- end }}
{{- end }}

{{/* Labels of every object. */}}
{{- define "kerf-agent.labels" -}}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" }}
{{ include "kerf-agent.selectorLabels" . }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
{{- end }}

{{/* Labels that select the agent's pods. */}}
{{- define "kerf-agent.selectorLabels" -}}
app.kubernetes.io/name: {{ include "kerf-agent.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end }}

{{/* The service account's name. */}}
{{- define "kerf-agent.serviceAccountName" -}}
{{- if .Values.serviceAccount.create }}
{{- default (include "kerf-agent.fullname" .) .Values.serviceAccount.name }}
{{- else }}
{{- default "default" .Values.serviceAccount.name }}
{{- end }}
{{- end }}

{{/* The Secret holding the webhook's certificate. */}}
{{- define "kerf-agent.webhookSecretName" -}}
{{- if and (not .Values.webhook.certManager.enabled) .Values.webhook.tls.secretName }}
{{- .Values.webhook.tls.secretName }}
{{- else }}
{{- printf "%s-webhook-tls" (include "kerf-agent.fullname" .) }}
{{- end }}
{{- end }}

{{/* The webhook Service's name. */}}
{{/* Name of the cert-manager CA Certificate, its Secret and its Issuer. */}}
{{- define "kerf-agent.webhookCAName" -}}
{{- printf "%s-webhook-ca" (include "kerf-agent.fullname" .) }}
{{- end }}

{{- define "kerf-agent.serviceName" -}}
{{- include "kerf-agent.fullname" . }}
{{- end }}

{{/* The ConfigMap with the clusterDefaults and freeze.windows files. */}}
{{- define "kerf-agent.configName" -}}
{{- printf "%s-config" (include "kerf-agent.fullname" .) }}
{{- end }}

{{/* Content of the clusterDefaults file: empty when no default is set. values.schema.json
holds it to the RightsizingPolicy spec without selector and priority. */}}
{{- define "kerf-agent.clusterDefaults" -}}
{{- if .Values.clusterDefaults }}
{{- toYaml .Values.clusterDefaults }}
{{- end }}
{{- end }}

{{/* Content of the freeze.windows file: a YAML list (at most 16, values.schema.json). */}}
{{- define "kerf-agent.freezeWindows" -}}
{{- if .Values.freeze.windows }}
{{- toYaml .Values.freeze.windows }}
{{- else }}
{{- "[]" }}
{{- end }}
{{- end }}

{{/* The TCP port of a URL: its explicit port, else 443 for https and 80 for http. */}}
{{- define "kerf-agent.urlPort" -}}
{{- $u := urlParse . }}
{{- $port := regexFind ":[0-9]+$" $u.host | trimPrefix ":" }}
{{- if $port }}{{ $port }}{{ else if eq $u.scheme "https" }}443{{ else }}80{{ end }}
{{- end }}

{{/* `to:` of an egress rule for a list of CIDRs; nothing (any address) when empty. */}}
{{- define "kerf-agent.ipBlocks" -}}
{{- if . -}}
to:
{{- range . }}
  - ipBlock:
      cidr: {{ . }}
{{- end }}
{{- end }}
{{- end }}
