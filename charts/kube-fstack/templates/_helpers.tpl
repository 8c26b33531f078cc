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
{{- define "kube-fstack.metricsService" -}}{{ include "kube-fstack.fullname" . }}-metrics{{- end }}
{{- define "kube-fstack.webhookClientCA" -}}{{ include "kube-fstack.fullname" . }}-webhook-client-ca{{- end }}
{{- define "kube-fstack.mutatingName" -}}{{ include "kube-fstack.fullname" . }}-injector{{- end }}
{{- define "kube-fstack.validatingName" -}}{{ include "kube-fstack.fullname" . }}-validator{{- end }}
{{- define "kube-fstack.certificateName" -}}{{ include "kube-fstack.fullname" . }}-webhook{{- end }}
{{- define "kube-fstack.cniName" -}}{{ include "kube-fstack.fullname" . }}-cni{{- end }}
{{- define "kube-fstack.nodeAgentName" -}}{{ include "kube-fstack.fullname" . }}-node-agent{{- end }}

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

{{/*
An image reference from the {repository, tag, digest} every image value has: pass
(dict "ctx" $ "image" .Values.operator.image). The digest pins the content when set and wins;
the tag defaults to the chart's appVersion, so a packaged chart names the images of its release.
*/}}
{{- define "kube-fstack.image" -}}
{{- if .image.digest -}}
{{ .image.repository }}@{{ .image.digest }}
{{- else -}}
{{ .image.repository }}:{{ .image.tag | default .ctx.Chart.AppVersion }}
{{- end }}
{{- end }}

{{/*
The operator's RBAC rules, read from files/rbac/role.yaml: a copy of config/rbac/role.yaml, which
controller-gen generates from the code's markers (make generate copies it, make verify catches
drift). Pass (dict "ctx" $ "kind" "ClusterRole") or "Role". Two changes, both checked by
test/chart (TestRBACIsGenerated):
- resourceNames are the operator's flag defaults in the markers; each becomes the name of this
  release's object (a name the chart does not know fails the render, so a new marker with
  resourceNames cannot slip through unmapped);
- rules the configured operator never uses are left out: the certificate's (webhook
  configurations, Secrets) when cert-manager issues it, the metrics filter's (TokenReviews,
  SubjectAccessReviews) when metrics are off.
*/}}
{{- define "kube-fstack.generatedRules" -}}
{{- $ctx := .ctx }}
{{- $names := dict
  "kube-fstack-injector" (include "kube-fstack.mutatingName" $ctx)
  "kube-fstack-validator" (include "kube-fstack.validatingName" $ctx)
  "kube-fstack-webhook-cert" (include "kube-fstack.certSecret" $ctx)
  "kube-fstack-operator.kubefstack.io" "kube-fstack-operator.kubefstack.io" }}
{{- $unused := list }}
{{- if ne $ctx.Values.certs.mode "operator" }}
{{- $unused = concat $unused (list "mutatingwebhookconfigurations" "validatingwebhookconfigurations" "secrets") }}
{{- end }}
{{- if not $ctx.Values.operator.metrics.enabled }}
{{- $unused = concat $unused (list "tokenreviews" "subjectaccessreviews") }}
{{- end }}
{{- $rules := list }}
{{- range $doc := splitList "\n---\n" ($ctx.Files.Get "files/rbac/role.yaml") }}
{{- $obj := fromYaml $doc }}
{{- if eq (get $obj "kind") $.kind }}
{{- $rules = get $obj "rules" }}
{{- end }}
{{- end }}
{{- if not $rules }}
{{- fail (printf "files/rbac/role.yaml has no %s: run make generate" .kind) }}
{{- end }}
{{- $out := list }}
{{- range $rule := $rules }}
{{- $skip := false }}
{{- range $res := (get $rule "resources" | default list) }}
{{- if has $res $unused }}{{ $skip = true }}{{ end }}
{{- end }}
{{- if not $skip }}
{{- with get $rule "resourceNames" }}
{{- $mapped := list }}
{{- range $n := . }}
{{- if not (hasKey $names $n) }}
{{- fail (printf "files/rbac/role.yaml names %q in resourceNames: map it to the release's object in kube-fstack.generatedRules" $n) }}
{{- end }}
{{- $mapped = append $mapped (get $names $n) }}
{{- end }}
{{- $_ := set $rule "resourceNames" $mapped }}
{{- end }}
{{- $out = append $out $rule }}
{{- end }}
{{- end }}
{{- toYaml $out }}
{{- end }}

{{- /*
kube-fstack.noCNIQueues refuses an fstack-cni config (dict "config" "path") that sets queues or
queueSize: fstack-cni refuses every ADD with them. The StackInstance owns a vhost-user port's
queues (spec.ports[].device.vhostUser), which the pod's DPDK opens and OVS follows.
*/ -}}
{{- define "kube-fstack.noCNIQueues" -}}
{{- range $key := list "queues" "queueSize" }}
{{- if hasKey $.config $key }}
{{- fail (printf "%s.%s: fstack-cni no longer takes it (it refuses every ADD whose config sets it); set spec.ports[].device.vhostUser.%s in the StackInstance instead, where the pod's DPDK reads it" $.path $key $key) }}
{{- end }}
{{- end }}
{{- end }}

