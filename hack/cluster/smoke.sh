#!/usr/bin/env bash
# Proves the local cluster end to end, and that down.sh leaves nothing: brings the cluster up
# (timed), runs a Guaranteed pod with an exclusive CPU and a HugePages emptyDir on the default
# network with fstack-cni chained, checks its cpuset, hugetlb limit, HTTP, a Service ClusterIP
# from the host network (where the API server calls webhooks from) and from the pod, the OVS
# vhost-user port and pod directory made by fstack-cni, deletes the pod and checks the port is
# gone; then, with a Deployment left running, down.sh, checks nothing is left (iptables chains and
# CNI results included), and a second, warm up.sh (timed) and down.sh.
# Exits non-zero on the first failed check. KEEP=1 leaves the cluster up at the end.
set -euo pipefail
HERE="$(cd "$(dirname "$0")" && pwd)"
# shellcheck source=hack/cluster/lib.sh
source "$HERE/lib.sh"

POD=smoke-guaranteed
# up.sh and down.sh narrate on stderr; kept here so a failure can be read after the fact.
SMOKE_LOG="$CLUSTER/smoke.log"
pass() { printf 'smoke: PASS %s\n' "$*"; }
fail() { printf 'smoke: FAIL %s (script output: %s, component logs: %s)\n' "$*" "$SMOKE_LOG" "$LOGS" >&2; exit 1; }
check() {
  local what="$1"; shift
  if "$@" >/dev/null 2>&1; then pass "$what"; else fail "$what"; fi
}

up_timed() {
  local t0=$SECONDS
  "$HERE/up.sh" >>"$SMOKE_LOG" 2>&1 || fail "$1 up.sh (logs under $LOGS)"
  pass "$1 up.sh: node Ready, $((SECONDS - t0))s"
}

pod_manifest() {
  cat <<YAML
apiVersion: v1
kind: Pod
metadata: {name: $POD, namespace: default, labels: {app: $POD}}
spec:
  terminationGracePeriodSeconds: 2
  containers:
  - name: nginx
    image: localhost/nginx:1.22
    imagePullPolicy: Never
    resources:
      requests: {cpu: "1", memory: 64Mi, hugepages-2Mi: 64Mi}
      limits: {cpu: "1", memory: 64Mi, hugepages-2Mi: 64Mi}
    volumeMounts: [{name: huge, mountPath: /hugepages}, {name: fstack-vhost, mountPath: /var/run/kube-fstack/vhost}]
  volumes:
  - name: huge
    emptyDir: {medium: HugePages-2Mi}
  # What the injector gives an F-Stack pod: fstack-cni serves only pods that have it.
  - name: fstack-vhost
    emptyDir: {}
---
apiVersion: v1
kind: Service
metadata: {name: $POD, namespace: default}
spec:
  selector: {app: $POD}
  ports: [{port: 8080, targetPort: 80}]
YAML
}

