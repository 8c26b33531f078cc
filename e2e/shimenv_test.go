package e2e

import (
	"regexp"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"

	"github.com/kube-fstack/kube-fstack/internal/podcontract"
)

// checkExecTakesNoShimContext: kubectl exec into the injected Nginx runs a shell, and bash in it
// opens an inet socket and is SIGKILLed, as the kubelet kills an exec probe at its timeout. Only
// the app's own processes load the shim, so bash holds no shim context. The stand-in shim's
// context slots stand in for F-Stack's: a process that loads the shim and opens an inet socket
// holds one, recorded with its pid (as the image's F-Stack records a context's holders, patch
// 0007). A SIGKILLed holder's context now comes back within a second, so counting the free ones
// after the kill proves nothing: bash lists the holders while it still has its socket open.
func checkExecTakesNoShimContext(t *testing.T, p *corev1.Pod) {
	t.Helper()
	slotFile := podcontract.DPDKRuntimeDir + "/rte/kube_fstack_standin_contexts_0"
	out, _ := env.Kubectl("exec", "-n", p.Namespace, p.Name, "-c", "nginx", "--", "sh", "-c",
		`echo "preload=[$`+podcontract.EnvPreload+`]"; bash -c 'exec 3<>/dev/tcp/127.0.0.1/80; echo "me=$$"; `+
			`od -v -An -tu4 -w16 -j32 -N512 `+slotFile+` | while read -r pid rest; do echo "holder=$pid"; done; kill -9 $$'; echo "bash ended with $?"`)
	if !strings.Contains(out, "bash ended with 137") {
		t.Fatalf("the exec'd bash was not SIGKILLed after opening its socket:\n%s", out)
	}
	if !strings.Contains(out, "preload=[]") {
		t.Errorf("a kubectl exec shell in the app container has the shim's %s:\n%s", podcontract.EnvPreload, out)
	}
	me := regexp.MustCompile(`(?m)^me=(\d+)$`).FindStringSubmatch(out)
	holders := regexp.MustCompile(`(?m)^holder=(\d+)$`).FindAllStringSubmatch(out, -1)
	if me == nil || len(holders) != 32 {
		t.Fatalf("bash did not list its pid and the 32 slots' holders of %s (od from coreutils in the image):\n%s", slotFile, out)
	}
	for _, h := range holders {
		if h[1] == me[1] {
			t.Fatalf("the kubectl exec shell (pid %s) holds a shim context: it loaded the shim:\n%s", me[1], out)
		}
	}
	t.Logf("the kubectl exec shell (pid %s) held no shim context; the exec said: %s", me[1], strings.Join(strings.Fields(out), " "))
}
