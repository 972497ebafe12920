{{/*
Names. Object names are "<fullname>-<component>"; the full name is at most 63 - 20 characters, so the
longest derived name ("<fullname>-messaging-headless") still fits a DNS label.
*/}}
{{- define "agent-room.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 43 | trimSuffix "-" -}}
{{- end -}}

{{- define "agent-room.fullname" -}}
{{- if .Values.fullnameOverride -}}
{{- .Values.fullnameOverride | trunc 43 | trimSuffix "-" -}}
{{- else -}}
{{- $name := default .Chart.Name .Values.nameOverride -}}
{{- if contains $name .Release.Name -}}
{{- .Release.Name | trunc 43 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-%s" .Release.Name $name | trunc 43 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}
{{- end -}}

{{- define "agent-room.chart" -}}
{{- printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{/* Labels of every object; call with (dict "root" $ "component" "room"). */}}
{{- define "agent-room.labels" -}}
helm.sh/chart: {{ include "agent-room.chart" .root }}
{{ include "agent-room.selectorLabels" . }}
app.kubernetes.io/version: {{ .root.Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .root.Release.Service }}
app.kubernetes.io/part-of: agent-room
{{- with .root.Values.commonLabels }}
{{ toYaml . }}
{{- end }}
{{- end -}}

{{/* The labels a component's pods are selected by (Services, NetworkPolicies, PDBs). */}}
{{- define "agent-room.selectorLabels" -}}
app.kubernetes.io/name: {{ include "agent-room.name" .root }}
app.kubernetes.io/instance: {{ .root.Release.Name }}
{{- if .component }}
app.kubernetes.io/component: {{ .component }}
{{- end }}
{{- end -}}

{{- define "agent-room.image" -}}
{{- $image := .Values.image -}}
{{- if $image.digest -}}
{{- printf "%s@%s" $image.repository $image.digest -}}
{{- else -}}
{{- printf "%s:%s" $image.repository (default .Chart.AppVersion $image.tag) -}}
{{- end -}}
{{- end -}}

{{- define "agent-room.serviceAccountName" -}}
{{- if .Values.serviceAccount.create -}}
{{- default (include "agent-room.fullname" .) .Values.serviceAccount.name -}}
{{- else -}}
{{- default "default" .Values.serviceAccount.name -}}
{{- end -}}
{{- end -}}

{{/* Public addresses: publicUrls.site, else the first Ingress host, else a local port-forward. */}}
{{- define "agent-room.siteUrl" -}}
{{- if .Values.publicUrls.site -}}
{{- $site := .Values.publicUrls.site | trimSuffix "/" -}}
{{- if not (regexMatch "^https?://[^/?#]+$" $site) -}}
{{- fail (printf "publicUrls.site must be an origin such as https://room.example.com, without a path (got %q): Envoy routes the site at / and the API at /api" .Values.publicUrls.site) -}}
{{- end -}}
{{- $site -}}
{{- else if and .Values.ingress.enabled .Values.ingress.hosts -}}
{{- printf "%s://%s" (ternary "https" "http" (not (empty .Values.ingress.tls))) (first .Values.ingress.hosts) -}}
{{- else -}}
http://localhost:8080
{{- end -}}
{{- end -}}

{{- define "agent-room.apiUrl" -}}
{{- printf "%s/api" (include "agent-room.siteUrl" .) -}}
{{- end -}}

{{/* Redis: external when a URL or a Secret with one is given, bundled otherwise. */}}
{{- define "agent-room.redis.external" -}}
{{- if and .Values.redis.external.url .Values.redis.external.existingSecret -}}
{{- fail "set redis.external.url or redis.external.existingSecret, not both" -}}
{{- end -}}
{{- if or .Values.redis.external.url .Values.redis.external.existingSecret -}}true{{- end -}}
{{- end -}}

{{/*
PostgreSQL (the record's database): external when a URL or a Secret with one is given, bundled
otherwise. A read-replica URL comes the same way as the URL it goes with.
*/}}
{{- define "agent-room.postgresql.external" -}}
{{- $e := .Values.postgresql.external -}}
{{- if and $e.url $e.existingSecret -}}
{{- fail "set postgresql.external.url or postgresql.external.existingSecret, not both" -}}
{{- end -}}
{{- if and $e.readUrl (not $e.url) -}}
{{- fail "postgresql.external.readUrl goes with postgresql.external.url (with postgresql.external.existingSecret, put the read URL in that Secret and name its key in postgresql.external.existingSecretReadKey)" -}}
{{- end -}}
{{- if and $e.existingSecretReadKey (not $e.existingSecret) -}}
{{- fail "postgresql.external.existingSecretReadKey names a key of postgresql.external.existingSecret, which is not set" -}}
{{- end -}}
{{- if or $e.url $e.existingSecret -}}true{{- end -}}
{{- end -}}

{{/* A secretKeyRef (as YAML) for DATABASE_URL. */}}
{{- define "agent-room.databaseUrlRef" -}}
{{- if .Values.postgresql.external.existingSecret -}}
name: {{ .Values.postgresql.external.existingSecret }}
key: {{ .Values.postgresql.external.existingSecretKey }}
{{- else if .Values.postgresql.external.url -}}
name: {{ include "agent-room.secretName" . }}
key: database-url
{{- else -}}
name: {{ include "agent-room.appSecretName" . }}
key: database-url
{{- end -}}
{{- end -}}

{{/* A secretKeyRef (as YAML) for DATABASE_READ_URL; empty when no read replica is given. */}}
{{- define "agent-room.databaseReadUrlRef" -}}
{{- if .Values.postgresql.external.existingSecretReadKey -}}
name: {{ .Values.postgresql.external.existingSecret }}
key: {{ .Values.postgresql.external.existingSecretReadKey }}
{{- else if .Values.postgresql.external.readUrl -}}
name: {{ include "agent-room.secretName" . }}
key: database-read-url
{{- end -}}
{{- end -}}

{{/* The Secret the chart creates: CURSOR_SECRET, the bundled Redis's and PostgreSQL's passwords and URLs, external URLs given as values. */}}
{{- define "agent-room.secretName" -}}
{{- include "agent-room.fullname" . -}}
{{- end -}}

{{/* Where CURSOR_SECRET and the bundled Redis's and PostgreSQL's passwords and URLs come from. */}}
{{- define "agent-room.appSecretName" -}}
{{- default (include "agent-room.secretName" .) .Values.secrets.existingSecret -}}
{{- end -}}

{{/* A secretKeyRef (as YAML) for REDIS_URL. */}}
{{- define "agent-room.redisUrlRef" -}}
{{- if .Values.redis.external.existingSecret -}}
name: {{ .Values.redis.external.existingSecret }}
key: {{ .Values.redis.external.existingSecretKey }}
{{- else if .Values.redis.external.url -}}
name: {{ include "agent-room.secretName" . }}
key: redis-url
{{- else -}}
name: {{ include "agent-room.appSecretName" . }}
key: redis-url
{{- end -}}
{{- end -}}

{{- define "agent-room.host" -}}
{{- printf "%s-%s" (include "agent-room.fullname" .root) .name -}}
{{- end -}}

{{/*
Environment every service reads (kit's serviceEnv). PORT is left to its default: it only
makes the default SITE_URL, which the chart always sets.
*/}}
{{- define "agent-room.env.common" -}}
- name: SITE_URL
  value: {{ include "agent-room.siteUrl" .root | quote }}
- name: API_URL
  value: {{ include "agent-room.apiUrl" .root | quote }}
- name: REDIS_URL
  valueFrom:
    secretKeyRef:
      {{- include "agent-room.redisUrlRef" .root | nindent 6 }}
- name: REDIS_KEY_PREFIX
  value: {{ .root.Values.redis.keyPrefix | quote }}
{{- if not (kindIs "invalid" .root.Values.redis.waitReplicas) }}
- name: REDIS_WAIT_REPLICAS
  value: {{ .root.Values.redis.waitReplicas | int | toString | quote }}
{{- end }}
- name: REDIS_WAIT_TIMEOUT_MS
  value: {{ .root.Values.redis.waitTimeoutMs | int | toString | quote }}
{{ include "agent-room.env.process" . }}
{{- end -}}

{{/* Logs, the admin port, shutdown and gRPC deadlines: what every process reads, the record (which has no Redis) included. */}}
{{- define "agent-room.env.process" -}}
- name: LOG_LEVEL
  value: {{ .root.Values.log.level | quote }}
- name: LOG_FORMAT
  value: {{ .root.Values.log.format | quote }}
- name: ADMIN_PORT
  value: "9090"
- name: SHUTDOWN_GRACE_MS
  value: {{ .values.shutdownGraceMs | int | toString | quote }}
- name: SHUTDOWN_DELAY_MS
  value: {{ .root.Values.shutdownDelayMs | int | toString | quote }}
- name: GRPC_DEADLINE_MS
  value: {{ .root.Values.grpc.deadlineMs | int | toString | quote }}
{{- include "agent-room.env.tracing" .root }}
{{- end -}}

{{/*
With tracing.enabled, the OpenTelemetry SDK's own variables: spans over OTLP/HTTP to the receiver,
the sampling ratio for traces a process starts itself, and a parent's decision kept otherwise (what
Envoy decided, at the same ratio: docs/decisions.md §50). Starts with a newline; nothing when off.
*/}}
{{- define "agent-room.env.tracing" -}}
{{- if .Values.tracing.enabled }}
{{- $attributes := list (printf "k8s.namespace.name=%s" .Release.Namespace) -}}
{{- range $key, $value := .Values.tracing.resourceAttributes -}}
{{- $attributes = append $attributes (printf "%s=%s" $key $value) -}}
{{- end }}
- name: OTEL_EXPORTER_OTLP_ENDPOINT
  value: {{ .Values.tracing.otlpEndpoint | trimSuffix "/" | quote }}
- name: OTEL_EXPORTER_OTLP_PROTOCOL
  value: "http/protobuf"
- name: OTEL_TRACES_SAMPLER
  value: "parentbased_traceidratio"
- name: OTEL_TRACES_SAMPLER_ARG
  value: {{ .Values.tracing.sampling | toString | quote }}
- name: OTEL_RESOURCE_ATTRIBUTES
  value: {{ join "," $attributes | quote }}
{{- end }}
{{- end -}}

{{/* The OTLP receiver of tracing.otlpEndpoint, as Envoy dials it: host, port (80 when the URL has none) and the traces URL, as JSON. */}}
{{- define "agent-room.tracing.receiver" -}}
{{- $endpoint := .Values.tracing.otlpEndpoint | trimSuffix "/" -}}
{{- $url := urlParse $endpoint -}}
{{- $hostPort := splitList ":" $url.host -}}
{{- $port := 80 -}}
{{- if gt (len $hostPort) 1 }}{{ $port = index $hostPort 1 | int }}{{ end -}}
{{- toJson (dict "host" (first $hostPort) "port" $port "tracesUrl" (printf "%s/v1/traces" $endpoint)) -}}
{{- end -}}

{{- define "agent-room.env.cursorSecret" -}}
- name: CURSOR_SECRET
  valueFrom:
    secretKeyRef:
      name: {{ include "agent-room.appSecretName" . }}
      key: cursor-secret
{{- end -}}

{{/*
The container's env: the chart's variables, then extraEnv; an extraEnv entry with the name of a
chart variable replaces it (a list with the same name twice is rejected by server-side apply).
Call with (dict "chart" <yaml list> "extra" <list>).
*/}}
{{- define "agent-room.mergeEnv" -}}
{{- $chart := fromYamlArray .chart -}}
{{- $extra := .extra | default list -}}
{{- $names := list -}}
{{- range $extra -}}
{{- $names = append $names .name -}}
{{- end -}}
{{- $out := list -}}
{{- range $chart -}}
{{- if not (has .name $names) -}}
{{- $out = append $out . -}}
{{- end -}}
{{- end -}}
{{- toYaml (concat $out $extra) -}}
{{- end -}}

{{/*
Seconds Kubernetes waits after SIGTERM before SIGKILL: SHUTDOWN_DELAY_MS (serving, not ready), then
the service's own grace (`phases` times SHUTDOWN_GRACE_MS: auth drains its pages, then its gRPC
calls), plus 5 s to close Redis and exit.
*/}}
{{- define "agent-room.terminationGracePeriodSeconds" -}}
{{- $ms := add .root.Values.shutdownDelayMs (mul .values.shutdownGraceMs .phases) -}}
{{- add (div (add $ms 999) 1000) 5 -}}
{{- end -}}

{{/* Pod placement and annotations shared by every workload. */}}
{{- define "agent-room.scheduling" -}}
{{- with .nodeSelector }}
nodeSelector:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- with .tolerations }}
tolerations:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- with .affinity }}
affinity:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- with .topologySpreadConstraints }}
topologySpreadConstraints:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- end -}}

{{- define "agent-room.imagePullSecrets" -}}
{{- with .Values.image.pullSecrets -}}
imagePullSecrets:
{{- range . }}
  - name: {{ . }}
{{- end }}
{{- end -}}
{{- end -}}

{{/*
POSTS_RETENTION, read by room (what it keeps) and edge (at most half of it in memory): one value for both.
*/}}
{{- define "agent-room.env.postsRetention" -}}
- name: POSTS_RETENTION
  value: {{ .Values.posts.retention | int | toString | quote }}
{{- end -}}