{{/*
The OVS bridge of a network config (the NetworkAttachmentDefinition's, the conflist entry's): one
value, cni.nodeAgent.bridge, the bridge the node agent checks and fstack-cni adds ports to, so the
two cannot disagree. A network config's own "bridge" is deprecated: still accepted when it names
that bridge (values written for older charts keep installing), refused when it names another.
*/}}
{{- define "kube-fstack.cniBridge" -}}
{{- $bridge := .ctx.Values.cni.nodeAgent.bridge }}
{{- if and (hasKey .config "bridge") (ne (toString (index .config "bridge")) $bridge) }}
{{- fail (printf "%s.bridge is %q but cni.nodeAgent.bridge is %q: the bridge is one value, cni.nodeAgent.bridge (the bridge the node agent checks and fstack-cni adds ports to); %s.bridge is deprecated: remove it, or set cni.nodeAgent.bridge=%s" .path (toString (index .config "bridge")) $bridge .path (toString (index .config "bridge"))) }}
{{- end }}
{{- $bridge }}
{{- end }}

{{/*
The CNI plugin's log settings (logFormat, logLevel) as a JSON object: only what differs from
its defaults (text, info), so a network config says nothing it need not.
*/}}
{{- define "kube-fstack.cniLogConfig" -}}
{{- $log := dict }}
{{- if ne .Values.logging.format "text" }}{{ $_ := set $log "logFormat" .Values.logging.format }}{{ end }}
{{- if ne .Values.logging.level "info" }}{{ $_ := set $log "logLevel" .Values.logging.level }}{{ end }}
{{- toJson $log }}
{{- end }}

{{/*
kube-fstack.noCNINodePaths refuses an fstack-cni network config (dict "config" "path") that names
a node path: fstack-cni (root on the host) takes them from its node config (cni.nodeConfig) and
refuses, at every ADD, a network config naming another value.
*/ -}}
{{- define "kube-fstack.noCNINodePaths" -}}
{{- range $key := list "ovsdbSocket" "socketRoot" "kubeletRootDir" "deviceInfoDir" "logFile" }}
{{- if hasKey $.config $key }}
{{- fail (printf "%s.%s: fstack-cni takes the node's paths from its node config, not from a network config (it refuses a network config naming another value); remove it, and set the node's value in cni.nodeConfig (or vhostSocketRoot, kubeletRootDir, cni.nodeAgent.ovsdbSocket)" $.path $key) }}
{{- end }}
{{- end }}
{{- end }}

{{/*
kube-fstack.cniNodeConfig is fstack-cni's node config as JSON (cni/internal/nodeconf): the node's
paths, the namespaces it serves, and the data network (kube-fstack.dataNetworkPlan) as its one
network and default. The release namespace is refused, as the injector never serves it.
*/ -}}
{{- define "kube-fstack.cniNodeConfig" -}}
{{- $nc := .Values.cni.nodeConfig }}
{{- if has .Release.Namespace $nc.namespaces }}
{{- fail (printf "cni.nodeConfig.namespaces: %s is the release namespace, whose pods the injector never serves; remove it" .Release.Namespace) }}
{{- end }}
{{- $plan := include "kube-fstack.dataNetworkPlan" . | fromJson }}
{{- toJson (dict "ovsdbSocket" .Values.cni.nodeAgent.ovsdbSocket "socketRoot" .Values.vhostSocketRoot "kubeletRootDir" .Values.kubeletRootDir "deviceInfoDir" $nc.deviceInfoDir "logFile" $nc.logFile "namespaces" $nc.namespaces "networks" (list $plan) "defaultNetwork" $plan.name) }}
{{- end }}

{{- /*
kube-fstack.dataNetworkSpec is the DataNetwork's spec (api/v1alpha1 DataNetworkSpec) from the
dataNetwork values, as JSON: the one rendering of the network, which the DataNetwork object
shows and the node config's copy (kube-fstack.dataNetworkPlan) is made from, so the two cannot
disagree. With no grants, one grant of the subnets to the namespaces the release serves
(cni.nodeConfig.namespaces and networkAttachmentDefinition.namespaces, each once).
*/ -}}
{{- define "kube-fstack.dataNetworkSpec" -}}
{{- $dn := .Values.dataNetwork }}
{{- include "kube-fstack.dataNetworkMatchesNAD" . }}
{{- $spec := dict "subnets" $dn.subnets }}
{{- range $k := list "gateways" "reserved" "vlans" "nodeSelector" }}
{{- with get $dn $k }}{{ $_ := set $spec $k . }}{{ end }}
{{- end }}
{{- if and (ne $dn.mac.policy "Prefix") $dn.mac.prefix }}
{{- fail (printf "dataNetwork.mac.prefix is %q but dataNetwork.mac.policy is %s: a prefix holds only with policy Prefix; set the policy, or remove the prefix" $dn.mac.prefix $dn.mac.policy) }}
{{- end }}
{{- $mac := dict "policy" $dn.mac.policy }}
{{- if eq $dn.mac.policy "Prefix" }}{{ $_ := set $mac "prefix" $dn.mac.prefix }}{{ end }}
{{- $_ := set $spec "mac" $mac }}
{{- $grants := $dn.grants }}
{{- if not $grants }}
{{- $served := uniq (concat .Values.cni.nodeConfig.namespaces .Values.networkAttachmentDefinition.namespaces) }}
{{- if $served }}{{ $grants = list (dict "namespaces" $served "ranges" $dn.subnets) }}{{ end }}
{{- end }}
{{- with $grants }}{{ $_ := set $spec "grants" . }}{{ end }}
{{- toJson $spec }}
{{- end }}

