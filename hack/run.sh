#!/usr/bin/env bash
# The main job (`make run`): a real single-node cluster on this machine with kube-fstack installed
# from this tree, running the sample stack and an injected Nginx. Idempotent: run it again and
# only what is missing or changed is redone. Tear down with `make cluster-down`.
#   1. packages (hack/install-deps.sh --cluster: waits for another apt), the one pinned tool it
#      uses (helm, from source; not the linters and release tools) and bin/kubectl-fstack, which
#      the printed commands use
#   2. the cluster (hack/cluster/up.sh): cold, Kubernetes built from source (11 min on 2 CPUs) and
#      the images, with a progress line every 30 s; warm, seconds
#   3. the chart (hack/cluster/install.sh): operator, webhooks, CNI installer
#   4. config/samples/local-cluster: a StackInstance and an Nginx Deployment bound to it
#   5. the data path, shown from the node (its address on br-fstack, hack/cluster/up.sh)
# DATAPLANE=standin (default): the stand-in image, DPDK testpmd in F-Stack's place (answers ping).
# DATAPLANE=real: the image dataplane-image/Dockerfile builds (hack/image-dataplane.sh: F-Stack's
# source must be reachable, about 30 min the first time, cached), ending with Nginx's page fetched
# through F-Stack from the node.
set -euo pipefail
HERE="$(cd "$(dirname "$0")" && pwd)"
cd "$HERE/.."
[ "$(id -u)" = 0 ] || { echo "run as root: the cluster mounts, creates cgroups and iptables rules" >&2; exit 1; }
export PATH="/usr/local/go/bin:$PATH"
DATAPLANE="${DATAPLANE:-standin}"
case "$DATAPLANE" in
  standin|real) ;;
  *) echo "DATAPLANE=$DATAPLANE: want standin (DPDK testpmd in F-Stack's place, the default) or real (built from dataplane-image/Dockerfile)" >&2; exit 2 ;;
esac
# NODES=3 (make run NODES=3): the same job on the multi-node kind cluster.
if [ "${NODES:-1}" -gt 1 ]; then exec "$HERE/kind/run.sh"; fi
T0=$SECONDS
# shellcheck source=hack/cluster/lib.sh
source "$HERE/cluster/lib.sh"
# A failure names the step it ended, whose output is above it (no step hides its output): a bare
# apt or go error at the end of a long run does not tell a newcomer what was being done.
STEP=""
step() { STEP="$*"; log "make run: $STEP"; }
on_exit() {
  local rc=$?
  if [ "$rc" -ne 0 ] && [ -n "$STEP" ]; then
    printf '\nmake run: FAILED (exit %d) at step: %s\nIts output is above; component logs: %s\n' "$rc" "$STEP" "$LOGS" >&2
  fi
}
trap on_exit EXIT
step "1/6 packages and helm (TOOLS=tools-run hack/install-deps.sh --cluster)"
TOOLS=tools-run hack/install-deps.sh --cluster
step "1/6 the kubectl plugin (bin/kubectl-fstack)"
go build -o bin/ ./kubectl-fstack/cmd/kubectl-fstack
REAL_IMAGE=localhost/kube-fstack/dataplane:dev
install_args=()
if [ "$DATAPLANE" = real ]; then
  # Before the cluster: it fails at once when F-Stack's source cannot be fetched.
  step "1/6 the real dataplane image (hack/image-dataplane.sh)"
  hack/image-dataplane.sh
  install_args=(--set "dataplane.image.repository=${REAL_IMAGE%:*}" --set "dataplane.image.tag=${REAL_IMAGE##*:}")
fi
step "2/6 the cluster (hack/cluster/up.sh: Kubernetes built from source and images, cached)"
hack/cluster/up.sh
if [ "$DATAPLANE" = real ]; then
  ctr -a "$CONTAINERD_SOCK" -n k8s.io images import --base-name "${REAL_IMAGE%:*}" .cache/images/dataplane.oci.tar >/dev/null \
    || die "ctr import of .cache/images/dataplane.oci.tar failed"
