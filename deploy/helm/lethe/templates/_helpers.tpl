{{/*
What each service is, fixed by its code: its component, the topics its consumer group
reads, the ports it reaches besides DNS and Kafka, and the keys of lethe-secrets it reads
besides the ones every service reads (docs/security.md#which-secret-each-workload-gets).
*/}}
{{- define "lethe.facts" -}}
intake:
  component: api
  topics: [erasure.intake]
  egress: [{port: 443, what: dynamodb (https)}]
  secrets: [LETHE_TOKENS]
  optionalSecrets: [LETHE_JWT_HS256_SECRET]
aggregator:
  component: aggregator
  topics: [erasure.requested, erasure.store.done]
  egress: [{port: 443, what: dynamodb (https)}]
qdrant-deleter:
  component: deleter
  topics: [erasure.requested]
  egress: [{port: 6334, what: qdrant gRPC}, {port: 443, what: dynamodb (https)}]
  secrets: [LETHE_QDRANT_API_KEY]
  optionalSecrets: [LETHE_TOKENS, LETHE_JWT_HS256_SECRET]
redis-deleter:
  component: deleter
  topics: [erasure.requested]
  egress: [{port: 6379, what: redis}, {port: 443, what: dynamodb (https)}]
  secrets: [LETHE_REDIS_PASSWORD]
  optionalSecrets: [LETHE_TOKENS, LETHE_JWT_HS256_SECRET]
postgres-deleter:
  component: deleter
  topics: [erasure.requested]
  egress: [{port: 5432, what: postgres}, {port: 443, what: dynamodb (https)}]
  secrets: [LETHE_POSTGRES_DSN]
  optionalSecrets: [LETHE_TOKENS, LETHE_JWT_HS256_SECRET]
dataset-deleter:
  component: deleter
  topics: [erasure.requested]
  egress: [{port: 443, what: s3 and dynamodb (https)}]
  optionalSecrets: [LETHE_TOKENS, LETHE_JWT_HS256_SECRET]
webhook-deleter:
  component: deleter
  topics: [erasure.requested]
  egress: [{port: 443, what: processors' endpoints and dynamodb (https)}]
  optionalSecrets: [LETHE_TOKENS, LETHE_JWT_HS256_SECRET]
s3prefix-deleter:
  component: deleter
  topics: [erasure.requested]
  egress: [{port: 443, what: s3 and dynamodb (https)}]
  optionalSecrets: [LETHE_TOKENS, LETHE_JWT_HS256_SECRET]
audit-verifier:
  component: deleter
  topics: [erasure.requested]
  egress: [{port: 443, what: dynamodb (https)}]
  optionalSecrets: [LETHE_TOKENS, LETHE_JWT_HS256_SECRET]
{{- end -}}

{{- define "lethe.tag" -}}
{{ .Values.image.tag | default .Chart.AppVersion }}
{{- end -}}

{{/* lethe.image: the image of one binary; call with (list $ "intake"). */}}
{{- define "lethe.image" -}}
{{- $ := index . 0 -}}
{{ printf "%s/%s:%s" $.Values.image.registry (index . 1) (include "lethe.tag" $) }}
{{- end -}}

{{- define "lethe.commonLabels" -}}
app.kubernetes.io/part-of: lethe
app.kubernetes.io/managed-by: {{ .Release.Service }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/version: {{ include "lethe.tag" . | quote }}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" }}
{{- end -}}

{{/* lethe.secretRef: one env entry from a Secret key; call with (list secretName key optional). */}}
{{- define "lethe.secretRef" -}}
- name: {{ index . 1 }}
  valueFrom:
    secretKeyRef: {name: {{ index . 0 }}, key: {{ index . 1 }}{{ if index . 2 }}, optional: true{{ end }}}
{{- end -}}

{{/* lethe.config: every setting of lethe-config, by name. */}}
{{- define "lethe.config" -}}
{{- $c := dict
  "LETHE_KAFKA_BROKERS" .Values.kafka.brokers
  "LETHE_INVENTORY" "/etc/lethe/inventory.yaml"
  "LETHE_METRICS_ADDR" "0.0.0.0:9090"
  "LETHE_CREATE_TOPICS" "false" -}}
{{- if .Values.kafka.tls }}{{ $_ := set $c "LETHE_KAFKA_TLS" "true" }}{{ end -}}
{{- with .Values.kafka.sasl.mechanism }}{{ $_ := set $c "LETHE_KAFKA_SASL_MECHANISM" . }}{{ end -}}
{{- with .Values.kafka.sasl.username }}{{ $_ := set $c "LETHE_KAFKA_SASL_USERNAME" . }}{{ end -}}
{{- range $k, $v := .Values.config }}{{ $_ := set $c $k (toString $v) }}{{ end -}}
{{- range $k, $v := .Values.extraConfig }}{{ $_ := set $c $k (toString $v) }}{{ end -}}
{{- toYaml $c -}}
{{- end -}}
