{{/*
The scope values (docs/configuration.md#scoped-installs), checked as the agent checks its
KERF_SCOPE_* settings, as YAML (read back with fromYaml): `namespaces` (the list, trimmed,
empty names dropped), `namespaceSelector` and `workloadSelector` (the texts, trimmed).
Rendering fails with the agent's reason when the list and the namespace selector are both
set, or when a selector does not parse.
*/}}
{{- define "kerf-agent.scope" -}}
{{- $namespaces := list }}
{{- range .Values.scope.namespaces }}
{{- if trim . }}
{{- $namespaces = append $namespaces (trim .) }}
{{- end }}
{{- end }}
{{- $nsSelector := trim .Values.scope.namespaceSelector }}
{{- $workloadSelector := trim .Values.scope.workloadSelector }}
{{- if and $namespaces $nsSelector }}
{{- fail (printf "scope.namespaceSelector %q cannot be used together with scope.namespaces (%s): choose either the list of namespaces (scope.namespaces) or the namespace label selector (scope.namespaceSelector); the agent refuses both" $nsSelector (join "," $namespaces)) }}
{{- end }}
{{- $_ := include "kerf-agent.labelSelector" (list "scope.namespaceSelector" $nsSelector) }}
{{- $_ = include "kerf-agent.labelSelector" (list "scope.workloadSelector" $workloadSelector) }}
{{- toYaml (dict "namespaces" $namespaces "namespaceSelector" $nsSelector "workloadSelector" $workloadSelector) }}
{{- end }}

{{/*
A label selector written as `kubectl get -l` takes it (`team=a,tier in (web,api),!legacy`)
as a Kubernetes LabelSelector, in YAML: `key=value` and `key==value` in matchLabels,
`key!=value`, `key in (...)`, `key notin (...)`, `key` and `!key` in matchExpressions.
Called with (list <value name> <text>); an empty text gives `{}`. Rendering fails naming
the value, the requirement and what is wrong, as the agent does.
*/}}
{{- define "kerf-agent.labelSelector" -}}
{{- $name := index . 0 }}
{{- $text := trim (index . 1) }}
{{- $keyRe := `([a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?(\.[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?)*/)?[A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?` }}
{{- $valueRe := `([A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?)?` }}
{{- $sep := "\x00" }}
{{- /* The commas of the value lists, masked so that splitting at commas finds the
requirements. */}}
{{- $masked := $text }}
{{- range regexFindAll `\([^()]*\)` $text -1 }}
{{- $masked = replace . (replace "," $sep .) $masked }}
{{- end }}
{{- $labels := dict }}
{{- $exprs := list }}
{{- if $text }}
{{- range $i, $r := splitList "," $masked }}
{{- $req := trim $r }}
{{- $where := printf "%s %q is not a label selector: requirement %d %q" $name $text (add1 $i) (replace $sep "," $req) }}
{{- if not $req }}
{{- fail (printf "%s: empty (two commas in a row, or one at an end)" $where) }}
{{- else if regexMatch `[<>]` $req }}
{{- fail (printf "%s: operator %s is not supported: use =, ==, !=, in, notin, a key alone or !key" $where (regexFind `[<>]` $req)) }}
{{- else if regexMatch (printf `^!\s*%s$` $keyRe) $req }}
{{- $exprs = append $exprs (dict "key" (trimPrefix "!" $req | trim) "operator" "DoesNotExist") }}
{{- else if regexMatch (printf `^%s\s*!=\s*%s$` $keyRe $valueRe) $req }}
{{- $kv := regexSplit `\s*!=\s*` $req 2 }}
{{- $exprs = append $exprs (dict "key" (index $kv 0) "operator" "NotIn" "values" (list (index $kv 1))) }}
{{- else if regexMatch (printf `^%s\s*==?\s*%s$` $keyRe $valueRe) $req }}
{{- $kv := regexSplit `\s*==?\s*` $req 2 }}
{{- if hasKey $labels (index $kv 0) }}
{{- $exprs = append $exprs (dict "key" (index $kv 0) "operator" "In" "values" (list (index $kv 1))) }}
{{- else }}
{{- $_ := set $labels (index $kv 0) (index $kv 1) }}
{{- end }}
{{- else if regexMatch (printf `^%s\s+(in|notin)\s*\([^()]*\)$` $keyRe) $req }}
{{- $words := regexSplit `\s+` (trim (first (splitList "(" $req))) -1 }}
{{- $inner := regexFind `\([^()]*\)` $req | trimPrefix "(" | trimSuffix ")" }}
{{- $values := list }}
{{- range splitList $sep $inner }}
{{- $v := trim . }}
{{- if not (regexMatch (printf `^%s$` $valueRe) $v) }}
{{- fail (printf "%s: %q is not a label value (at most 63 letters, digits, '-', '_' or '.', starting and ending with a letter or digit)" $where $v) }}
{{- end }}
{{- $values = append $values $v }}
{{- end }}
{{- if not (join "" $values) }}
{{- fail (printf "%s: the value list of in and notin must not be empty" $where) }}
{{- end }}
{{- $op := ternary "In" "NotIn" (eq (index $words 1) "in") }}
{{- $exprs = append $exprs (dict "key" (index $words 0) "operator" $op "values" $values) }}
{{- else if regexMatch (printf `^%s$` $keyRe) $req }}
{{- $exprs = append $exprs (dict "key" $req "operator" "Exists") }}
{{- else }}
{{- fail (printf "%s: expected key=value, key!=value, key in (v1,v2), key notin (v1,v2), key or !key, with keys and values as Kubernetes labels take them" $where) }}
{{- end }}
{{- end }}
{{- end }}
{{- $keys := keys $labels }}
{{- range $exprs }}
{{- $keys = append $keys .key }}
{{- end }}
{{- range $keys }}
{{- if gt (len (splitList "/" . | initial | join "/")) 253 }}
{{- fail (printf "%s %q is not a label selector: the prefix of key %q is longer than 253" $name $text .) }}
{{- end }}
{{- end }}
{{- $out := dict }}
{{- if $labels }}
{{- $_ := set $out "matchLabels" $labels }}
{{- end }}
{{- if $exprs }}
{{- $_ := set $out "matchExpressions" $exprs }}
{{- end }}
{{- toYaml $out }}
{{- end }}
