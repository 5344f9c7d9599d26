{{/* Object names and labels. */}}
{{- define "gr00tgw.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" }}
{{- end }}

{{- define "gr00tgw.fullname" -}}
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

{{- define "gr00tgw.selectorLabels" -}}
app.kubernetes.io/name: {{ include "gr00tgw.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end }}

{{- define "gr00tgw.labels" -}}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" }}
{{ include "gr00tgw.selectorLabels" . }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/component: inference
app.kubernetes.io/part-of: gr00tgw
app.kubernetes.io/managed-by: {{ .Release.Service }}
{{- end }}

{{- define "gr00tgw.serviceAccountName" -}}
{{- if .Values.serviceAccount.create }}
{{- default (include "gr00tgw.fullname" .) .Values.serviceAccount.name }}
{{- else }}
{{- default "default" .Values.serviceAccount.name }}
{{- end }}
{{- end }}

{{- define "gr00tgw.image" -}}
{{- if .Values.image.digest }}
{{- printf "%s@%s" .Values.image.repository .Values.image.digest }}
{{- else }}
{{- printf "%s:%s" .Values.image.repository (default .Chart.AppVersion .Values.image.tag) }}
{{- end }}
{{- end }}

{{/* The snapshot directory of the pinned revision in the HF cache layout. */}}
{{- define "gr00tgw.weightsDir" -}}
{{- if .Values.kserve.enabled }}
{{- if .Values.kserve.modelSubPath }}
{{- printf "/mnt/models/%s" (trimPrefix "/" .Values.kserve.modelSubPath) }}
{{- else }}
{{- print "/mnt/models" }}
{{- end }}
{{- else }}
{{- printf "%s/hub/models--%s/snapshots/%s" .Values.weights.mountPath (replace "/" "--" .Values.weights.repo) .Values.weights.revision }}
{{- end }}
{{- end }}

{{- define "gr00tgw.pluginsDir" -}}
{{- if eq .Values.plugins.source "volume" }}
{{- .Values.plugins.mountPath }}
{{- end }}
{{- end }}

{{/*
The gateway's config file: .Values.config plus the keys the chart owns.
Fails on a key the chart sets itself.
*/}}
{{- define "gr00tgw.config" -}}
{{- range $k := list "addr" "weights_dir" "plugins_dir" "drain_timeout" "admin_token" }}
{{- if hasKey $.Values.config $k }}
{{- fail (printf "config.%s is set by the chart (see the comment on config in values.yaml); remove it" $k) }}
{{- end }}
{{- end }}
{{- if lt (int .Values.drain.timeoutSeconds) (int (include "gr00tgw.durationSeconds" (default "30s" .Values.config.request_timeout))) }}
{{- fail "drain.timeoutSeconds must be at least config.request_timeout (in seconds), so a request admitted before SIGTERM can finish" }}
{{- end }}
{{- $c := deepCopy .Values.config }}
{{- $_ := set $c "drain_timeout" (printf "%ds" (int .Values.drain.timeoutSeconds)) }}
{{- if gt (int .Values.protocols.zmqPort) 0 }}
{{- $z := default dict (get $c "zmq") }}
{{- $_ := set $z "addr" (printf "*:%d" (int .Values.protocols.zmqPort)) }}
{{- $_ := set $c "zmq" $z }}
{{- end }}
{{- if gt (int .Values.protocols.openpiPort) 0 }}
{{- $o := default dict (get $c "openpi") }}
{{- $_ := set $o "addr" (printf "*:%d" (int .Values.protocols.openpiPort)) }}
{{- $_ := set $c "openpi" $o }}
{{- end }}
{{- toYaml $c }}
{{- end }}

{{/* Whole seconds of a duration "Nms", "Ns", "Nm" or "Nh" (ms rounded up). */}}
{{- define "gr00tgw.durationSeconds" -}}
{{- $d := toString . }}
{{- if not (regexMatch "^[0-9]+(ms|s|m|h)$" $d) }}
{{- fail (printf "duration %q: use a whole number of ms, s, m or h" $d) }}
{{- else if hasSuffix "ms" $d }}
{{- div (add (int (trimSuffix "ms" $d)) 999) 1000 }}
{{- else if hasSuffix "s" $d }}
{{- int (trimSuffix "s" $d) }}
{{- else if hasSuffix "m" $d }}
{{- mul (int (trimSuffix "m" $d)) 60 }}
{{- else }}
{{- mul (int (trimSuffix "h" $d)) 3600 }}
{{- end }}
{{- end }}

{{- define "gr00tgw.terminationGracePeriodSeconds" -}}
{{- add .Values.drain.preStopSleepSeconds .Values.drain.timeoutSeconds .Values.drain.marginSeconds }}
{{- end }}

{{/* The PromQL of the scaling metric: its per-pod average over the window, summed over this release's pods. */}}
{{- define "gr00tgw.scalingQuery" -}}
{{- printf "sum(avg_over_time(%s{namespace=\"%s\",pod=~\"%s-[a-z0-9]+-[a-z0-9]+\"}[%s]))" .Values.autoscaling.metric .Release.Namespace (include "gr00tgw.fullname" .) .Values.autoscaling.window }}
{{- end }}

{{/* The gateway container's environment, shared by the Deployment and the ServingRuntime. */}}
{{- define "gr00tgw.env" -}}
- name: PORT
  value: {{ .Values.port | quote }}
{{- if or .Values.kserve.enabled (ne .Values.weights.source "embedded") }}
- name: GR00TGW_WEIGHTS_DIR
  value: {{ include "gr00tgw.weightsDir" . | quote }}
{{- end }}
{{- with include "gr00tgw.pluginsDir" . }}
- name: GR00TGW_PLUGINS_DIR
  value: {{ . | quote }}
{{- end }}
{{- if .Values.admin.existingSecret }}
- name: GR00TGW_ADMIN_TOKEN
  valueFrom:
    secretKeyRef:
      name: {{ .Values.admin.existingSecret }}
      key: {{ .Values.admin.secretKey }}
{{- end }}
{{- if .Values.security.tlsSecret }}
- name: GR00TGW_TLS_CERT_FILE
  value: /var/run/secrets/gr00tgw/tls/tls.crt
- name: GR00TGW_TLS_KEY_FILE
  value: /var/run/secrets/gr00tgw/tls/tls.key
{{- end }}
{{- if .Values.security.apiKeysSecret }}
- name: GR00TGW_AUTH_API_KEYS_FILE
  value: /var/run/secrets/gr00tgw/keys/{{ .Values.security.apiKeysSecretKey }}
{{- end }}
- name: GOMEMLIMIT
  valueFrom:
    resourceFieldRef:
      resource: limits.memory
      divisor: "1"
{{- with .Values.extraEnv }}
{{ toYaml . }}
{{- end }}
{{- end }}

{{- define "gr00tgw.probes" -}}
startupProbe:
  httpGet:
    path: {{ .Values.probes.startup.path }}
    port: http
    {{- include "gr00tgw.probeScheme" . }}
  periodSeconds: {{ .Values.probes.startup.periodSeconds }}
  failureThreshold: {{ .Values.probes.startup.failureThreshold }}
  timeoutSeconds: {{ .Values.probes.startup.timeoutSeconds }}
readinessProbe:
  httpGet:
    path: {{ .Values.probes.readiness.path }}
    port: http
    {{- include "gr00tgw.probeScheme" . }}
  periodSeconds: {{ .Values.probes.readiness.periodSeconds }}
  failureThreshold: {{ .Values.probes.readiness.failureThreshold }}
  timeoutSeconds: {{ .Values.probes.readiness.timeoutSeconds }}
livenessProbe:
  httpGet:
    path: {{ .Values.probes.liveness.path }}
    port: http
    {{- include "gr00tgw.probeScheme" . }}
  periodSeconds: {{ .Values.probes.liveness.periodSeconds }}
  failureThreshold: {{ .Values.probes.liveness.failureThreshold }}
  timeoutSeconds: {{ .Values.probes.liveness.timeoutSeconds }}
lifecycle:
  preStop:
    sleep:
      seconds: {{ .Values.drain.preStopSleepSeconds }}
{{- end }}

{{/* With TLS the probes speak HTTPS (the kubelet does not verify the certificate). */}}
{{- define "gr00tgw.probeScheme" -}}
{{- if .Values.security.tlsSecret }}
    scheme: HTTPS
{{- end }}
{{- end }}

{{/* The Secret volumes of security.*: mounts (argument: the volume name prefix). */}}
{{- define "gr00tgw.securityMounts" -}}
{{- $p := index . 1 }}
{{- with (index . 0).Values.security }}
{{- if .tlsSecret }}
- name: {{ $p }}tls
  mountPath: /var/run/secrets/gr00tgw/tls
  readOnly: true
{{- end }}
{{- if .apiKeysSecret }}
- name: {{ $p }}api-keys
  mountPath: /var/run/secrets/gr00tgw/keys
  readOnly: true
{{- end }}
{{- end }}
{{- end }}

{{/* The Secret volumes of security.* (argument: the volume name prefix). */}}
{{- define "gr00tgw.securityVolumes" -}}
{{- $p := index . 1 }}
{{- with (index . 0).Values.security }}
{{- if .tlsSecret }}
- name: {{ $p }}tls
  secret:
    secretName: {{ .tlsSecret }}
    defaultMode: 0440
{{- end }}
{{- if .apiKeysSecret }}
- name: {{ $p }}api-keys
  secret:
    secretName: {{ .apiKeysSecret }}
    defaultMode: 0440
    items:
      - key: {{ .apiKeysSecretKey }}
        path: {{ .apiKeysSecretKey }}
{{- end }}
{{- end }}
{{- end }}

{{- define "gr00tgw.ports" -}}
- name: http
  containerPort: {{ .Values.port }}
  protocol: TCP
{{- if gt (int .Values.protocols.zmqPort) 0 }}
- name: zmq
  containerPort: {{ .Values.protocols.zmqPort }}
  protocol: TCP
{{- end }}
{{- if gt (int .Values.protocols.openpiPort) 0 }}
- name: openpi
  containerPort: {{ .Values.protocols.openpiPort }}
  protocol: TCP
{{- end }}
{{- end }}

{{- define "gr00tgw.containerSecurityContext" -}}
runAsNonRoot: true
runAsUser: 65532
runAsGroup: 65532
allowPrivilegeEscalation: false
readOnlyRootFilesystem: true
capabilities:
  drop: ["ALL"]
seccompProfile:
  type: RuntimeDefault
{{- end }}

{{/* Container resources, with the accelerator's added. */}}
{{- define "gr00tgw.resources" -}}
{{- $r := deepCopy .Values.resources }}
{{- $req := default dict (get $r "requests") }}
{{- $lim := default dict (get $r "limits") }}
{{- if eq .Values.accelerator.type "tenstorrent" }}
{{- $_ := set $req "hugepages-1Gi" .Values.accelerator.tenstorrent.hugepages1Gi }}
{{- $_ := set $lim "hugepages-1Gi" .Values.accelerator.tenstorrent.hugepages1Gi }}
{{- $_ := set $r "claims" (list (dict "name" "tenstorrent")) }}
{{- else if eq .Values.accelerator.type "nvidia" }}
{{- $_ := set $lim "nvidia.com/gpu" (int .Values.accelerator.nvidia.count) }}
{{- end }}
{{- if $req }}{{ $_ := set $r "requests" $req }}{{ end }}
{{- if $lim }}{{ $_ := set $r "limits" $lim }}{{ end }}
{{- toYaml $r }}
{{- end }}
