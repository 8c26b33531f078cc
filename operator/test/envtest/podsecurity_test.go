package envtest

import (
	"context"
	"testing"

	corev1 "k8s.io/api/core/v1"

	"github.com/kube-fstack/kube-fstack/internal/podcontract"
	"github.com/kube-fstack/kube-fstack/internal/test/fixtures"
	"github.com/kube-fstack/kube-fstack/internal/test/testenv"
)

// In a namespace that enforces Pod Security "baseline", the API server's own PodSecurity plugin
// admits an injected vhost-user pod: no hostPath, no capability, a Localhost seccomp profile.
// A stack that needs more (PCI ports: IPC_LOCK) is refused by the injector, saying what needs
// it and what to do, instead of by PodSecurity naming fields the user never wrote.
func TestInjectedPodsMeetPodSecurityBaseline(t *testing.T) {
	ctx := context.Background()
	for _, name := range []string{"vhost-user", "nginx-shim"} {
		testenv.CreateIfAbsent(t, k8s, fixtures.Stack(t, name, fixtures.InNamespace(baselineNS, name)))
	}

	vhost := fixtures.LoadPod(t, "nginx-vhost", fixtures.WithNamespace(baselineNS), fixtures.WithName("baseline-vhost"))
	if err := k8s.Create(ctx, vhost); err != nil {
		t.Fatalf("the injected vhost-user pod was refused in a baseline namespace: %v", err)
	}
	// It holds the sample's static address, which one pod of the cluster may hold: bound, its
	// claim goes with it.
	testenv.DeleteAtEnd(t, k8s, vhost)
	waitBound(t, claimKey("10.99.0.10"), vhost)
	dp := containerNamed(t, vhost, podcontract.DataplaneContainer)
	sc := dp.SecurityContext
	if sc == nil || sc.Capabilities == nil || len(sc.Capabilities.Add) != 0 {
		t.Errorf("dataplane capabilities: got %+v, want every one dropped and none added", sc)
	}
	if sc == nil || sc.SeccompProfile == nil || sc.SeccompProfile.Type != corev1.SeccompProfileTypeLocalhost ||
		sc.SeccompProfile.LocalhostProfile == nil || *sc.SeccompProfile.LocalhostProfile != podcontract.SeccompLocalhostProfile {
		t.Errorf("dataplane seccomp profile: got %+v, want Localhost %s", sc, podcontract.SeccompLocalhostProfile)
	}
	for _, v := range vhost.Spec.Volumes {
		if v.HostPath != nil {
			t.Errorf("volume %s is a hostPath (%s): baseline forbids it", v.Name, v.HostPath.Path)
		}
	}

	pci := fixtures.LoadPod(t, "nginx-pci", fixtures.WithNamespace(baselineNS), fixtures.WithName("baseline-pci"))
	wantErr(t, k8s.Create(ctx, pci), `namespace "tenant" enforces Pod Security "baseline"`,
		"IPC_LOCK for its PCI ports", "pod-security.kubernetes.io/enforce=privileged")
}

func containerNamed(t *testing.T, pod *corev1.Pod, name string) *corev1.Container {
	t.Helper()
	for _, list := range [][]corev1.Container{pod.Spec.InitContainers, pod.Spec.Containers} {
		for i := range list {
			if list[i].Name == name {
				return &list[i]
			}
		}
	}
	t.Fatalf("pod %s has no container %s", pod.Name, name)
	return nil
}
