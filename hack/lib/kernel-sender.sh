#!/usr/bin/env bash
# A kernel-stack sender on an OVS bridge: a veth pair whose one end becomes a port of the bridge
# and whose other end, the sender, gets an address and has tx checksum offload turned off.
# The one place kube-fstack makes such a sender: the local cluster's node address (hack/cluster),
# and every test peer (internal/test/nodetest.AttachPeer, so the node, dataplane and e2e tiers).
#
# Why tx off: the kernel hands TCP and UDP to a veth with the checksum left to the device
# (CHECKSUM_PARTIAL). OVS's netdev datapath reads the frame as it is, and its dpdkvhostuserclient
# port negotiates no checksum offload with the pod's virtio_user, so nobody completes it: F-Stack
# gets every SYN with a bad TCP checksum and drops it, while ARP and ping still work (measured
# on real F-Stack v1.25). With offload off the kernel computes the checksum itself.
#
#   hack/lib/kernel-sender.sh PORT PORT_NETNS SENDER SENDER_NETNS ADDR
#     PORT         the bridge's end, made in PORT_NETNS (ovs-vswitchd's namespace; - for this one)
#     SENDER       the other end, in SENDER_NETNS (- for this one), up with ADDR (e.g. 10.99.0.1/24)
# The caller adds PORT to the bridge (ovs-vsctl add-port BRIDGE PORT): it owns the OVSDB socket.
set -euo pipefail
[ $# -eq 5 ] || { echo "usage: $0 PORT PORT_NETNS SENDER SENDER_NETNS ADDR (- for this namespace)" >&2; exit 2; }
port="$1" port_ns="$2" sender="$3" sender_ns="$4" addr="$5"
command -v ethtool >/dev/null || { echo "kernel-sender: ethtool not found: run hack/install-deps.sh (apt-get install ethtool)" >&2; exit 1; }

# in_ns NS CMD...: CMD in namespace NS (- is this one).
in_ns() {
  local ns="$1"; shift
  if [ "$ns" = - ]; then "$@"; else ip netns exec "$ns" "$@"; fi
}

ip_sender=(ip)
[ "$sender_ns" = - ] || ip_sender=(ip -n "$sender_ns")
to_port_ns=()
[ "$port_ns" = - ] || to_port_ns=(netns "$port_ns")

"${ip_sender[@]}" link add "$sender" type veth peer name "$port" "${to_port_ns[@]}"
in_ns "$port_ns" ip link set "$port" up
"${ip_sender[@]}" addr add "$addr" dev "$sender"
in_ns "$sender_ns" ethtool -K "$sender" tx off >/dev/null
"${ip_sender[@]}" link set "$sender" up
# ethtool -K can exit 0 having changed nothing a driver refused: check what the kernel says.
if ! in_ns "$sender_ns" ethtool -k "$sender" | grep -qx 'tx-checksumming: off'; then
  echo "kernel-sender: tx checksum offload of $sender is still on; TCP from it would reach F-Stack with bad checksums" >&2
  exit 1
fi
