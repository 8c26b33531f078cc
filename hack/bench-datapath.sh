#!/usr/bin/env bash
# The data path, measured: HTTP load from one client at a stack's Nginx (through F-Stack) and at
# the same Nginx on the kernel in a plain pod, interleaved, in one run. Prints requests/s, p50 and
# p99 latency and the CPU the server pod used per arm, with medians, spreads and ratios.
#
#   make bench-datapath                          the local cluster's demo (make run DATAPLANE=real)
#   STACK_NS=web STACK_SELECTOR=app=nginx-fstack CLIENT="ssh client-host" make bench-datapath
#
# Settings (environment):
#   STACK_NS, STACK_SELECTOR  the stack's pods (default fstack-demo, app=nginx-fstack); the first
#                             Ready one is measured
#   STACK_URL                 what the client requests from the stack (default: http://<the
#                             measured pod's first served IPv4 address>/, from its
#                             kubefstack.io/addresses annotation: a pool's or a static address)
#   KERNEL_URL                what it requests from the kernel arm (default: the plain pod this
#                             script makes, at its pod IP)
#   CLIENT                    a command prefix that runs the load generator where the data network
#                             is reachable (default: this node; e.g. "ssh host" or
#                             "kubectl exec -n ns client-pod --"); it needs wrk (Debian: wrk)
#   PROGRAM_SELECTOR          pods (in STACK_NS) of a second stack that runs F-Stack's own Nginx
#                             (spec.program, e.g. app=fstack-nginx from
#                             config/samples/local-cluster/fstack-nginx.yaml): arm fstack-nginx
#   BYHAND                    shim, nginx or shim,nginx: F-Stack started by hand on this node, outside
#                             Kubernetes (hack/bench-byhand.sh; the local cluster, real image): arms
#                             byhand-shim and byhand-nginx, and the ratios stack/byhand-shim and
#                             fstack-nginx/byhand-nginx, kube-fstack's own overhead, against their goal
#   SHORT=1                   short connections: every request on a new connection (wrk with
#                             "Connection: close"), F-Stack's "Nginx Short Connection" case; the
#                             default keeps connections alive
#   RUNS (5), DURATION (10 s), CONNECTIONS (32), THREADS (1)
# The kernel arm is a copy of the stack pod's app container (a stock Nginx: a pod of F-Stack's own
# program cannot be the model, and the script says so) (image, command, its ConfigMap and
# Secret volumes) without the stack label, so nothing is injected, with the stack pod's total
# CPU limit and no exclusive CPUs; it is deleted at the end. Results are ratios of one run: on a
# shared or small machine (2 cores: client, F-Stack's busy-polling lcore, Nginx and the node
# share them) absolute numbers say little. docs/benchmarks.md says what such a run can show.
set -euo pipefail
HERE="$(cd "$(dirname "$0")" && pwd)"
ROOT="$(cd "$HERE/.." && pwd)"

STACK_NS=${STACK_NS:-fstack-demo}
STACK_SELECTOR=${STACK_SELECTOR:-app=nginx-fstack}
PROGRAM_SELECTOR=${PROGRAM_SELECTOR:-}
BYHAND=${BYHAND:-}
RUNS=${RUNS:-5}
DURATION=${DURATION:-10}
CONNECTIONS=${CONNECTIONS:-32}
THREADS=${THREADS:-1}
CLIENT=${CLIENT:-}
KERNEL_POD=fstack-bench-kernel-nginx

# The local cluster's kubeconfig and kubectl when this is the machine running it.
if [ -z "${KUBECONFIG:-}" ] && [ -f "$ROOT/hack/cluster/lib.sh" ]; then
  # shellcheck source=hack/cluster/lib.sh
  source "$ROOT/hack/cluster/lib.sh"
  if [ -f "$KUBECONFIG_ADMIN" ]; then
    export KUBECONFIG="$KUBECONFIG_ADMIN" PATH="$K8S_BIN:$PATH"
  fi
fi
log() { printf '%s bench-datapath: %s\n' "$(date +%T)" "$*" >&2; }
die() { printf 'bench-datapath: ERROR: %s\n' "$*" >&2; exit 1; }
command -v kubectl >/dev/null || die "kubectl not found on PATH"
# shellcheck disable=SC2086 # CLIENT is a command prefix, split on purpose
$CLIENT sh -c 'command -v wrk' >/dev/null 2>&1 || die "wrk not found where CLIENT runs (${CLIENT:-this node}): install it (Debian: apt-get install wrk)"