{{- /*
kube-fstack.dataNetworkPlan is the network in the form fstack-cni reads from its node config
(internal/netplan Spec), made from kube-fstack.dataNetworkSpec as DataNetwork.Plan() makes it:
the MAC prefix only with policy Prefix, a grant's namespaceSelector as bySelector (fstack-cni
reads no labels), no nodeSelector.
*/ -}}
{{- define "kube-fstack.dataNetworkPlan" -}}
{{- $spec := include "kube-fstack.dataNetworkSpec" . | fromJson }}
{{- $plan := dict "name" .Values.dataNetwork.name "subnets" $spec.subnets }}
{{- range $k := list "gateways" "reserved" "vlans" }}
{{- if hasKey $spec $k }}{{ $_ := set $plan $k (get $spec $k) }}{{ end }}
{{- end }}
{{- if eq $spec.mac.policy "Prefix" }}{{ $_ := set $plan "macPrefix" $spec.mac.prefix }}{{ end }}
{{- $grants := list }}
{{- range $g := $spec.grants | default list }}
{{- $pg := dict "ranges" $g.ranges }}
{{- with $g.namespaces }}{{ $_ := set $pg "namespaces" . }}{{ end }}
{{- if hasKey $g "namespaceSelector" }}{{ $_ := set $pg "bySelector" true }}{{ end }}
{{- $grants = append $grants $pg }}
{{- end }}
{{- with $grants }}{{ $_ := set $plan "grants" . }}{{ end }}
{{- toJson $plan }}
{{- end }}

{{- /*
kube-fstack.dataNetworkMatchesNAD refuses a NetworkAttachmentDefinition whose IPAM section names
a subnet or gateway the data network does not have: fstack-cni would refuse every lease of it
at ADD. Nothing is derived from it: the network is dataNetwork's alone.
*/ -}}
{{- define "kube-fstack.dataNetworkMatchesNAD" -}}
{{- $nad := .Values.networkAttachmentDefinition }}
{{- $ipam := $nad.config.ipam | default dict }}
{{- if $nad.enabled }}
{{- with $ipam.subnet }}
{{- if not (has . $.Values.dataNetwork.subnets) }}
{{- fail (printf "networkAttachmentDefinition.config.ipam.subnet %s is not one of dataNetwork.subnets %v: fstack-cni would refuse every address of it at ADD (the chart derives nothing from the NetworkAttachmentDefinition); set dataNetwork.subnets (and gateways) to the network's" . $.Values.dataNetwork.subnets) }}
{{- end }}
{{- end }}
{{- with $ipam.gateway }}
{{- if not (has . $.Values.dataNetwork.gateways) }}
{{- fail (printf "networkAttachmentDefinition.config.ipam.gateway %s is not one of dataNetwork.gateways %v: set dataNetwork.gateways to the network's routers" . $.Values.dataNetwork.gateways) }}
{{- end }}
{{- end }}
{{- end }}
{{- end }}

{{- /*
kube-fstack.webhookClientCAPEM is the CA the webhook server requires its callers' certificates
from: webhook.clientCA, or else (webhook.clientCAFrom.enabled) the key of a ConfigMap the cluster
already publishes, read at install and upgrade. Empty: any caller is answered.
*/ -}}
{{- define "kube-fstack.webhookClientCAPEM" -}}
{{- $from := .Values.webhook.clientCAFrom }}
{{- if .Values.webhook.clientCA }}
{{- .Values.webhook.clientCA }}
{{- else if $from.enabled }}
{{- $cm := lookup "v1" "ConfigMap" $from.namespace $from.name }}
{{- $pem := dig "data" $from.key "" $cm }}
{{- if not (contains "-----BEGIN CERTIFICATE-----" $pem) }}
{{- fail (printf "webhook.clientCAFrom: ConfigMap %s/%s has no PEM certificate under %q (or the chart cannot read the cluster: helm template and a client dry run cannot; use --dry-run=server). Name the ConfigMap and key that hold the CA your API server's webhook client certificate is signed by, or give the CA itself with --set-file webhook.clientCA=ca.crt" $from.namespace $from.name $from.key) }}
{{- end }}
{{- $pem }}
{{- end }}
{{- end }}