fi
step "3/6 the chart (hack/cluster/install.sh)"
hack/cluster/install.sh "${install_args[@]}"

step "4/6 the samples (config/samples/local-cluster: StackInstance local-vhost, Deployment nginx-fstack)"
SAMPLES=config/samples/local-cluster
# helm's --wait returns once the operator is Ready, but kube-proxy may route its webhook Service a
# moment later (the apply is refused with "connection refused"): apply until the webhook takes it
# (applying again changes nothing), then once more in the open, so a real refusal is shown.
for _ in $(seq 60); do
  kc apply -f "$SAMPLES/stack.yaml" >/dev/null 2>&1 && break
  sleep 1
done
kc apply -f "$SAMPLES/stack.yaml"
kc -n fstack-demo wait --for=condition=Valid stackinstance/local-vhost --timeout=60s
kc apply -f "$SAMPLES/nginx.yaml"
want_image="$(kc -n kube-fstack-system get deploy kube-fstack-operator -o 'jsonpath={.spec.template.spec.containers[0].args}' \
  | grep -o -- '--dataplane-image=[^",]*' | cut -d= -f2 || true)"
dataplane_image() {
  kc -n fstack-demo get pods -l app=nginx-fstack -o 'jsonpath={.items[0].spec.initContainers[?(@.name=="fstack-dataplane")].image}'
}
# A pod injected under the other DATAPLANE keeps its image: replace it.
if [ -n "$want_image" ] && [ -n "$(dataplane_image 2>/dev/null)" ] && [ "$(dataplane_image)" != "$want_image" ]; then
  log "the demo pod runs $(dataplane_image), this run wants $want_image: restarting it"
  kc -n fstack-demo rollout restart deployment/nginx-fstack >/dev/null
fi
kc -n fstack-demo rollout status deployment/nginx-fstack --timeout=240s
kc -n fstack-demo wait --for=condition=Ready stackinstance/local-vhost --timeout=60s >/dev/null
# A rollout is done once the old pods terminate, not once they are gone: what follows reads
# the replicas that stay, so wait for the others to go.
replicas="$(kc -n fstack-demo get deploy nginx-fstack -o 'jsonpath={.spec.replicas}')"
pods_left() { [ "$(kc -n fstack-demo get pods -l app=nginx-fstack -o name | wc -l)" -eq "$replicas" ]; }
wait_for "the replaced pods to go" 120 pods_left

pod="$(kc -n fstack-demo get pods -l app=nginx-fstack --field-selector=status.phase=Running -o 'jsonpath={.items[0].metadata.name}')"
ip="$(kc -n fstack-demo get pod "$pod" -o 'jsonpath={.status.podIP}')"
image="$(kc -n fstack-demo get pod "$pod" -o 'jsonpath={.spec.initContainers[?(@.name=="fstack-dataplane")].image}')"
# Each replica serves its own address of the stack's pool, in its kubefstack.io/addresses
# annotation ("0:data=10.99.0.10": port 0's, named data).
stack_ips="$(kc -n fstack-demo get pods -l app=nginx-fstack -o 'jsonpath={range .items[*]}{.metadata.annotations.kubefstack\.io/addresses}{"\n"}{end}' \
  | sed -n 's/^0\(:[a-z0-9-]*\)\{0,1\}=\([0-9.]*\).*/\2/p')"
[ -n "$stack_ips" ] || die "the demo pods carry no kubefstack.io/addresses annotation"
stack_ip="${stack_ips%%$'\n'*}"
# Like F-Stack, the stand-in leaves Nginx no listener on the pod IP (only inside the pod, on
# loopback): the rollout above was Ready through the probes the dataplane performs for it.
step "5/6 the data path from the node"
probe="http://$ip:9180/app-probe/nginx/readiness"
wait_for "nginx's readiness probe through the dataplane" 30 curl -fsS --max-time 2 "$probe"
# The node reaches the stack through its own address on br-fstack (fsk-node, up.sh); the first
# reply may wait for OVS to learn the port.
for a in $stack_ips; do
  wait_for "a ping reply from $a through br-fstack" 30 ping -c 1 -W 1 "$a"