k() { kubectl -n "$STACK_NS" "$@"; }

# awk, not head: head exits after the first line, and under pipefail kubectl's SIGPIPE (141)
# failed the script whenever it wrote the names in two writes.
stack_pod=$(k get pods -l "$STACK_SELECTOR" -o 'jsonpath={range .items[?(@.status.phase=="Running")]}{.metadata.name}{"\n"}{end}' | awk 'NR == 1')
[ -n "$stack_pod" ] || die "no running pod in namespace $STACK_NS with labels $STACK_SELECTOR: start the stack first (make run DATAPLANE=real), or set STACK_NS and STACK_SELECTOR"
k wait --for=condition=Ready "pod/$stack_pod" --timeout=120s >/dev/null || die "pod $STACK_NS/$stack_pod is not Ready"
stack=$(k get pod "$stack_pod" -o 'jsonpath={.metadata.labels.kubefstack\.io/stack}')
[ -n "$stack" ] || die "pod $STACK_NS/$stack_pod has no kubefstack.io/stack label: STACK_SELECTOR must select a stack's pods"
app=$(k get pod "$stack_pod" -o 'jsonpath={.spec.containers[0].name}')
dataplane=fstack-dataplane
if [ -z "${STACK_URL:-}" ]; then
  # The address this pod serves, which admission gave it (each replica of a pool its own).
  STACK_URL=$(k get pod "$stack_pod" -o json | python3 "$HERE/lib/bench_datapath.py" served-url) || die "cannot tell which address pod $STACK_NS/$stack_pod serves"
fi

# The kernel arm: the app container as the stack pod runs it, without the stack's label.
make_kernel_pod() {
  local pod_json cpu
  pod_json=$(k get pod "$stack_pod" -o json)
  # Total CPU limit of the stack pod (dataplane + app), in millicores.
  cpu=$(printf '%s' "$pod_json" | python3 "$HERE/lib/bench_datapath.py" cpu-limit)
  printf '%s' "$pod_json" | python3 "$HERE/lib/bench_datapath.py" kernel-pod "$cpu" "$KERNEL_POD" "$app" | k apply -f - >/dev/null
  k wait --for=condition=Ready "pod/$KERNEL_POD" --timeout=120s >/dev/null || die "the kernel arm's pod $STACK_NS/$KERNEL_POD did not become Ready: kubectl -n $STACK_NS describe pod $KERNEL_POD"
  local limit="CPU limit ${cpu}m"
  [ "$cpu" -gt 0 ] || limit="no CPU limit, as the stack pod's"
  log "kernel arm: pod $KERNEL_POD (the app container of $stack_pod, $limit, not injected)"
}
byhand_modes=()
IFS=, read -ra byhand_modes <<<"$BYHAND"
cleanup() {
  k delete pod "$KERNEL_POD" --ignore-not-found --wait=false >/dev/null 2>&1 || true
  if [ ${#byhand_modes[@]} -gt 0 ]; then "$HERE/bench-byhand.sh" stop "${byhand_modes[@]}" || true; fi
}
trap cleanup EXIT
make_kernel_pod
if [ -z "${KERNEL_URL:-}" ]; then
  KERNEL_URL="http://$(k get pod "$KERNEL_POD" -o 'jsonpath={.status.podIP}')/"
fi

# The arms, run by run in this order: name, URL, where its CPU is read ("pod NAME" or "podman"),
# and the containers whose CPU time counts.
arm_names=(stack kernel) arm_urls=("$STACK_URL" "$KERNEL_URL") arm_where=("pod $stack_pod" "pod $KERNEL_POD")
arm_containers=("$app $dataplane" "$app")
if [ -n "$PROGRAM_SELECTOR" ]; then
  program_pod=$(k get pods -l "$PROGRAM_SELECTOR" -o 'jsonpath={range .items[?(@.status.phase=="Running")]}{.metadata.name}{"\n"}{end}' | awk 'NR == 1')
  [ -n "$program_pod" ] || die "no running pod in namespace $STACK_NS with labels $PROGRAM_SELECTOR (F-Stack's own Nginx): kubectl apply -f config/samples/local-cluster/fstack-nginx.yaml"
  k wait --for=condition=Ready "pod/$program_pod" --timeout=120s >/dev/null || die "pod $STACK_NS/$program_pod is not Ready"
  url=$(k get pod "$program_pod" -o json | python3 "$HERE/lib/bench_datapath.py" served-url) || die "cannot tell which address pod $STACK_NS/$program_pod serves"
  arm_names+=(fstack-nginx) arm_urls+=("$url") arm_where+=("pod $program_pod") arm_containers+=("$dataplane")
fi
for mode in "${byhand_modes[@]}"; do
  case $mode in shim | nginx) ;; *) die "BYHAND=$BYHAND: want shim, nginx or shim,nginx" ;; esac
  log "starting F-Stack by hand ($mode, hack/bench-byhand.sh)"
  url=$("$HERE/bench-byhand.sh" start "$mode") || die "F-Stack by hand ($mode) did not start"
  containers=$("$HERE/bench-byhand.sh" containers "$mode")
  arm_names+=("byhand-$mode") arm_urls+=("$url") arm_where+=(podman) arm_containers+=("$containers")
