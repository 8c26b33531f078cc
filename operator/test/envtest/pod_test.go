package envtest

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	fsv1 "github.com/kube-fstack/kube-fstack/api/v1alpha1"
	"github.com/kube-fstack/kube-fstack/internal/inject"
	"github.com/kube-fstack/kube-fstack/internal/manifest"
	"github.com/kube-fstack/kube-fstack/internal/podcontract"
	"github.com/kube-fstack/kube-fstack/internal/test/fixtures"
	"github.com/kube-fstack/kube-fstack/internal/test/testenv"
)

// goldenDir holds the injector's goldens: what it makes of each fixture pod (the outputs of
// internal/inject's tests, which this suite holds the webhook to).
var goldenDir = filepath.Join(root, "internal", "inject", "testdata")

func readGolden(t *testing.T, name string) *corev1.Pod {
	t.Helper()
	pod, err := manifest.PodFile(filepath.Join(goldenDir, name))
	if err != nil {
		t.Fatal(err)
	}
	return pod
}

// serverDefaulted is what the API server stores for pod in the plain namespace, where no webhook
// runs: the golden with the server's defaults, to compare with what the webhook produced.
func serverDefaulted(t *testing.T, pod *corev1.Pod) *corev1.Pod {
	t.Helper()
	p := pod.DeepCopy()
	p.Namespace = plainNS
	if err := k8s.Create(context.Background(), p, client.DryRunAll); err != nil {
		t.Fatalf("dry-run create of the golden: %v", err)
	}
	return p
}

func comparable(p *corev1.Pod) any {
	return struct {
		Labels, Annotations map[string]string
		Spec                corev1.PodSpec
	}{p.Labels, p.Annotations, p.Spec}
}

// Pods created through the API server come back exactly as the injector's goldens say, and
// creating an already injected pod changes nothing.
func TestPodsInjectedLikeTheGoldens(t *testing.T) {
	ctx := context.Background()
	for _, name := range []string{"nginx-pci", "nginx-vhost", "nginx-sriov", "nginx-kni", "two-apps", "opt-out", "no-stack", "native-helloworld", "native-nginx"} {
		t.Run(name, func(t *testing.T) {
			in := fixtures.LoadPod(t, name)
			if s := inject.StackName(in); s != "" {
				testenv.CreateIfAbsent(t, k8s, stack(t, s, s))
			}
			golden := readGolden(t, name+".yaml.injected")
			want := serverDefaulted(t, golden)
			if err := k8s.Create(ctx, in); err != nil {
				t.Fatalf("create: %v", err)
			}
			testenv.DeleteAtEnd(t, k8s, in)
			if diff := cmp.Diff(comparable(want), comparable(in)); diff != "" {
				t.Fatalf("the webhook's pod differs from %s.yaml.injected (-golden +api):\n%s", name, diff)
			}
			// An injected pod serves its snapshot's addresses, which the first pod holds while it
			// lives: the re-submission comes once it is gone and its claims are released.
			if err := k8s.Delete(ctx, in, client.GracePeriodSeconds(0)); err != nil {
				t.Fatal(err)
			}
			again := golden.DeepCopy()
			again.Name += "-again"
			testenv.Eventually(t, 30*time.Second, func() error {
				return k8s.Create(ctx, again.DeepCopy())
			})
			if err := k8s.Get(ctx, client.ObjectKeyFromObject(again), again); err != nil {
				t.Fatal(err)
			}
			testenv.DeleteAtEnd(t, k8s, again)
			if diff := cmp.Diff(comparable(want), comparable(again)); diff != "" {
				t.Fatalf("re-submitting an injected pod changed it (-golden +api):\n%s", diff)
			}
		})
	}
}

// Namespaces that did not opt in, and the operator's own, never see the webhook's changes.
func TestPodsOutsideOptedInNamespacesUntouched(t *testing.T) {
	for _, ns := range []string{plainNS, operatorNS} {
		pod := fixtures.LoadPod(t, "nginx-vhost")
		pod.Namespace = ns
		want := pod.DeepCopy()
		if err := k8s.Create(context.Background(), pod); err != nil {
			t.Fatalf("%s: %v", ns, err)
		}
		if len(pod.Spec.InitContainers) != 0 || pod.Annotations[fsv1.StatusAnnotation] != "" ||
			!cmp.Equal(pod.Spec.Containers[0].Command, want.Spec.Containers[0].Command) {
			t.Fatalf("namespace %s: the pod was changed: %+v", ns, pod.Spec)
		}
	}
}

