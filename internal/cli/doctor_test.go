package cli

import (
	"bytes"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	fsv1 "github.com/kube-fstack/kube-fstack/api/v1alpha1"
	"github.com/kube-fstack/kube-fstack/internal/nodecheck"
)

type linkList []nodecheck.Link

func (l linkList) Links() ([]nodecheck.Link, error) { return l, nil }

// A node whose kernel sender on the bridge has tx checksum offload on: doctor names the
// sender, the fix and why, and shows OVS's userspace TSO setting, while the node keeps its
// vhost-user label (the checks as the agent makes them; the cluster side is test/cli).
func TestDoctorExplainsKernelTCPChecksum(t *testing.T) {
	facts := &nodecheck.BridgeFacts{KernelPorts: []string{"fsk-node-o"}}
	links := linkList{{Index: 7, Name: "fsk-node-o", Kind: "veth", PeerIndex: 8}, {Index: 8, Name: "fsk-node", Kind: "veth", PeerIndex: 7, TxChecksum: true}}
	r := &nodecheck.Report{
		Checks: []nodecheck.Check{
			{Name: "ovs-bridge", Status: nodecheck.Pass, Detail: `bridge "br-fstack", datapath netdev`, Label: fsv1.NodeLabelVhostUser},
			nodecheck.KernelTCP(facts, links), nodecheck.UserspaceTSO(facts),
		},
		Labels: map[string]string{fsv1.NodeLabelVhostUser: fsv1.NodeReady},
	}
	n := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "node-a", Labels: r.Labels,
		Annotations: map[string]string{fsv1.NodeReportAnnotation: r.Marshal()}}}
	var out bytes.Buffer
	printNodeReport(&out, n)
	for _, want := range []string{
		"node node-a: 1 of 3 checks need attention",
		"labels: node.kubefstack.io/vhost-user=ready",
		"WARN  kernel-tcp-checksum  tx checksum offload on: fsk-node (peer of port fsk-node-o)",
		"PASS  ovs-userspace-tso    other_config:userspace-tso-enable=false (unset)",
		"fix kernel-tcp-checksum: tx checksum offload on: fsk-node (peer of port fsk-node-o): ethtool -K <sender> tx off for fsk-node",
		"gets every SYN with a bad checksum and drops it",
	} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("doctor output lacks %q:\n%s", want, out.String())
		}
	}
	if strings.Contains(out.String(), "fix ovs-userspace-tso") {
		t.Errorf("information got a fix line:\n%s", out.String())
	}
}