done

# cpu_ns WHERE CONTAINER...: CPU time the containers have used, in nanoseconds (cgroup v1 or v2);
# WHERE is "pod NAME" (kubectl exec) or "podman" (a by-hand arm's containers).
cpu_ns() {
  local where=$1 total=0 c v
  shift
  # shellcheck disable=SC2016 # expanded by the container's shell
  local read='if [ -r /sys/fs/cgroup/cpu.stat ]; then awk "/^usage_usec/ {print \$2 * 1000}" /sys/fs/cgroup/cpu.stat; else cat /sys/fs/cgroup/cpuacct/cpuacct.usage; fi'
  for c in "$@"; do
    if [ "$where" = podman ]; then
      v=$(podman exec "$c" sh -c "$read" 2>/dev/null) || die "cannot read the CPU usage of podman container $c"
    else
      v=$(k exec "${where#pod }" -c "$c" -- sh -c "$read" 2>/dev/null) || die "cannot read the CPU usage of ${where#pod }/$c (kubectl exec)"
    fi
    total=$((total + ${v%.*}))
  done
  echo "$total"
}

# load URL: one wrk run; prints "rps p50_ms p99_ms".
load() {
  local out
  # shellcheck disable=SC2086 # CLIENT is a command prefix, split on purpose
  local short=()
  if [ "${SHORT:-0}" = 1 ]; then short=(-H "Connection: close"); fi
  out=$($CLIENT wrk -t"$THREADS" -c"$CONNECTIONS" -d"${DURATION}s" --latency "${short[@]}" "$1" 2>&1) || die "wrk against $1 failed: $out"
  printf '%s\n' "$out" | python3 "$HERE/lib/bench_datapath.py" wrk || die "wrk against $1: cannot read its output: $out"
}

for url in "${arm_urls[@]}"; do
  # shellcheck disable=SC2086
  $CLIENT sh -c "command -v curl >/dev/null && curl -fsS -o /dev/null --max-time 5 '$url' || true"
done
# The by-hand arms are paused but while measured: their lcores poll the CPU the pods' lcores use.
for i in "${!arm_names[@]}"; do
  # shellcheck disable=SC2086 # a list of names
  if [ "${arm_where[$i]}" = podman ]; then podman pause ${arm_containers[$i]} >/dev/null; fi
done
results=$(mktemp)
log "arms: $(for i in "${!arm_names[@]}"; do printf '%s %s; ' "${arm_names[$i]}" "${arm_urls[$i]}"; done)$RUNS runs per arm of ${DURATION}s, $CONNECTIONS connections, interleaved$([ "${SHORT:-0}" = 1 ] && echo ", short connections (Connection: close)")"
for run in $(seq "$RUNS"); do
  for i in "${!arm_names[@]}"; do
    arm=${arm_names[$i]} url=${arm_urls[$i]} where=${arm_where[$i]}
    read -ra containers <<<"${arm_containers[$i]}"
    if [ "$where" = podman ]; then podman unpause "${containers[@]}" >/dev/null; fi
    c0=$(cpu_ns "$where" "${containers[@]}")
    t0=$(date +%s%N)
    res=$(load "$url")
    read -r rps p50 p99 note <<<"$res"
    t1=$(date +%s%N)
    c1=$(cpu_ns "$where" "${containers[@]}")
    if [ "$where" = podman ]; then podman pause "${containers[@]}" >/dev/null; fi
    cpus=$(python3 -c "print(round(($c1 - $c0) / ($t1 - $t0), 2))")
    log "run $run $arm: $rps req/s, p50 ${p50} ms, p99 ${p99} ms, ${cpus} CPUs${note:+ ($note)}"
    echo "$arm $rps $p50 $p99 $cpus" >>"$results"
  done
done
python3 "$HERE/lib/bench_datapath.py" summary "$results"
rm -f "$results"
