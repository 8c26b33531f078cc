#!/usr/bin/env bash
# `make run NODES=3`: the main job on the multi-node kind cluster (hack/kind/up.sh,
# docs/developer/multinode.md) instead of the one-node cluster: the chart, the sample stack of
# config/samples/multinode with one Nginx replica per worker, and its addresses reached from the
# data network that joins the workers. DATAPLANE=real runs F-Stack from dataplane-image/Dockerfile
# (hack/image-dataplane.sh) and fetches Nginx's page through it. Tear down with make multinode-down.
set -euo pipefail
HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
# shellcheck source=hack/kind/lib.sh
source "$HERE/lib.sh"
cd "$ROOT"
DATAPLANE="${DATAPLANE:-standin}"
T0=$SECONDS
REAL_IMAGE=localhost/kube-fstack/dataplane:dev
install_args=()
log "make run NODES=$NODES: packages, helm and the kubectl plugin"
TOOLS=tools-run hack/install-deps.sh --cluster
go build -o bin/ ./kubectl-fstack/cmd/kubectl-fstack
if [ "$DATAPLANE" = real ]; then
  hack/image-dataplane.sh
  export EXTRA_IMAGES="$ROOT/.cache/images/dataplane.oci.tar:${REAL_IMAGE%:*}"
  install_args=(--set "dataplane.image.repository=${REAL_IMAGE%:*}" --set "dataplane.image.tag=${REAL_IMAGE##*:}")
fi
log "make run NODES=$NODES: the kind cluster and the chart (hack/kind/up.sh --install)"
"$HERE/up.sh" --install "${install_args[@]}"

SAMPLES=config/samples/multinode
# The webhook may refuse for a moment after helm returns (kube-proxy routing its Service).
for _ in $(seq 60); do kk apply -f "$SAMPLES/stack.yaml" >/dev/null 2>&1 && break; sleep 1; done
kk apply -f "$SAMPLES/stack.yaml" >/dev/null
kk -n fstack-demo wait --for=condition=Valid stackinstance/multinode --timeout=60s >/dev/null
kk apply -f "$SAMPLES/nginx.yaml" >/dev/null
kk -n fstack-demo rollout status deployment/nginx-fstack --timeout=300s
kk -n fstack-demo wait --for=condition=Ready stackinstance/multinode --timeout=120s >/dev/null
addrs="$(kk -n fstack-demo get pods -l app=nginx-fstack -o 'jsonpath={range .items[*]}{.metadata.annotations.kubefstack\.io/addresses}{"\n"}{end}' \
  | sed -n 's/^0\(:[a-z0-9-]*\)\{0,1\}=\([0-9.]*\).*/\2/p')"
[ -n "$addrs" ] || die "the demo pods carry no kubefstack.io/addresses annotation"
for a in $addrs; do wait_for "a ping reply from $a across the data network" 30 ping -c 1 -W 1 "$a"; done

export KUBECONFIG="$KUBECONFIG_KIND" PATH="$ROOT/bin:$K8S_BIN:$PATH"
cat <<MSG

kube-fstack is running on a kind cluster of $NODES nodes ($((SECONDS - T0))s), one Nginx replica per worker.
In your shell:
  export KUBECONFIG=$KUBECONFIG_KIND PATH=$ROOT/bin:$K8S_BIN:\$PATH
MSG
show "kubectl get nodes"
show "kubectl -n fstack-demo get pods -o wide"
show "kubectl fstack status -A"
show "kubectl -n fstack-demo get endpointslices -l kubernetes.io/service-name=nginx-fstack -o jsonpath='{range .items[*].endpoints[*]}{.addresses[0]} on {.nodeName}{\"\\n\"}{end}'"
printf '\nFrom the data network (the host bridge %s, %s):\n' "$DATA_BRIDGE" "$DATA_GATEWAY"
for a in $addrs; do show "ping -c 2 -i 0.2 $a"; done
if [ "$DATAPLANE" = real ]; then
  svc_ip="$(kubectl -n fstack-demo get service nginx-fstack -o jsonpath='{.spec.clusterIP}')"
  for a in $addrs; do show "curl -sS --max-time 10 http://$a/ | grep -i '<title>'"; done
  for n in $(kind_nodes); do show "$KIND_PROVIDER exec $n curl -sS --max-time 10 http://$svc_ip/ | grep -i '<title>'"; done
fi
cat <<MSG

More: kubectl fstack doctor; hack/kind/up.sh (again after a node restarts); make multinode-down.
MSG
