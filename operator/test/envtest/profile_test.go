package envtest

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	fsv1 "github.com/kube-fstack/kube-fstack/api/v1alpha1"
	"github.com/kube-fstack/kube-fstack/internal/test/testenv"
	"github.com/kube-fstack/kube-fstack/operator/internal/controller"
)

// A profile survives the API server: no schema default writes a value the profile would then
// lose to (pktTxDelayMicroseconds had one), and the controller's preview holds the profile's
// value. An unknown profile is refused at spec.profile.
func TestProfileThroughTheAPIServer(t *testing.T) {
	ctx := context.Background()
	si := stack(t, "vhost-user", "short-profile")
	si.Spec.Profile = fsv1.ProfileShortConnections
	testenv.CreateIfAbsent(t, k8s, si)
	got := &fsv1.StackInstance{}
	if err := k8s.Get(ctx, types.NamespacedName{Namespace: optedInNS, Name: si.Name}, got); err != nil {
		t.Fatal(err)
	}
	if d := got.Spec.DPDK.PktTxDelayMicroseconds; d != nil {
		t.Fatalf("the API server stored pktTxDelayMicroseconds=%d, which overrides the profile's value", *d)
	}
	testenv.Eventually(t, 20*time.Second, func() error {
		cm := &corev1.ConfigMap{}
		if err := k8s.Get(ctx, types.NamespacedName{Namespace: optedInNS, Name: controller.ConfigMapName(si.Name)}, cm); err != nil {
			return err
		}
		if !strings.Contains(cm.Data[controller.KeyConfig], "\npkt_tx_delay=50\n") {
			return fmt.Errorf("the ConfigMap's config.ini lacks the profile's pkt_tx_delay=50:\n%s", cm.Data[controller.KeyConfig])
		}
		return nil
	})

	bad := stack(t, "vhost-user", "bad-profile")
	bad.Spec.Profile = "Fast"
	wantErr(t, k8s.Create(ctx, bad), "spec.profile", "Unsupported value", "ShortConnections")
}