done

case "$image" in
  "$REAL_IMAGE") kind="the real F-Stack image ($image, built from dataplane-image/Dockerfile)" ;;
  *standin*) kind="the stand-in ($image: DPDK testpmd in F-Stack's place, answering ping only; make run DATAPLANE=real for F-Stack)" ;;
  *) kind="$image" ;;
esac
step "6/6 what runs"
# Every command printed below runs as printed once these two are exported: kubectl is the one
# built from source beside the cluster, and finds the plugin in bin/.
export KUBECONFIG="$KUBECONFIG_ADMIN" PATH="$ROOT/bin:$K8S_BIN:$PATH"
cat <<MSG

kube-fstack is running on a local cluster ($((SECONDS - T0))s). Dataplane: $kind.
In your shell (kubectl and the kubectl-fstack plugin this run built):
  export KUBECONFIG=$KUBECONFIG_ADMIN PATH=$ROOT/bin:$K8S_BIN:\$PATH
MSG
show "kubectl fstack status -A"
cat <<MSG

From this node, through its address ${NODE_SENDER_ADDR%/*} on br-fstack ($NODE_SENDER, tx checksum offload off, so TCP reaches F-Stack):
MSG
show "ethtool -k $NODE_SENDER | grep '^tx-checksumming'"
for a in $stack_ips; do
  show "ping -c 3 -i 0.2 $a"
done
cat <<MSG

The Service nginx-fstack has no selector: the operator publishes its EndpointSlice with each Ready
replica's served address, so kube-proxy leads its ClusterIP to F-Stack:
MSG
show "kubectl -n fstack-demo get endpointslices -l kubernetes.io/service-name=nginx-fstack"
if [ "$image" = "$REAL_IMAGE" ]; then
  show "curl -sS --max-time 10 http://$stack_ip/ | grep -i '<title>'"
  svc_ip="$(kubectl -n fstack-demo get service nginx-fstack -o jsonpath='{.spec.clusterIP}')"
  show "curl -sS --max-time 10 http://$svc_ip/ | grep -i '<title>'"
else
  show "curl -s http://$ip:9180/metrics | grep -E '^fstack_nic_(rx|tx)_packets_total'"
fi
cat <<MSG

More (after the export above):
  kubectl get stackinstances -A                       # local-vhost: Valid, Ready 2/2 (two replicas)
  kubectl get addressclaims -n kube-fstack-system     # the address each replica serves, its network and pod
  kubectl -n fstack-demo describe stackinstance local-vhost
  kubectl -n fstack-demo get pod $pod -o yaml        # the injected dataplane, volumes, env
  kubectl -n fstack-demo logs $pod -c fstack-dataplane   # the supervisor and DPDK
  kubectl -n fstack-demo exec $pod -c fstack-dataplane -- cat /etc/f-stack/config.ini
  curl $probe   # nginx's readiness probe, performed in the pod
  kubectl -n fstack-demo get pod $pod -o jsonpath='{.metadata.annotations.kubefstack\.io/app-probes}'
  kubectl -n kube-fstack-system logs deploy/kube-fstack-operator
  kubectl fstack doctor                               # the node agent's checks (kernel-tcp-checksum among them)
  hack/cluster/status.sh; make cluster-down           # state; tear everything down
MSG
if [ "$image" != "$REAL_IMAGE" ]; then
  cat <<MSG
The stand-in answers ping (ICMP echo) at $stack_ip and counts packets; it speaks no TCP, so Nginx's
page through F-Stack, directly or through the Service, needs the real image. Nginx runs under the
stand-in shim, which, as F-Stack, gives it no listener on the pod IP.
MSG
fi
