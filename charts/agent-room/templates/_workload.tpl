{{/*
One Deployment for one Agent Room service. Call with a dict:
  root       the chart's root context
  component  room, messaging, delivery, record, auth or edge
  values     that service's values block
  ports      YAML list of container ports
  env        YAML list of the chart's variables for it (extraEnv is merged in here)
  probes     YAML with its startupProbe, readinessProbe and livenessProbe
  phases     how many SHUTDOWN_GRACE_MS waits its shutdown makes one after another
*/}}
{{- define "agent-room.serviceDeployment" -}}
{{- $root := .root -}}
{{- $v := .values -}}
{{- $ctx := dict "root" $root "component" .component -}}
apiVersion: apps/v1
kind: Deployment
metadata:
  name: {{ include "agent-room.host" (dict "root" $root "name" .component) }}
  namespace: {{ $root.Release.Namespace }}
  labels:
    {{- include "agent-room.labels" $ctx | nindent 4 }}
spec:
  {{- if not $v.autoscaling.enabled }}
  replicas: {{ $v.replicas }}
  {{- end }}
  revisionHistoryLimit: 5
  strategy:
    type: RollingUpdate
    rollingUpdate:
      # A new pod is ready before an old one goes: a rollout never lowers capacity.
      maxSurge: 25%
      maxUnavailable: 0
  selector:
    matchLabels:
      {{- include "agent-room.selectorLabels" $ctx | nindent 6 }}
  template:
    metadata:
      labels:
        {{- include "agent-room.labels" $ctx | nindent 8 }}
      annotations:
        # REDIS_URL, DATABASE_URL and CURSOR_SECRET come from Secrets, which do not restart pods when they change;
        # a change of where they come from (or of the external URL) rolls the pods.
        checksum/secret-sources: {{ include "agent-room.secretSources" $root | sha256sum }}
        {{- with $v.podAnnotations }}
        {{- toYaml . | nindent 8 }}
        {{- end }}
    spec:
      serviceAccountName: {{ include "agent-room.serviceAccountName" $root }}
      automountServiceAccountToken: false
      # No <SERVICE>_PORT variables injected for every Service of the namespace: the environment is
      # exactly what the service's schema knows.
      enableServiceLinks: false
      {{- with include "agent-room.imagePullSecrets" $root }}
      {{- . | nindent 6 }}
      {{- end }}
      securityContext:
        {{- toYaml $root.Values.podSecurityContext | nindent 8 }}
      terminationGracePeriodSeconds: {{ include "agent-room.terminationGracePeriodSeconds" (dict "root" $root "values" $v "phases" .phases) }}
      containers:
        - name: {{ .component }}
          image: {{ include "agent-room.image" $root | quote }}
          imagePullPolicy: {{ $root.Values.image.pullPolicy }}
          args:
            - services/{{ .component }}/dist/main.js
          ports:
            {{- .ports | trim | nindent 12 }}
          env:
            {{- include "agent-room.mergeEnv" (dict "chart" .env "extra" $v.extraEnv) | nindent 12 }}
          {{- .probes | trim | nindent 10 }}
          resources:
            {{- toYaml $v.resources | nindent 12 }}
          securityContext:
            {{- toYaml $root.Values.containerSecurityContext | nindent 12 }}
          volumeMounts:
            - name: tmp
              mountPath: /tmp
      volumes:
        - name: tmp
          emptyDir:
            sizeLimit: 64Mi
      {{- include "agent-room.scheduling" $v | nindent 6 }}
{{- end -}}

{{/* What decides where the services' secrets come from; its checksum rolls pods when it changes. */}}
{{- define "agent-room.secretSources" -}}
{{- toJson (dict "existingSecret" .Values.secrets.existingSecret "redis" .Values.redis.external "postgresql" .Values.postgresql.external) -}}
{{- end -}}

{{/* HorizontalPodAutoscaler and PodDisruptionBudget of one Deployment; same dict as above. */}}
{{- define "agent-room.scaling" -}}
{{- $root := .root -}}
{{- $v := .values -}}
{{- $ctx := dict "root" $root "component" .component -}}
{{- $name := include "agent-room.host" (dict "root" $root "name" .component) -}}
{{- if $v.autoscaling.enabled }}
{{- if gt (int $v.autoscaling.minReplicas) (int $v.autoscaling.maxReplicas) }}
{{- fail (printf "%s.autoscaling: minReplicas (%v) is above maxReplicas (%v)" .component $v.autoscaling.minReplicas $v.autoscaling.maxReplicas) }}
{{- end }}
---
apiVersion: autoscaling/v2
kind: HorizontalPodAutoscaler
metadata:
  name: {{ $name }}
  namespace: {{ $root.Release.Namespace }}
  labels:
    {{- include "agent-room.labels" $ctx | nindent 4 }}
spec:
  scaleTargetRef:
    apiVersion: apps/v1
    kind: Deployment
    name: {{ $name }}
  minReplicas: {{ $v.autoscaling.minReplicas }}
  maxReplicas: {{ $v.autoscaling.maxReplicas }}
  metrics:
    - type: Resource
      resource:
        name: cpu
        target:
          type: Utilization
          averageUtilization: {{ $v.autoscaling.targetCPUUtilizationPercentage }}
{{- end }}
{{- if $v.pdb.enabled }}
---
apiVersion: policy/v1
kind: PodDisruptionBudget
metadata:
  name: {{ $name }}
  namespace: {{ $root.Release.Namespace }}
  labels:
    {{- include "agent-room.labels" $ctx | nindent 4 }}
spec:
  maxUnavailable: {{ $v.pdb.maxUnavailable }}
  selector:
    matchLabels:
      {{- include "agent-room.selectorLabels" $ctx | nindent 6 }}
{{- end }}
{{- end -}}

{{/* A Service; call with (dict "root" $ "component" "room" "name" "room-headless" "headless" true "metrics" true "ports" <yaml>). */}}
{{- define "agent-room.service" -}}
{{- $ctx := dict "root" .root "component" .component -}}
apiVersion: v1
kind: Service
metadata:
  name: {{ include "agent-room.host" (dict "root" .root "name" .name) }}
  namespace: {{ .root.Release.Namespace }}
  labels:
    {{- include "agent-room.labels" $ctx | nindent 4 }}
    {{- if .metrics }}
    agent-room.dev/metrics: "true"
    {{- end }}
spec:
  {{- if .headless }}
  clusterIP: None
  {{- end }}
  selector:
    {{- include "agent-room.selectorLabels" $ctx | nindent 4 }}
  ports:
    {{- .ports | trim | nindent 4 }}
{{- end -}}
