#!/usr/bin/env bash
# The e2e suite on a kind cluster with Multus, for machines with internet and Docker. It cannot
# run on the project's CI machines (no Docker engine, no internet there); hack/e2e.sh is the tier
# that runs in CI. What the host needs first (docs/developer/README.md, "kind"):
#   - Docker, and 2 MiB hugepages mounted at /dev/hugepages (at least 600 free);
#   - OVS-DPDK on the host with its database socket at /var/run/openvswitch/db.sock and a netdev
#     bridge br-fstack (ovs-vsctl add-br br-fstack -- set bridge br-fstack datapath_type=netdev);
#   - /var/run/kube-fstack existing (the vhost-user socket root, shared with the kind node).
# Multus comes from its release manifests (MULTUS_MANIFEST); kind is built at a pinned version.
set -euo pipefail
ROOT="$(cd "$(dirname "$0")/.." && pwd)"
cd "$ROOT"
export PATH="/usr/local/go/bin:$PATH"
KIND_VERSION="${KIND_VERSION:-v0.33.0}"
KIND="$ROOT/bin/kind-$KIND_VERSION"
HELM="$ROOT/bin/helm-${HELM_VERSION:-v3.22.0}"
CLUSTER_NAME="${CLUSTER_NAME:-kube-fstack-e2e}"
NODE="$CLUSTER_NAME-control-plane"
MULTUS_MANIFEST="${MULTUS_MANIFEST:-https://raw.githubusercontent.com/k8snetworkplumbingwg/multus-cni/v4.2.2/deployments/multus-daemonset-thick.yml}"
OVS_DB_SOCK=/var/run/openvswitch/db.sock
die() { echo "e2e-kind: $*" >&2; exit 1; }

command -v docker >/dev/null || die "Docker is required (kind runs the node as a container)"
KUBECTL="$(command -v kubectl)" || die "kubectl is required on PATH"
[ -S "$OVS_DB_SOCK" ] || die "no OVS database at $OVS_DB_SOCK: start OVS-DPDK on the host (see docs/developer/README.md, kind)"
[ "$(ovs-vsctl --db="unix:$OVS_DB_SOCK" get bridge br-fstack datapath_type 2>/dev/null)" = netdev ] \
  || die "the host's OVS needs a netdev bridge br-fstack"
mkdir -p /var/run/kube-fstack /var/run/kube-fstack-kind/device-plugins
[ -x "$KIND" ] || { GOBIN="$ROOT/bin" go install "sigs.k8s.io/kind@$KIND_VERSION" && mv "$ROOT/bin/kind" "$KIND"; }
make -s tools build

"$KIND" get clusters | grep -qx "$CLUSTER_NAME" || "$KIND" create cluster --name "$CLUSTER_NAME" --config hack/kind/cluster.yaml
KUBECONFIG_KIND="$ROOT/_output/kind.kubeconfig"
mkdir -p _output && "$KIND" get kubeconfig --name "$CLUSTER_NAME" >"$KUBECONFIG_KIND"
kc() { kubectl --kubeconfig "$KUBECONFIG_KIND" "$@"; }
kc apply -f "$MULTUS_MANIFEST"
kc -n kube-system rollout status daemonset/kube-multus-ds --timeout=300s

# The images are OCI tarballs built without a daemon: import them into the node's containerd.
hack/cluster/images.sh build
for pair in images/operator:localhost/kube-fstack/operator images/cni:localhost/kube-fstack/cni \
    images/dataplane-standin:localhost/kube-fstack/dataplane-standin cluster/cache/images/nginx:localhost/nginx; do
  docker exec -i "$NODE" ctr -n k8s.io images import --base-name "${pair#*:}" - <".cache/${pair%%:*}.oci.tar"
done

KUBECONFIG="$KUBECONFIG_KIND" "$HELM" upgrade --install kube-fstack charts/kube-fstack -n kube-fstack-system \
  --create-namespace -f hack/kind/values.yaml --wait --timeout 5m

export E2E_KUBECONFIG="$KUBECONFIG_KIND" E2E_KUBECTL="$KUBECTL" E2E_OVSDB_SOCK="$OVS_DB_SOCK" \
  E2E_OVS_NETNS="${E2E_OVS_NETNS:-}" E2E_OVS_BRIDGE=br-fstack E2E_SOCKET_ROOT=/var/run/kube-fstack/vhost \
  E2E_LOG_DIR=/var/log/kube-fstack E2E_OPERATOR_NAMESPACE=kube-fstack-system E2E_RELEASE=kube-fstack \
  E2E_DATAPLANE_IMAGE=localhost/kube-fstack/dataplane-standin:dev E2E_NODE="$NODE" \
  E2E_NODE_EXEC="docker exec $NODE" E2E_DEVICE_PLUGIN_DIR=/var/run/kube-fstack-kind/device-plugins E2E_ATTACHMENT=net1 E2E_NETWORKS=kube-fstack-system/fstack-net@net1 \
  E2E_OPERATOR_ARCHIVE="$ROOT/.cache/images/operator.oci.tar" E2E_CNI_ARCHIVE="$ROOT/.cache/images/cni.oci.tar"
go test ./e2e/ -count=1 -v -timeout 30m "$@"
