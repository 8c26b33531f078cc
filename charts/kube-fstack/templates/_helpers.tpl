{{/* Names. With release name kube-fstack every name equals the operator's flag default. */}}
{{- define "kube-fstack.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" }}
{{- end }}

{{- define "kube-fstack.fullname" -}}
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

{{- define "kube-fstack.operatorName" -}}{{ include "kube-fstack.fullname" . }}-operator{{- end }}
{{- define "kube-fstack.webhookService" -}}{{ include "kube-fstack.fullname" . }}-webhook{{- end }}
{{- define "kube-fstack.mutatingName" -}}{{ include "kube-fstack.fullname" . }}-injector{{- end }}
{{- define "kube-fstack.validatingName" -}}{{ include "kube-fstack.fullname" . }}-validator{{- end }}
{{- define "kube-fstack.certificateName" -}}{{ include "kube-fstack.fullname" . }}-webhook{{- end }}
{{- define "kube-fstack.cniName" -}}{{ include "kube-fstack.fullname" . }}-cni{{- end }}

{{- define "kube-fstack.certSecret" -}}
{{- default (printf "%s-webhook-cert" (include "kube-fstack.fullname" .)) .Values.certs.secretName }}
{{- end }}

{{/* Labels every object carries. */}}
{{- define "kube-fstack.labels" -}}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" }}
app.kubernetes.io/name: {{ include "kube-fstack.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
app.kubernetes.io/part-of: kube-fstack
{{- end }}

{{/* Selector labels of one component (operator or cni): pass (dict "ctx" $ "component" "operator"). */}}
{{- define "kube-fstack.selectorLabels" -}}
app.kubernetes.io/name: {{ include "kube-fstack.name" .ctx }}
app.kubernetes.io/instance: {{ .ctx.Release.Name }}
app.kubernetes.io/component: {{ .component }}
{{- end }}

{{- define "kube-fstack.componentLabels" -}}
{{ include "kube-fstack.labels" .ctx }}
app.kubernetes.io/component: {{ .component }}
{{- end }}

{{- define "kube-fstack.image" -}}
{{ .repository }}:{{ .tag }}
{{- end }}

{{/*
The operator's RBAC rules, read from files/rbac/role.yaml: a copy of config/rbac/role.yaml, which
controller-gen generates from the code's markers (make generate copies it, make verify catches
drift). Pass (dict "ctx" $ "kind" "ClusterRole") or "Role".
*/}}
{{- define "kube-fstack.generatedRules" -}}
{{- $rules := list }}
{{- range $doc := splitList "\n---\n" (.ctx.Files.Get "files/rbac/role.yaml") }}
{{- $obj := fromYaml $doc }}
{{- if eq (get $obj "kind") $.kind }}
{{- $rules = get $obj "rules" }}
{{- end }}
{{- end }}
{{- if not $rules }}
{{- fail (printf "files/rbac/role.yaml has no %s: run make generate" .kind) }}
{{- end }}
{{- toYaml $rules }}
{{- end }}
