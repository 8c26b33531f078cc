#!/usr/bin/env bash
# F-Stack started by hand on the local cluster's node, outside Kubernetes, as a user does without
# kube-fstack: the arms `make bench-datapath` compares the product with (BYHAND=shim,nginx), so
# that kube-fstack / by hand is the product's own overhead (docs/benchmarks.md).
#
#   hack/bench-byhand.sh start shim   the image's fstack + the stock Nginx under its shim
#   hack/bench-byhand.sh start nginx  F-Stack's own Nginx (the fstack-nginx image)
#   hack/bench-byhand.sh stop [MODE]  removes the containers, the OVS port and the files
#   hack/bench-byhand.sh containers MODE   the arm's podman containers (for CPU accounting)
# start prints the URL it serves. Each arm is what F-Stack's own docs do (adapter/syscall's
# README, config.ini): privileged podman containers, a config.ini from F-Stack's sample with
# only the port's address, lcore and vhost-user vdev filled in, and the two polling settings
# the pods' StackInstance chose (idle_sleep, pkt_tx_delay: the same F-Stack tuning on both sides), `fstack` started first, then
# Nginx with LD_PRELOAD=libff_syscall.so and FF_INITIAL_LCORE_ID; a vhost-user port of the same
# OVS bridge the pods use (no CNI, no anti-spoofing flows: that is kube-fstack's). The same
# images as the pods' (the local cluster's real dataplane and fstack-nginx images, the stock
# Nginx's archive), the same CPUs as the pods' placement on this node (the lcore on LCORE_CPU,
# default 1; Nginx on APP_CPU, default 0) and the shim demo's nginx.conf (its ConfigMap).
# Real F-Stack only: the stand-in image has no fstack. Root; the local cluster must be up.
set -euo pipefail
HERE="$(cd "$(dirname "$0")" && pwd)"
# shellcheck source=hack/cluster/lib.sh
source "$HERE/cluster/lib.sh"

LCORE_CPU=${LCORE_CPU:-1}
APP_CPU=${APP_CPU:-0}
DATAPLANE_IMAGE=${DATAPLANE_IMAGE:-localhost/kube-fstack/dataplane:dev}
FSTACK_NGINX_IMAGE=${FSTACK_NGINX_IMAGE:-localhost/kube-fstack/fstack-nginx:dev}
NGINX_ARCHIVE=${NGINX_ARCHIVE:-$CACHE/images/nginx.oci.tar}
SHIM_MODE=${SHIM_MODE:-kernel-event+multi-sc}
BYHAND_DIR="$RUN/byhand"
# Addresses of the data network no pool of the samples hands out.
declare -A ADDR=([shim]=10.99.0.40 [nginx]=10.99.0.41)
declare -A MAC=([shim]=02:fe:00:00:00:40 [nginx]=02:fe:00:00:00:41)

bh_die() { printf 'bench-byhand: ERROR: %s\n' "$*" >&2; exit 1; }
bh_log() { printf '%s bench-byhand: %s\n' "$(date +%T)" "$*" >&2; }

containers() {
  case $1 in
    shim) echo "kfs-byhand-shim-fstack kfs-byhand-shim-nginx" ;;
    nginx) echo "kfs-byhand-nginx" ;;
    *) bh_die "mode $1: want shim or nginx" ;;
  esac
}
port_name() { echo "kfsbh-$1"; }

# stack_of MODE: the StackInstance whose pods the arm is compared with.
stack_of() { if [ "$1" = shim ]; then echo local-vhost; else echo local-fstack-nginx; fi; }