pod_checks() {
  local uid cid cpus shared port ip svc vol
  wait_for "ServiceAccount default" 60 kc get serviceaccount default
  pod_manifest | kc apply -f - >/dev/null
  kc wait --for=condition=Ready "pod/$POD" --timeout=90s >/dev/null \
    || { kc describe pod "$POD" >&2; fail "pod $POD Running and Ready"; }
  pass "Guaranteed pod Running (cpu 1, memory 64Mi, hugepages-2Mi 64Mi, HugePages emptyDir)"
  [ "$(kc get pod "$POD" -o 'jsonpath={.status.qosClass}')" = Guaranteed ] || fail "pod QoS is Guaranteed"
  uid="$(kc get pod "$POD" -o 'jsonpath={.metadata.uid}')"
  cid="$(kc get pod "$POD" -o 'jsonpath={.status.containerStatuses[0].containerID}')"; cid="${cid#containerd://}"
  cpus="$(cat "/sys/fs/cgroup/cpuset/kubepods/pod$uid/$cid/cpuset.cpus")"
  shared="$(sed -n 's/.*"defaultCpuSet":"\([^"]*\)".*/\1/p' /var/lib/kubelet/cpu_manager_state)"
  { [ "$cpus" = 1 ] && [ "$shared" = 0 ]; } || fail "exclusive cpuset: container has '$cpus', shared pool '$shared' (want 1 and 0)"
  pass "cpuset exclusive: container cpuset.cpus=$cpus, shared pool=$shared"
  [ "$(cat "$HUGETLB_CGROUP/kubepods/pod$uid/hugetlb.2MB.limit_in_bytes")" = 67108864 ] \
    || fail "hugetlb cgroup limit of the pod is 64 MiB"
  pass "hugetlb.2MB.limit_in_bytes of the pod = 64 MiB"
  ip="$(kc get pod "$POD" -o 'jsonpath={.status.podIP}')"
  pass "pod IPs $(kc get pod "$POD" -o 'jsonpath={.status.podIPs[*].ip}') (the kubelet keeps one per family: the bridge's)"
  check "nginx answers on pod IP $ip (default network, cni0)" curl -fsS --max-time 5 "http://$ip/"
  port="$(vsctl --timeout=5 --columns=name --bare find Interface "external_ids:kube-fstack.io/pod-uid=$uid")"
  [ -n "$port" ] || fail "fstack-cni made an OVS port for pod uid $uid (ports: $(vsctl list-ports "$OVS_BRIDGE" | xargs))"
  [ "$(vsctl get Interface "$port" type)" = dpdkvhostuserclient ] || fail "port $port is dpdkvhostuserclient"
  vsctl list-ports "$OVS_BRIDGE" | grep -qx "$port" || fail "port $port is on $OVS_BRIDGE"
  pass "fstack-cni chained: port $port (dpdkvhostuserclient) on $OVS_BRIDGE, socket $(vsctl get Interface "$port" options:vhost-server-path)"
  vol="/var/lib/kubelet/pods/$uid/volumes/kubernetes.io~empty-dir/fstack-vhost"
  { [ "$(readlink "$SOCKET_ROOT/$uid")" = "$vol" ] && [ -f "$vol/eth0.json" ]; } \
    || fail "link $SOCKET_ROOT/$uid -> $vol (the pod's emptyDir, made by the kubelet before CNI ADD) with eth0.json"
  pass "link $SOCKET_ROOT/$uid -> the pod's emptyDir, which holds $(cd "$vol" && echo *)"
  check "API server Service 10.96.0.1:443 from the host network (kube-proxy)" curl -fsSk --max-time 5 https://10.96.0.1/healthz
  svc="$(kc get service "$POD" -o 'jsonpath={.spec.clusterIP}')"
  wait_for "Service $svc:8080 from the host network" 30 curl -fsS --max-time 2 "http://$svc:8080/"
  pass "pod-backed Service $svc:8080 answers from the host network (what the API server needs for webhooks)"
  wait_for "API server Service 10.96.0.1:443 from inside the pod" 30 \
    kubectl --kubeconfig "$KUBECONFIG_ADMIN" exec "$POD" -- bash -c 'exec 3<>/dev/tcp/10.96.0.1/443'
  pass "API server Service 10.96.0.1:443 from inside the pod (an in-cluster operator can reach it)"
  kc delete service "$POD" >/dev/null
  kc delete pod "$POD" --wait=true --timeout=60s >/dev/null || fail "pod $POD deleted within 60s"
  [ -z "$(vsctl --timeout=5 --columns=name --bare find Interface "external_ids:kube-fstack.io/pod-uid=$uid")" ] \
    || fail "OVS port of the deleted pod is gone"
  { [ ! -L "$SOCKET_ROOT/$uid" ] && [ ! -e "$SOCKET_ROOT/$uid" ]; } || fail "link $SOCKET_ROOT/$uid is gone"
  pass "pod deleted: its OVS port and link are gone (fstack-cni DEL ran)"
}

# iptables_chains: "<family> <table> <chain>" for every chain, empty ones included (a saved rule
# set shows an empty chain only in its header, which the rule checks below do not look at).
iptables_chains() {
  local ipt t
  for ipt in iptables ip6tables; do
    command -v "$ipt" >/dev/null || continue
    for t in filter nat mangle raw; do
      "$ipt" -t "$t" -S 2>/dev/null | awk -v p="$ipt $t" '$1 == "-N" {print p, $2}'
    done
  done | LC_ALL=C sort
}

cni_results() { find /var/lib/cni/results -mindepth 1 -maxdepth 1 -printf '%f\n' 2>/dev/null | LC_ALL=C sort || true; }

# A Deployment left running for down.sh, as `make run` leaves its demo: deleting its pod alone
# makes the ReplicaSet recreate it, and a pod the kubelet never deletes gets no CNI DEL.
leave_a_deployment() {
  kc create deployment smoke-left --image=localhost/nginx:1.22 >/dev/null
  kc rollout status deployment/smoke-left --timeout=90s >/dev/null || fail "Deployment smoke-left Ready"
  pass "Deployment smoke-left running, left for down.sh"
}

nothing_left() {
  local p new leftovers=()
  # Every daemon of the cluster has a path under $RUN on its command line.
  pgrep -f "$RUN" >/dev/null && leftovers+=("processes: $(pgrep -af "$RUN" | cut -c1-80 | xargs)")
  pgrep -f "containerd-shim-runc-v2 -namespace k8s.io .*-address $CONTAINERD_SOCK" >/dev/null && leftovers+=(containerd-shims)
  grep -qE " ($RUN|/var/lib/kubelet|/run/containerd|/var/lib/containerd)[/ ]" /proc/self/mountinfo && leftovers+=(mounts)
  ls /run/netns/cni-* >/dev/null 2>&1 && leftovers+=("/run/netns/cni-*")
  iptables-save 2>/dev/null | grep -qE -- "(KUBE-|$NET_NAME)" && leftovers+=("iptables KUBE-*/CNI rules")
  ip6tables-save 2>/dev/null | grep -qE -- "(KUBE-|$NET_NAME)" && leftovers+=("ip6tables KUBE-* rules")
  ip link show cni0 >/dev/null 2>&1 && leftovers+=(cni0)
  ip -o link | grep -q 'master cni0' && leftovers+=(veths)
  ip netns list 2>/dev/null | grep -qw "$OVS_NETNS" && leftovers+=("netns $OVS_NETNS")
  ip link show "$NODE_SENDER" >/dev/null 2>&1 && leftovers+=("$NODE_SENDER")
  compgen -G "/sys/fs/cgroup/*/kubepods" >/dev/null && leftovers+=(kubepods-cgroups)
  [ -e "$CNI_CONFLIST" ] && leftovers+=("$CNI_CONFLIST")
  [ -e /var/lib/kubelet ] && leftovers+=(/var/lib/kubelet)
  [ -e "$RUN" ] && leftovers+=("$RUN")
  for p in /etc/cni /etc/kube-fstack /opt/cni /var/lib/cni /var/run/kube-fstack /run/containerd /var/lib/containerd; do
    case " $PATHS_BEFORE " in *" $p "*) ;; *) [ -e "$p" ] && leftovers+=("$p") ;; esac
  done
  [ "$HUGETLB_WAS_MOUNTED" = no ] && mountpoint -q "$HUGETLB_CGROUP" && leftovers+=("hugetlb cgroup mount")
  [ "$(cat "$NR_HUGEPAGES")" = "$HUGEPAGES_BEFORE" ] || leftovers+=("nr_hugepages $(cat "$NR_HUGEPAGES") != $HUGEPAGES_BEFORE")
  new="$(LC_ALL=C comm -13 <(printf '%s\n' "$CHAINS_BEFORE") <(iptables_chains) | sed '/^$/d' | xargs)"
  [ -z "$new" ] || leftovers+=("iptables chains: $new")
  new="$(LC_ALL=C comm -13 <(printf '%s\n' "$RESULTS_BEFORE") <(cni_results) | sed '/^$/d' | xargs)"
  [ -z "$new" ] || leftovers+=("/var/lib/cni/results: $new")
  [ ${#leftovers[@]} -eq 0 ] || fail "down.sh left: ${leftovers[*]}"
  pass "down.sh left nothing (processes, mounts, netns, iptables rules and chains, cni0/veths, OVS, cgroups, files and CNI results, hugepages)"
}

[ "$(id -u)" = 0 ] || die "run as root"
mkdir -p "$CLUSTER" && : >"$SMOKE_LOG"
# What the machine had before this cluster: down.sh must return to it.
if [ -d "$RUN" ]; then "$HERE/down.sh" >>"$SMOKE_LOG" 2>&1; fi
HUGETLB_WAS_MOUNTED=no; mountpoint -q "$HUGETLB_CGROUP" && HUGETLB_WAS_MOUNTED=yes
HUGEPAGES_BEFORE="$(cat "$NR_HUGEPAGES")"
CHAINS_BEFORE="$(iptables_chains)"
RESULTS_BEFORE="$(cni_results)"
PATHS_BEFORE="$(for p in /etc/cni /etc/kube-fstack /opt/cni /var/lib/cni /var/run/kube-fstack /run/containerd /var/lib/containerd; do
  [ -e "$p" ] && printf '%s ' "$p"; done || true)"

up_timed "first"
pids_before="$(cat "$PIDS"/*.pid | xargs)"
t0=$SECONDS; "$HERE/up.sh" >>"$SMOKE_LOG" 2>&1 || fail "second up.sh in a row"
[ "$(cat "$PIDS"/*.pid | xargs)" = "$pids_before" ] || fail "second up.sh restarted a component"
pass "up.sh again while up: $((SECONDS - t0))s, every component kept its PID"
"$HERE/status.sh" >/dev/null || fail "status.sh reports every component running and the node Ready"
pass "status.sh: $(kc get node "$NODE_NAME" -o 'jsonpath=cpu={.status.allocatable.cpu} hugepages-2Mi={.status.allocatable.hugepages-2Mi}')"
# The kubelet's own view of its eviction thresholds: absolute, so a large disk with GiBs free is
# never under pressure because a percentage of it is used.
evict="$(kc get --raw "/api/v1/nodes/$NODE_NAME/proxy/configz" | grep -o '"evictionHard":{[^}]*}')" \
  || fail "the kubelet's configz has evictionHard"
case "$evict" in *'"imagefs.available":"2Gi"'*'"nodefs.available":"2Gi"'*) ;; *) fail "kubelet evictionHard is absolute (2Gi), got $evict" ;; esac
pass "kubelet eviction thresholds absolute: $evict"
pod_checks
leave_a_deployment
t0=$SECONDS; "$HERE/down.sh" >>"$SMOKE_LOG" 2>&1 || fail "down.sh"
pass "down.sh with a Deployment running: $((SECONDS - t0))s"
"$HERE/down.sh" >>"$SMOKE_LOG" 2>&1 || fail "down.sh a second time"
pass "down.sh twice"
nothing_left
up_timed "warm (binaries and images cached)"
kc get node "$NODE_NAME" >/dev/null || fail "node after warm up"
if [ "${KEEP:-0}" != 1 ]; then
  "$HERE/down.sh" >>"$SMOKE_LOG" 2>&1 || fail "final down.sh"
  nothing_left
fi
pass "all checks"
