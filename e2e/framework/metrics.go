package framework

// What both suites read of the cluster beyond its objects: a dataplane's counters and the
// operator's leader.

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/kube-fstack/kube-fstack/internal/podcontract"
)

// NICRxPackets reads the dataplane's fstack_nic_rx_packets_total of port 0 from the supervisor's
// metrics on the pod's kernel address: how the suites count packets that reached a stand-in,
// which answers ping only (one TCP connection attempt is one packet more).
func NICRxPackets(podIP string) (int64, error) {
	url := fmt.Sprintf("http://%s%s", net.JoinHostPort(podIP, strconv.Itoa(podcontract.SupervisorPort)), podcontract.MetricsPath)
	resp, err := (&http.Client{Timeout: 5 * time.Second}).Get(url)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(io.LimitReader(resp.Body, 4<<20))
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if strings.HasPrefix(line, "fstack_nic_rx_packets_total{") && strings.Contains(line, `port="0"`) {
			f := strings.Fields(line)
			v, err := strconv.ParseFloat(f[len(f)-1], 64)
			if err != nil {
				return 0, fmt.Errorf("%s: %q: %w", url, line, err)
			}
			return int64(v), nil
		}
	}
	if err := sc.Err(); err != nil {
		return 0, fmt.Errorf("%s: %w", url, err)
	}
	return 0, fmt.Errorf("%s has no fstack_nic_rx_packets_total of port 0", url)
}

// OperatorLease is the operator's leader-election Lease (manager.ctrlOptions' LeaderElectionID).
const OperatorLease = "kube-fstack-operator.kubefstack.io"

// LeaseHolder is the holder of the operator's Lease in namespace ("" when none holds it): the
// leader's pod name, an underscore and a unique suffix.
func LeaseHolder(ctx context.Context, c client.Client, namespace string) (string, error) {
	lease := &coordinationv1.Lease{}
	if err := c.Get(ctx, client.ObjectKey{Namespace: namespace, Name: OperatorLease}, lease); err != nil {
		return "", fmt.Errorf("the leader Lease %s/%s: %w", namespace, OperatorLease, err)
	}
	if lease.Spec.HolderIdentity == nil {
		return "", nil
	}
	return *lease.Spec.HolderIdentity, nil
}