// Pods the injector cannot serve are refused with the reason and the field to fix.
func TestPodsRefusedWithReason(t *testing.T) {
	ctx := context.Background()
	testenv.CreateIfAbsent(t, k8s, stack(t, "nginx-shim", "nginx-shim"))
	missing := fixtures.LoadPod(t, "nginx-pci")
	missing.Name, missing.Labels[fsv1.StackLabel] = "names-missing-stack", "nope"
	wantErr(t, k8s.Create(ctx, missing), `StackInstance "nope" not found in namespace "web"`)

	noCommand := fixtures.LoadPod(t, "no-command")
	msg, err := os.ReadFile(filepath.Join(goldenDir, "no-command.yaml.err"))
	if err != nil {
		t.Fatal(err)
	}
	wantErr(t, k8s.Create(ctx, noCommand), "spec.containers[0].command", strings.TrimSpace(string(msg)))

	// A program linked with libfstack (spec.program) in a pod of two containers that does not
	// say which one runs it.
	testenv.CreateIfAbsent(t, k8s, stack(t, "native", "native"))
	wantErr(t, k8s.Create(ctx, fixtures.LoadPod(t, "native-two-containers")), "set spec.program.container to the one that runs it")
	// Its probe: the kubelet cannot reach F-Stack's sockets, and no probe agent serves a program.
	probed := fixtures.LoadPod(t, "native-helloworld")
	probed.Name = "native-probed"
	probed.Spec.Containers[0].LivenessProbe = &corev1.Probe{ProbeHandler: corev1.ProbeHandler{Exec: &corev1.ExecAction{Command: []string{"true"}}}}
	wantErr(t, k8s.Create(ctx, probed), "spec.containers[0].livenessProbe", "the program container's readiness and liveness are the supervisor's")
}

// The controller counts bound and ready pods and says when pods run an older config. No
// kubelet runs here: the test writes the dataplane's container status as kubelet would.
func TestStatusFollowsPods(t *testing.T) {
	ctx := context.Background()
	si := fixtures.Stack(t, "vhost-user", fixtures.InNamespace(optedInNS, "counted"), withPool(4)) // two pods
	testenv.CreateIfAbsent(t, k8s, si)
	var pods []*corev1.Pod
	for i := range 2 {
		pod := fixtures.LoadPod(t, "nginx-vhost")
		pod.Name, pod.Labels[fsv1.StackLabel] = fmt.Sprintf("counted-%d", i), si.Name
		if err := k8s.Create(ctx, pod); err != nil {
			t.Fatal(err)
		}
		pods = append(pods, pod)
	}
	waitStatus(t, si.Name, 2, 0, fsv1.ReasonPodsNotReady, "0 of 2 pods have a ready dataplane")
	// `kubectl get fsi` says the same: Ready is ready/bound pods, Status the Ready condition's reason.
	if cells := getColumns(t, optedInNS, si.Name); cells["Ready"] != "0/2" || cells["Status"] != fsv1.ReasonPodsNotReady || cells["Valid"] != "True" {
		t.Errorf("kubectl get columns %v", cells)
	}
	for _, pod := range pods {
		pod.Status.InitContainerStatuses = []corev1.ContainerStatus{{Name: podcontract.DataplaneContainer, Ready: true, Image: "x", ImageID: "x"}}
		if err := k8s.Status().Update(ctx, pod); err != nil {
			t.Fatal(err)
		}
	}
	waitStatus(t, si.Name, 2, 2, fsv1.ReasonAllPodsReady, "2 of 2 pods have a ready dataplane")

	cur := &fsv1.StackInstance{}
	if err := k8s.Get(ctx, types.NamespacedName{Namespace: optedInNS, Name: si.Name}, cur); err != nil {
		t.Fatal(err)
	}
	cur.Spec.DPDK.PktTxDelayMicroseconds = new(int32(20))
	if err := k8s.Update(ctx, cur); err != nil {
		t.Fatal(err)
	}
	waitStatus(t, si.Name, 2, 2, fsv1.ReasonOlderConfig, "2 of 2 pods run an older config")

	for _, pod := range pods {
		if err := k8s.Delete(ctx, pod, client.GracePeriodSeconds(0)); err != nil {
			t.Fatal(err)
		}
	}
	waitStatus(t, si.Name, 0, 0, fsv1.ReasonNoBoundPods, "no pod names this StackInstance")
}

func waitStatus(t *testing.T, name string, bound, ready int32, reason, message string) {
	t.Helper()
	testenv.Eventually(t, 20*time.Second, func() error {
		si := &fsv1.StackInstance{}
		if err := k8s.Get(context.Background(), types.NamespacedName{Namespace: optedInNS, Name: name}, si); err != nil {
			return err
		}
		c := meta.FindStatusCondition(si.Status.Conditions, fsv1.ConditionReady)
		if c == nil || si.Status.BoundPods != bound || si.Status.ReadyPods != ready || c.Reason != reason ||
			!strings.Contains(c.Message, message) || si.Status.ObservedGeneration != si.Generation {
			return fmt.Errorf("status bound=%d ready=%d generation=%d/%d Ready=%+v; want bound=%d ready=%d reason %s, %q",
				si.Status.BoundPods, si.Status.ReadyPods, si.Status.ObservedGeneration, si.Generation, c, bound, ready, reason, message)
		}
		return nil
	})
}
