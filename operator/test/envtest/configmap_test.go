package envtest

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	fsv1 "github.com/kube-fstack/kube-fstack/api/v1alpha1"
	"github.com/kube-fstack/kube-fstack/internal/test/testenv"
	"github.com/kube-fstack/kube-fstack/operator/internal/controller"
)

// A user's ConfigMap that happens to have the StackInstance's ConfigMap name is never taken
// over (nor, through an owner reference, deleted with the StackInstance): the operator leaves it
// as it was, says why in the ConfigMap condition and a Warning event, and still keeps the rest
// of the status. Two cases: a plain ConfigMap, which the operator's cache never sees, and one
// that carries the operator's managed-by label, which it does.
func TestUsersConfigMapIsNeverAdopted(t *testing.T) {
	for _, c := range []struct {
		name   string
		labels map[string]string
	}{
		{"unlabelled", map[string]string{"team": "web"}},
		{"our-label", map[string]string{controller.ManagedByLabel: controller.ManagedBy}},
	} {
		t.Run(c.name, func(t *testing.T) { testNotAdopted(t, "taken-"+c.name, c.labels) })
	}
}

func testNotAdopted(t *testing.T, stackName string, labels map[string]string) {
	ctx := context.Background()
	users := &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Namespace: optedInNS, Name: controller.ConfigMapName(stackName), Labels: labels},
		Data:       map[string]string{"config.ini": "the user's own\n"},
	}
	if err := k8s.Create(ctx, users, client.FieldOwner("a-user")); err != nil {
		t.Fatal(err)
	}
	before := users.DeepCopy()
	si := stack(t, "vhost-user", stackName)
	testenv.CreateIfAbsent(t, k8s, si)
	var got *fsv1.StackInstance
	testenv.Eventually(t, 20*time.Second, func() error {
		got = &fsv1.StackInstance{}
		if err := k8s.Get(ctx, client.ObjectKeyFromObject(si), got); err != nil {
			return err
		}
		c := meta.FindStatusCondition(got.Status.Conditions, fsv1.ConditionConfigMap)
		if c == nil || c.Status != metav1.ConditionFalse || c.Reason != fsv1.ReasonConfigMapConflict {
			return fmt.Errorf("ConfigMap condition %+v", c)
		}
		return nil
	})
	msg := meta.FindStatusCondition(got.Status.Conditions, fsv1.ConditionConfigMap).Message
	for _, want := range []string{optedInNS + "/" + users.Name, "not this StackInstance's", "delete or rename that ConfigMap"} {
		if !strings.Contains(msg, want) {
			t.Errorf("the condition's message %q does not say %q", msg, want)
		}
	}
	// The rest of the status is written on the same path.
	if v := meta.FindStatusCondition(got.Status.Conditions, fsv1.ConditionValid); v == nil || v.Status != metav1.ConditionTrue {
		t.Errorf("Valid condition %+v", v)
	}
	if r := meta.FindStatusCondition(got.Status.Conditions, fsv1.ConditionReady); r == nil || r.Reason != fsv1.ReasonNoBoundPods {
		t.Errorf("Ready condition %+v", r)
	}
	if got.Status.ObservedGeneration != got.Generation || got.Status.ConfigHash == "" {
		t.Errorf("status %+v", got.Status)
	}
	waitWarning(t, si, fsv1.ReasonConfigMapConflict)
	after := &corev1.ConfigMap{}
	if err := k8s.Get(ctx, client.ObjectKeyFromObject(users), after); err != nil {
		t.Fatal(err)
	}
	if len(after.OwnerReferences) != 0 || after.ResourceVersion != before.ResourceVersion ||
		!cmp.Equal(after.Labels, before.Labels) || !cmp.Equal(after.Data, before.Data) || len(after.Annotations) != 0 {
		t.Fatalf("the user's ConfigMap changed:\nbefore %+v\nafter  %+v", before.ObjectMeta, after.ObjectMeta)
	}
	// Once the user's ConfigMap is gone, the StackInstance gets its own.
	if err := k8s.Delete(ctx, users); err != nil {
		t.Fatal(err)
	}
	if err := k8s.Get(ctx, client.ObjectKeyFromObject(si), got); err != nil {
		t.Fatal(err)
	}
	// A spec change wakes the controller at once (it also looks again every minute by itself).
	patched := got.DeepCopy()
	patched.Spec.Processes = 1 // the sample has 2
	if err := k8s.Patch(ctx, patched, client.MergeFrom(got)); err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, 20*time.Second, func() error {
		cm := &corev1.ConfigMap{}
		if err := k8s.Get(ctx, client.ObjectKeyFromObject(users), cm); err != nil {
			return err
		}
		if !metav1.IsControlledBy(cm, patched) {
			return fmt.Errorf("owner references %+v", cm.OwnerReferences)
		}
		return nil
	})
}

// waitWarning waits for a Warning event about obj with the given reason.
func waitWarning(t *testing.T, obj client.Object, reason string) {
	t.Helper()
	testenv.Eventually(t, 20*time.Second, func() error {
		list := &eventsv1.EventList{}
		if err := k8s.List(context.Background(), list, client.InNamespace(obj.GetNamespace())); err != nil {
			return err
		}
		for _, e := range list.Items {
			if e.Regarding.UID == obj.GetUID() && e.Reason == reason && e.Type == corev1.EventTypeWarning {
				return nil
			}
		}
		return fmt.Errorf("no Warning event %s about %s among %d events", reason, obj.GetName(), len(list.Items))
	})
}
