#!/usr/bin/env bash
# Installs (or upgrades) the chart into the running local cluster: rebuilds the images whose
# sources changed, imports them into containerd, and runs helm with hack/cluster/values.yaml
# (local images, never pulled; the dataplane stand-in). Waits until the operator serves its
# webhooks. Prints the release's status.
set -euo pipefail
HERE="$(cd "$(dirname "$0")" && pwd)"
# shellcheck source=hack/cluster/lib.sh
source "$HERE/lib.sh"

HELM="${HELM:-$ROOT/bin/helm-${HELM_VERSION:-v3.22.0}}"
RELEASE="${RELEASE:-kube-fstack}"
RELEASE_NAMESPACE="${RELEASE_NAMESPACE:-kube-fstack-system}"

[ -x "$HELM" ] || die "$HELM missing: run 'make tools' (helm is built from source at a pinned version)"
"$HERE/status.sh" >/dev/null || die "the local cluster is not up: run hack/cluster/up.sh (make cluster-up)"
"$HERE/images.sh" build
"$HERE/images.sh" import
# The API server presents its webhook client certificate (pki.sh's admission configuration):
# the operator then answers only it. One started before that configuration existed does not.
client_ca=()
if tr '\0' ' ' <"/proc/$(pid_of kube-apiserver)/cmdline" 2>/dev/null | grep -q -- --admission-control-config-file; then
  client_ca=(--set-file "webhook.clientCA=$PKI/webhook-client-ca.crt")
else
  log "WARNING: kube-apiserver runs without an admission configuration (started before up.sh set one): the webhook answers callers without a client certificate; make cluster-down cluster-up to get it"
fi
t0=$SECONDS
log "helm upgrade --install $RELEASE charts/kube-fstack -n $RELEASE_NAMESPACE"
KUBECONFIG="$KUBECONFIG_ADMIN" "$HELM" upgrade --install "$RELEASE" "$ROOT/charts/kube-fstack" \
  --namespace "$RELEASE_NAMESPACE" --create-namespace -f "$HERE/values.yaml" \
  --set "cni.nodeAgent.ovsdbSocket=$(readlink -f "$OVS_DIR")/db.sock" --set "cni.nodeAgent.period=${NODE_AGENT_PERIOD:-5s}" \
  "${client_ca[@]}" --wait --timeout 5m "$@" >/dev/null || {
    kc -n "$RELEASE_NAMESPACE" get pods -o wide >&2 || true
    kc -n "$RELEASE_NAMESPACE" describe pods >&2 || true
    kc -n "$RELEASE_NAMESPACE" logs -l "app.kubernetes.io/instance=$RELEASE" --all-containers --tail=50 >&2 || true
    die "helm install of the chart failed (see above)"
  }
restart_on_new_images "$RUN/installed-images" kc
log "chart installed in $((SECONDS - t0))s: $(kc -n "$RELEASE_NAMESPACE" get pods --no-headers | awk '{printf "%s %s %s; ", $1, $2, $3}')"
