#!/usr/bin/env bash
# The main job (`make run`): a real single-node cluster on this machine with kube-fstack installed
# from this tree, running the sample stack and an injected Nginx. Idempotent: run it again and
# only what is missing or changed is redone. Tear down with `make cluster-down`.
#   1. packages (hack/install-deps.sh --cluster) and the pinned tools (helm, from source)
#   2. the cluster (hack/cluster/up.sh): cold ~10-15 min of builds, warm ~20 s
#   3. the chart (hack/cluster/install.sh): operator, webhooks, CNI installer
#   4. config/samples/local-cluster: a StackInstance and an Nginx Deployment bound to it
set -euo pipefail
HERE="$(cd "$(dirname "$0")" && pwd)"
cd "$HERE/.."
[ "$(id -u)" = 0 ] || { echo "run as root: the cluster mounts, creates cgroups and iptables rules" >&2; exit 1; }
export PATH="/usr/local/go/bin:$PATH"
T0=$SECONDS
hack/install-deps.sh --cluster >/dev/null
make -s tools >/dev/null
# shellcheck source=hack/cluster/lib.sh
source "$HERE/cluster/lib.sh"
hack/cluster/up.sh
hack/cluster/install.sh

SAMPLES=config/samples/local-cluster
kc apply -f "$SAMPLES/stack.yaml"
kc -n fstack-demo wait --for=condition=Valid stackinstance/local-vhost --timeout=60s
kc apply -f "$SAMPLES/nginx.yaml"
kc -n fstack-demo rollout status deployment/nginx-fstack --timeout=240s
kc -n fstack-demo wait --for=condition=Ready stackinstance/local-vhost --timeout=60s >/dev/null

pod="$(kc -n fstack-demo get pods -l app=nginx-fstack -o 'jsonpath={.items[0].metadata.name}')"
ip="$(kc -n fstack-demo get pod "$pod" -o 'jsonpath={.status.podIP}')"
# Like F-Stack, the stand-in leaves Nginx no listener on the pod IP (only inside the pod, on
# loopback): the rollout above was Ready through the probes the dataplane performs for it.
probe="http://$ip:9180/app-probe/nginx/readiness"
wait_for "nginx's readiness probe through the dataplane" 30 curl -fsS --max-time 2 "$probe"
cat <<MSG

kube-fstack is running on a local cluster ($((SECONDS - T0))s).
  export KUBECONFIG=$KUBECONFIG_ADMIN
  kubectl get stackinstances -A                       # local-vhost: Valid, Ready, 1 bound pod
  kubectl -n fstack-demo describe stackinstance local-vhost
  kubectl -n fstack-demo get pod $pod -o yaml        # the injected dataplane, volumes, env
  kubectl -n fstack-demo logs $pod -c fstack-dataplane   # the supervisor and DPDK
  kubectl -n fstack-demo exec $pod -c fstack-dataplane -- cat /etc/f-stack/config.ini
  curl $probe   # nginx's readiness probe, performed in the pod
  kubectl -n fstack-demo get pod $pod -o jsonpath='{.metadata.annotations.kubefstack\.io/app-probes}'
  kubectl -n kube-fstack-system logs deploy/kube-fstack-operator
  hack/cluster/status.sh; make cluster-down           # state; tear everything down
The dataplane image here is the stand-in (DPDK testpmd in F-Stack's place): $SAMPLES/stack.yaml's
address 10.99.0.10 answers ping from the OVS bridge br-fstack; Nginx runs under the stand-in shim,
which, as F-Stack, gives it no listener on the pod IP (its Service cannot reach it here).
MSG