# config_ini MODE: F-Stack's sample config.ini (config.ini in F-Stack v1.25's tree, its sections and
# values as they are, without its example vlan_filter and rss_check) with this node's facts: the lcore, the vhost-user vdev (the server end, OVS connects as the client, as pods do)
# and the port's address, and the polling the pods' StackInstance chose. Everything else is
# F-Stack's default.
config_ini() {
  local mode=$1 mask idle delay stack
  mask=$(printf '%x' $((1 << LCORE_CPU)))
  stack=$(stack_of "$mode")
  idle=$(kc -n fstack-demo get stackinstance "$stack" -o 'jsonpath={.spec.dpdk.idleSleepMicroseconds}') \
    || bh_die "no StackInstance fstack-demo/$stack to take the polling settings from"
  delay=$(kc -n fstack-demo get stackinstance "$stack" -o 'jsonpath={.spec.dpdk.pktTxDelayMicroseconds}')
  cat <<EOF
[dpdk]
lcore_mask=$mask
channel=4
promiscuous=1
numa_on=1
tx_csum_offoad_skip=0
tso=0
vlan_strip=1
idle_sleep=${idle:-0}
pkt_tx_delay=${delay:-100}
symmetric_rss=0
port_list=0
nb_vdev=1
nb_bond=0

[vdev0]
path=/var/run/byhand/vhost/sock,server=1
queues=1
mac=${MAC[$mode]}

[port0]
addr=${ADDR[$mode]}
netmask=255.255.255.0
broadcast=10.99.0.255
gateway=$FSTACK_GATEWAY

[pcap]
enable=0
snaplen=96
savelen=16777216
savepath=.

[freebsd.boot]
hz=100
fd_reserve=1024
kern.ipc.maxsockets=262144
net.inet.tcp.syncache.hashsize=4096
net.inet.tcp.syncache.bucketlimit=100
net.inet.tcp.tcbhashsize=65536
kern.ncallout=262144
kern.features.inet6=1

[freebsd.sysctl]
kern.ipc.somaxconn=32768
kern.ipc.maxsockbuf=16777216
net.add_addr_allfibs=1
net.link.ether.inet.maxhold=5
net.inet.tcp.fast_finwait2_recycle=1
net.inet.tcp.finwait2_timeout=5000
net.inet.tcp.maxtcptw=128
net.inet.tcp.sendspace=16384
net.inet.tcp.recvspace=8192
net.inet.tcp.cc.algorithm=cubic
net.inet.tcp.sendbuf_max=16777216
net.inet.tcp.recvbuf_max=16777216
net.inet.tcp.sendbuf_auto=1
net.inet.tcp.recvbuf_auto=1
net.inet.tcp.sendbuf_inc=16384
net.inet.tcp.sack.enable=1
net.inet.tcp.blackhole=1
net.inet.tcp.msl=2000
net.inet.tcp.delayed_ack=1
net.inet.tcp.rfc1323=1
net.inet.udp.blackhole=1
net.inet.ip.redirect=0
net.inet.ip.forwarding=0
net.inet.ip.portrange.randomized=1
net.inet.ip.portrange.randomtime=0
net.inet6.ip6.auto_linklocal=1
net.inet6.ip6.accept_rtadv=2
net.inet6.icmp6.rediraccept=1
net.inet6.ip6.forwarding=0
net.inet.tcp.functions_default=freebsd
net.inet.tcp.hpts.skip_swi=1
net.inet.tcp.hpts.minsleep=250
net.inet.tcp.hpts.maxsleep=51200
EOF
}

# podman_run NAME ARGS...: a privileged container with the arm's runtime dir, hugepages and
# vhost-user socket directory, as F-Stack's docs run it.
podman_run() {
  local name=$1 dir=$BYHAND_DIR/$2
  shift 2
  # podman's default limits exceed this host's (its runc cannot raise them): the host's own
  # open-files limit, and kind's process limit (hack/kind/up.sh).
  podman run -d --name "$name" --privileged --network none --ulimit "nofile=$(ulimit -Hn):$(ulimit -Hn)" --ulimit nproc=1024:1024 \
    -v "$dir/run:/var/run/dpdk" -v "$dir/huge:/dev/hugepages" -v "$dir:/var/run/byhand" "$@" >/dev/null \
    || bh_die "podman run $name failed"
}

# wait_link PORT NAME: until OVS says the vhost-user port's link is up, which F-Stack's virtio_user
# brings up in ff_init just before it creates the shim's zones (its own log is block-buffered
# when not on a terminal, so it cannot be waited on), then a margin for the zones.
wait_link() {

  for _ in $(seq 300); do
    if [ "$(vsctl get Interface "$1" link_state 2>/dev/null)" = up ]; then
      sleep 3
      return 0
    fi
    [ "$(podman inspect -f '{{.State.Running}}' "$2" 2>/dev/null)" = true ] || bh_die "$2 exited: $(podman logs --tail 30 "$2" 2>&1)"
    sleep 0.2
  done
  bh_die "OVS port $1 never came up within 60 s: $(podman logs --tail 30 "$2" 2>&1)"
}

