package testenv

import (
	"context"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// Eventually retries check until it passes or timeout, then fails with its last error.
func Eventually(t *testing.T, timeout time.Duration, check func() error) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		err := check()
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("not within %s: %v", timeout, err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// CreateIfAbsent creates obj unless an object of its name exists: tests of a suite share the
// StackInstances they name.
func CreateIfAbsent(t *testing.T, c client.Client, obj client.Object) {
	t.Helper()
	if err := c.Create(context.Background(), obj); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatalf("create %T %s: %v", obj, obj.GetName(), err)
	}
}

// DeleteAtEnd deletes obj, without a grace period, when the test ends: a pod holding a static
// address or a claim must be gone before the next test's pod of the same StackInstance needs it.
func DeleteAtEnd(t *testing.T, c client.Client, obj client.Object) {
	t.Cleanup(func() {
		if err := c.Delete(context.Background(), obj, client.GracePeriodSeconds(0)); err != nil && !apierrors.IsNotFound(err) {
			t.Errorf("delete %s: %v", obj.GetName(), err)
		}
	})
}
