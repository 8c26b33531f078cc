package envtest

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	admissionv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	fsv1 "github.com/kube-fstack/kube-fstack/api/v1alpha1"
	"github.com/kube-fstack/kube-fstack/internal/test/testenv"
	"github.com/kube-fstack/kube-fstack/operator/internal/controller"
)

const denyMessage = "ConfigMaps named cm-denied-fstack are refused by this cluster's policy"

// When the API server refuses the ConfigMap write (here a ValidatingAdmissionPolicy, as a
// cluster's policy engine might), the status says so where `kubectl describe fsi` shows it: the
// ConfigMap condition False with ConfigMapWriteFailed, the ConfigMap's name and the API server's
// refusal, a Warning event, and the rest of the status written on the same path. Once the policy
// goes, the operator's retries write the ConfigMap.
func TestConfigMapWriteFailureInStatus(t *testing.T) {
	ctx := context.Background()
	binding := denyConfigMap(t, "cm-denied-fstack")
	si := stack(t, "vhost-user", "cm-denied")
	testenv.CreateIfAbsent(t, k8s, si)
	got := waitConfigMapCondition(t, si, metav1.ConditionFalse, fsv1.ReasonConfigMapFailed)
	msg := meta.FindStatusCondition(got.Status.Conditions, fsv1.ConditionConfigMap).Message
	for _, want := range []string{"writing ConfigMap web/cm-denied-fstack failed (retrying)", denyMessage} {
		if !strings.Contains(msg, want) {
			t.Errorf("the ConfigMap condition's message %q does not say %q", msg, want)
		}
	}
	if v := meta.FindStatusCondition(got.Status.Conditions, fsv1.ConditionValid); v == nil || v.Status != metav1.ConditionTrue {
		t.Errorf("Valid condition %+v", v)
	}
	if r := meta.FindStatusCondition(got.Status.Conditions, fsv1.ConditionReady); r == nil || r.Reason != fsv1.ReasonNoBoundPods {
		t.Errorf("Ready condition %+v", r)
	}
	if got.Status.ObservedGeneration != got.Generation || got.Status.ConfigHash == "" || got.Status.Ready != "0/0" {
		t.Errorf("status %+v", got.Status)
	}
	waitWarning(t, si, fsv1.ReasonConfigMapFailed)

	if err := k8s.Delete(ctx, binding); err != nil {
		t.Fatal(err)
	}
	waitConfigMapCondition(t, si, metav1.ConditionTrue, fsv1.ReasonConfigMapOK)
	cm := &corev1.ConfigMap{}
	if err := k8s.Get(ctx, client.ObjectKey{Namespace: optedInNS, Name: controller.ConfigMapName(si.Name)}, cm); err != nil {
		t.Fatal(err)
	}
	if cm.Data[controller.KeyConfigHash] != got.Status.ConfigHash {
		t.Fatalf("ConfigMap hash %q, status %q", cm.Data[controller.KeyConfigHash], got.Status.ConfigHash)
	}
}

// denyConfigMap installs a policy that refuses creating or changing the ConfigMap name in the
// opted-in namespace, and waits until the API server enforces it (policies load asynchronously).
func denyConfigMap(t *testing.T, name string) *admissionv1.ValidatingAdmissionPolicyBinding {
	t.Helper()
	ctx := context.Background()
	fail := admissionv1.Fail
	policy := &admissionv1.ValidatingAdmissionPolicy{
		ObjectMeta: metav1.ObjectMeta{Name: "deny-" + name},
		Spec: admissionv1.ValidatingAdmissionPolicySpec{
			FailurePolicy: &fail,
			MatchConstraints: &admissionv1.MatchResources{ResourceRules: []admissionv1.NamedRuleWithOperations{{
				RuleWithOperations: admissionv1.RuleWithOperations{
					Operations: []admissionv1.OperationType{admissionv1.Create, admissionv1.Update},
					Rule:       admissionv1.Rule{APIGroups: []string{""}, APIVersions: []string{"v1"}, Resources: []string{"configmaps"}},
				},
			}}},
			Validations: []admissionv1.Validation{{
				Expression: fmt.Sprintf("object.metadata.namespace != %q || object.metadata.name != %q", optedInNS, name),
				Message:    denyMessage,
			}},
		},
	}
	binding := &admissionv1.ValidatingAdmissionPolicyBinding{
		ObjectMeta: metav1.ObjectMeta{Name: policy.Name},
		Spec: admissionv1.ValidatingAdmissionPolicyBindingSpec{
			PolicyName: policy.Name, ValidationActions: []admissionv1.ValidationAction{admissionv1.Deny},
		},
	}
	for _, o := range []client.Object{policy, binding} {
		if err := k8s.Create(ctx, o); err != nil {
			t.Fatal(err)
		}
	}
	t.Cleanup(func() { _ = k8s.Delete(ctx, policy) })
	probe := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: optedInNS, Name: name}}
	testenv.Eventually(t, 30*time.Second, func() error {
		err := k8s.Create(ctx, probe.DeepCopy(), client.DryRunAll)
		if err == nil || !strings.Contains(err.Error(), denyMessage) {
			return errors.Join(errors.New("the policy is not enforced yet"), err)
		}
		return nil
	})
	return binding
}

func waitConfigMapCondition(t *testing.T, si *fsv1.StackInstance, status metav1.ConditionStatus, reason string) *fsv1.StackInstance {
	t.Helper()
	got := &fsv1.StackInstance{}
	testenv.Eventually(t, 60*time.Second, func() error {
		if err := k8s.Get(context.Background(), client.ObjectKeyFromObject(si), got); err != nil {
			return err
		}
		c := meta.FindStatusCondition(got.Status.Conditions, fsv1.ConditionConfigMap)
		if c == nil || c.Status != status || c.Reason != reason {
			return fmt.Errorf("ConfigMap condition %+v; want %s %s", c, status, reason)
		}
		return nil
	})
	return got
}
