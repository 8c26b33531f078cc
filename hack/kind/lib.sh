# Shared by hack/kind/*.sh (sourced, not run): the multi-node kind cluster's names, addresses and
# helpers (docs/developer/multinode.md). It sources hack/cluster/lib.sh for the versions, caches
# and logging the single-node cluster uses.
# shellcheck shell=bash disable=SC2034  # the variables are used by the scripts that source this
# shellcheck source=hack/cluster/lib.sh
source "$(cd "$(dirname "${BASH_SOURCE[0]}")/../cluster" && pwd)/lib.sh"

KIND_VERSION="${KIND_VERSION:-v0.33.0}"
KIND="$ROOT/bin/kind-$KIND_VERSION"
# kind's Docker provider needs --privileged, which this machine's capability set refuses
# (docs/developer/multinode.md); podman's works. A machine where Docker works may set KIND_PROVIDER=docker.
KIND_PROVIDER="${KIND_PROVIDER:-podman}"
export KIND_EXPERIMENTAL_PROVIDER="$KIND_PROVIDER"
KIND_CLUSTER="${KIND_CLUSTER:-kube-fstack-mn}"
KIND_STATE="$ROOT/.cache/kind"
KIND_MARKS="$KIND_STATE/created"
KUBECONFIG_KIND="$KIND_STATE/kubeconfig"
# podman's settings for kind's node containers: its default rlimits exceed this machine's hard
# limits, and kind's nodes find each other by name through netavark's DNS (aardvark-dns), which
# Debian's default CNI backend does not give (docs/developer/multinode.md).
CONTAINERS_DROPIN=/etc/containers/containers.conf.d/50-kube-fstack-kind.conf
# Workers: NODES counts every node, the control plane included (make run NODES=3).
NODES="${NODES:-3}"

# The data network joining the workers' br-fstack bridges, as a physical switch would: a Linux
# bridge on the host with the router's (and a client's) address, and one veth per worker whose
# node end, "uplink", is a port of that worker's br-fstack. Its own subnet, clear of the
# single-node cluster's 10.99.0.0/24.
DATA_BRIDGE=fsk-mn-data
DATA_SUBNET=10.98.0.0/24
DATA_GATEWAY=10.98.0.1
DATA_NAMESPACES="default e2e-multinode fstack-demo"
# Every worker's hugepages: OVS-DPDK's socket memory (256 MiB) and the pods' share.
HUGEPAGES_PER_WORKER=384

# kind's own Docker or podman, whichever runs the nodes.
engine() { "$KIND_PROVIDER" "$@"; }
kind_() { "$KIND" "$@"; }
kk() { kubectl --kubeconfig "$KUBECONFIG_KIND" "$@"; }
kind_nodes() { kind_ get nodes --name "$KIND_CLUSTER" 2>/dev/null | sort; }
kind_workers() { kind_nodes | grep -v -- '-control-plane$' || true; }
kind_exists() { kind_ get clusters 2>/dev/null | grep -qx "$KIND_CLUSTER"; }
node_exec() { local n="$1"; shift; engine exec "$n" "$@"; }
node_exec_in() { local n="$1"; shift; engine exec -i "$n" "$@"; }
node_pid() { engine inspect -f '{{.State.Pid}}' "$1"; }
node_addr() { engine inspect -f '{{range .NetworkSettings.Networks}}{{.IPAddress}}{{end}}' "$1"; }
kmark() { mkdir -p "$KIND_MARKS"; printf '%s\n' "${2:-}" >"$KIND_MARKS/$1"; }
kmarked() { [ -f "$KIND_MARKS/$1" ]; }

# uplink_name WORKER: the host end of the worker's uplink (15 characters at most).
uplink_name() { printf 'fskup%s' "$(printf '%s' "$1" | cksum | cut -c1-8)"; }

# kind_e2e_env: what the multi-node suite (e2e/multinode) reads to find this cluster.
kind_e2e_env() {
  export E2E_KUBECONFIG="$KUBECONFIG_KIND" E2E_KUBECTL="$K8S_BIN/kubectl" E2E_NODE_ENGINE="$KIND_PROVIDER" \
    E2E_KIND_CLUSTER="$KIND_CLUSTER" E2E_DATA_GATEWAY="$DATA_GATEWAY" E2E_DATA_BRIDGE="$DATA_BRIDGE" \
    E2E_OPERATOR_NAMESPACE="${RELEASE_NAMESPACE:-kube-fstack-system}" E2E_RELEASE="${RELEASE:-kube-fstack}" \
    E2E_KIND_UP="$ROOT/hack/kind/up.sh" E2E_CNI_ARCHIVE="$ROOT/.cache/images/cni.oci.tar" \
    E2E_DATAPLANE_IMAGE=localhost/kube-fstack/dataplane-standin:dev
}
