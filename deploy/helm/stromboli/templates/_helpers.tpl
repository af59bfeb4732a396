{{/*
Labels. Selectors (and pod templates) use stromboli.selectorLabels only, so that upgrading the
chart never changes a Deployment's immutable selector. Call with
(dict "root" $ "component" "scheduler").
*/}}
{{- define "stromboli.selectorLabels" -}}
app.kubernetes.io/name: stromboli
app.kubernetes.io/instance: {{ .root.Release.Name }}
app.kubernetes.io/component: {{ .component }}
{{- end }}

{{- define "stromboli.labels" -}}
{{ include "stromboli.selectorLabels" . }}
helm.sh/chart: {{ printf "%s-%s" .root.Chart.Name .root.Chart.Version | replace "+" "_" }}
app.kubernetes.io/managed-by: {{ .root.Release.Service }}
{{- end }}

{{- define "stromboli.image" -}}
{{ printf "%s:%s" .Values.image.repository (.Values.image.tag | default .Chart.AppVersion) }}
{{- end }}

{{/* Namespace of the leader-election Leases. */}}
{{- define "stromboli.leaseNamespace" -}}
{{ .Values.leaderElection.namespace | default .Release.Namespace }}
{{- end }}

{{/* Scheduling constraints of one component: call with its values. */}}
{{- define "stromboli.placement" -}}
{{- with .priorityClassName }}
priorityClassName: {{ . }}
{{- end }}
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
{{- end }}