start() {
  local mode=$1 dir port sock
  command -v podman >/dev/null || bh_die "podman not found: hack/install-deps.sh --cluster installs it"
  [ -S "$OVS_DB_SOCK" ] || bh_die "the local cluster is not up (no OVS at $OVS_DB_SOCK): make run DATAPLANE=real"
  stop "$mode"
  dir=$BYHAND_DIR/$mode port=$(port_name "$mode")
  mkdir -p "$dir/run" "$dir/huge" "$dir/vhost"
  mountpoint -q "$dir/huge" || mount -t hugetlbfs -o pagesize=2M nodev "$dir/huge"
  config_ini "$mode" >"$dir/config.ini"
  sock=$dir/vhost/sock
  case $mode in
    shim)
      podman image exists "$DATAPLANE_IMAGE" || bh_die "no image $DATAPLANE_IMAGE: build the real dataplane image (make run DATAPLANE=real builds it)"
      [ -f "$NGINX_ARCHIVE" ] || bh_die "no $NGINX_ARCHIVE: make run builds it"
      # The shim demo's nginx.conf, as the pods run it.
      kc -n fstack-demo get configmap nginx-fstack-conf -o 'jsonpath={.data.nginx\.conf}' >"$dir/nginx.conf" \
        || bh_die "no ConfigMap fstack-demo/nginx-fstack-conf: make run applies the demo"
      podman_run kfs-byhand-shim-fstack shim --entrypoint sh "$DATAPLANE_IMAGE" \
        -c "cp -a /opt/kube-fstack/shim /var/run/byhand/shim && cd /var/run/byhand && exec /var/run/byhand/shim/$SHIM_MODE/fstack -c /var/run/byhand/config.ini --proc-type=primary --proc-id=0"
      ;;
    nginx)
      podman image exists "$FSTACK_NGINX_IMAGE" || bh_die "no image $FSTACK_NGINX_IMAGE: make image-fstack-nginx"
      kc -n fstack-demo get configmap fstack-nginx-conf -o 'jsonpath={.data.nginx\.conf}' >"$dir/nginx.conf.in" \
        || bh_die "no ConfigMap fstack-demo/fstack-nginx-conf: kubectl apply -f config/samples/local-cluster/fstack-nginx.yaml"
      # What F-Stack's Nginx docs add: one worker per F-Stack process, its config.ini, no daemon.
      { printf 'worker_processes 1;\nfstack_conf /var/run/byhand/config.ini;\ndaemon off;\nuser root;\n'; cat "$dir/nginx.conf.in"; } >"$dir/nginx.conf"
      start_fstack_nginx
      ;;
  esac
  vsctl --may-exist add-port "$OVS_BRIDGE" "$port" -- set Interface "$port" type=dpdkvhostuserclient \
    "options:vhost-server-path=$sock" >/dev/null || bh_die "ovs-vsctl add-port $port failed"
  if [ "$mode" = shim ]; then
    wait_link "$port" kfs-byhand-shim-fstack
    podman_run kfs-byhand-shim-nginx shim -e "LD_PRELOAD=/var/run/byhand/shim/$SHIM_MODE/libff_syscall.so" \
      -e FF_INITIAL_LCORE_ID="$(printf '%x' $((1 << APP_CPU)))" -e FF_NB_FSTACK_INSTANCE=1 -e FF_PROC_ID=0 \
      --entrypoint taskset "oci-archive:$NGINX_ARCHIVE" -c "$APP_CPU" nginx -c /var/run/byhand/nginx.conf -g 'daemon off; worker_processes 1;'
  fi
  wait_http "http://${ADDR[$mode]}/"
  echo "http://${ADDR[$mode]}/"
}

# start_fstack_nginx: F-Stack's Nginx, started again when its master gives up on its worker's
# F-Stack initialisation ("primary worker process failed to initialize", seen on a loaded 2-core
# node), as one does by hand.
start_fstack_nginx() {
  local try
  for try in 1 2 3; do
    podman rm -f kfs-byhand-nginx >/dev/null 2>&1 || true
    podman_run kfs-byhand-nginx nginx --entrypoint /usr/local/nginx_fstack/sbin/nginx "$FSTACK_NGINX_IMAGE" -c /var/run/byhand/nginx.conf
    sleep 5
    [ "$(podman inspect -f '{{.State.Running}}' kfs-byhand-nginx 2>/dev/null)" = true ] && return 0
    bh_log "F-Stack's Nginx exited at start (try $try): $(podman logs --tail 1 kfs-byhand-nginx 2>&1)"
  done
  bh_die "F-Stack's Nginx did not start: $(podman logs --tail 30 kfs-byhand-nginx 2>&1)"
}

wait_http() {

  local c
  for _ in $(seq 150); do
    curl -fsS -o /dev/null --max-time 1 "$1" 2>/dev/null && return 0
    for c in $(containers "$mode"); do
      [ "$(podman inspect -f '{{.State.Running}}' "$c" 2>/dev/null)" = true ] || bh_die "$c exited: $(podman logs --tail 30 "$c" 2>&1)"
    done
    sleep 0.2
  done
  bh_die "$1 does not answer after 30 s+: podman logs $(containers "$mode" | tr ' ' ',')"
}

stop() {
  local modes=("$@") mode c
  [ ${#modes[@]} -gt 0 ] || modes=(shim nginx)
  for mode in "${modes[@]}"; do
    for c in $(containers "$mode"); do
      podman rm -f -t 2 "$c" >/dev/null 2>&1 || true
    done
    if [ -S "$OVS_DB_SOCK" ]; then vsctl --if-exists del-port "$OVS_BRIDGE" "$(port_name "$mode")" >/dev/null 2>&1 || true; fi
    if mountpoint -q "$BYHAND_DIR/$mode/huge"; then umount "$BYHAND_DIR/$mode/huge"; fi
    rm -rf "${BYHAND_DIR:?}/$mode"
  done
}

case ${1:-} in
  start) [ $# -eq 2 ] || bh_die "usage: $0 start shim|nginx"; start "$2" ;;
  stop) shift; stop "$@" ;;
  containers) [ $# -eq 2 ] || bh_die "usage: $0 containers shim|nginx"; containers "$2" ;;
  *) bh_die "usage: $0 start MODE | stop [MODE] | containers MODE" ;;
esac
