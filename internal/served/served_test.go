package served

import (
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"

	fsv1 "github.com/kube-fstack/kube-fstack/api/v1alpha1"
	"github.com/kube-fstack/kube-fstack/internal/podcontract"
	"github.com/kube-fstack/kube-fstack/internal/test/fixtures"
)

// specPod is fixtures.SnapshotPod named a.
func specPod(t *testing.T, ports []fsv1.Addressing, ann map[string]string) corev1.Pod {
	t.Helper()
	return fixtures.SnapshotPod(t, "a", ports, ann)
}

var (
	static4 = fsv1.Addressing{IPv4: &fsv1.IPv4Address{From: fsv1.AddressStatic, Address: "10.56.0.10/24"}}
	dual    = fsv1.Addressing{IPv4: &fsv1.IPv4Address{From: fsv1.AddressStatic, Address: "10.56.0.10/24"},
		IPv6: &fsv1.IPv6Address{From: fsv1.AddressStatic, Address: "2001:db8::10/64"}}
	attach = fsv1.Addressing{IPv4: &fsv1.IPv4Address{From: fsv1.AddressAttachment}}
)

// The addresses annotation is the one source: a port by index or by name (an entry of
// an older operator has no name and matches by index only); without the annotation, an unknown
// stack port, or a malformed annotation: no address, and an error that says why. The snapshot
// is never read (issue 37: the pre-annotation fallback retired).
func TestServedAddresses(t *testing.T) {
	for _, c := range []struct {
		name string
		pod  corev1.Pod
		port string
		want string
		err  string
	}{
		{name: "snapshot alone is not read", pod: specPod(t, []fsv1.Addressing{dual}, nil),
			err: "it has no kubefstack.io/addresses annotation"},
		{name: "annotation", pod: specPod(t, []fsv1.Addressing{static4, static4},
			map[string]string{podcontract.AddressesAnnotation: "0:data=10.56.0.11,1:mgmt=10.57.0.11,0:data=2001:db8::11"}), want: "10.56.0.11 2001:db8::11"},
		{name: "annotation, second port by name", pod: specPod(t, []fsv1.Addressing{static4, static4},
			map[string]string{podcontract.AddressesAnnotation: "0:data=10.56.0.11,1:mgmt=10.57.0.11"}), port: "mgmt", want: "10.57.0.11"},
		{name: "second port by index", pod: specPod(t, []fsv1.Addressing{static4, dual},
			map[string]string{podcontract.AddressesAnnotation: "0:data=10.56.0.11,1:mgmt=10.56.0.10,1:mgmt=2001:db8::10"}), port: "1", want: "10.56.0.10 2001:db8::10"},
		{name: "unnamed entries by index", pod: specPod(t, []fsv1.Addressing{static4, static4},
			map[string]string{podcontract.AddressesAnnotation: "0=10.56.0.11,1=10.57.0.11"}), port: "1", want: "10.57.0.11"},
		{name: "unnamed entries by name", pod: specPod(t, []fsv1.Addressing{static4, static4},
			map[string]string{podcontract.AddressesAnnotation: "0=10.56.0.11,1=10.57.0.11"}), port: "mgmt", err: `names no address of stack port "mgmt"`},
		{name: "attachment with annotation", pod: specPod(t, []fsv1.Addressing{attach},
			map[string]string{podcontract.AddressesAnnotation: "0=10.56.0.12"}), want: "10.56.0.12"},
		{name: "no such port", pod: specPod(t, []fsv1.Addressing{static4},
			map[string]string{podcontract.AddressesAnnotation: "0:data=10.56.0.11"}), port: "2", err: `names no address of stack port "2"`},
		{name: "malformed annotation", pod: specPod(t, []fsv1.Addressing{static4},
			map[string]string{podcontract.AddressesAnnotation: "0=10.56.0.11,0=224.0.0.1"}), err: "is not a unicast address"},
		{name: "annotation without the port", pod: specPod(t, []fsv1.Addressing{static4, static4},
			map[string]string{podcontract.AddressesAnnotation: "1=10.57.0.11"}), err: "names no address of stack port 0"},
		{name: "not injected", pod: corev1.Pod{}, err: "it was not injected"},
	} {
		t.Run(c.name, func(t *testing.T) {
			got, err := Addresses(&c.pod, c.port)
			if c.err != "" {
				if err == nil || !strings.Contains(err.Error(), c.err) {
					t.Fatalf("got %v, %v; want an error with %q", got, err, c.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			var s []string
			for _, a := range got {
				s = append(s, a.String())
			}
			if strings.Join(s, " ") != c.want {
				t.Fatalf("got %v, want %s", s, c.want)
			}
		})
	}
}
