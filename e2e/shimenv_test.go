package e2e

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/kube-fstack/kube-fstack/e2e/framework"
	"github.com/kube-fstack/kube-fstack/internal/podcontract"
	"github.com/kube-fstack/kube-fstack/internal/shimctx"
)

// checkExecTakesNoShimContext: kubectl exec into the injected Nginx runs a shell, and bash in it
// opens an inet socket and is SIGKILLed, as the kubelet kills an exec probe at its timeout. Only
// the app's own processes load the shim, so the shim's free contexts are what they were. The
// stand-in shim's context slots stand in for F-Stack's: a process that loads the shim and opens
// an inet socket holds one, and SIGKILL leaks it, as with F-Stack (docs/fstack-rules.md §5).
func checkExecTakesNoShimContext(t *testing.T, p *corev1.Pod) {
	t.Helper()
	before := freeContexts(t, p, shimctx.Now())
	out, _ := env.Kubectl("exec", "-n", p.Namespace, p.Name, "-c", "nginx", "--", "sh", "-c",
		`echo "preload=[$`+podcontract.EnvPreload+`]"; bash -c 'exec 3<>/dev/tcp/127.0.0.1/80; kill -9 $$'; echo "bash ended with $?"`)
	if !strings.Contains(out, "bash ended with 137") {
		t.Fatalf("the exec'd bash was not SIGKILLed after opening its socket:\n%s", out)
	}
	if !strings.Contains(out, "preload=[]") {
		t.Errorf("a kubectl exec shell in the app container has the shim's %s:\n%s", podcontract.EnvPreload, out)
	}
	if after := freeContexts(t, p, shimctx.Now()); after != before {
		t.Fatalf("%d shim contexts free after a SIGKILLed kubectl exec process opened an inet socket, %d before: it loaded the shim:\n%s", after, before, out)
	}
	t.Logf("%d shim contexts free before and after kubectl exec; the exec said: %s", before, strings.Join(strings.Fields(out), " "))
}

// freeContexts sums the free shim contexts of the supervisor's first reading that began after
// since (a reading lags the processes it counts by the reading interval).
func freeContexts(t *testing.T, p *corev1.Pod, since int64) int {
	t.Helper()
	var st shimctx.State
	var last string
	err := framework.Poll("a fresh reading of the shim contexts", time.Minute, 200*time.Millisecond, func() (bool, string, error) {
		raw, err := env.Kubectl("exec", "-n", p.Namespace, p.Name, "-c", podcontract.DataplaneContainer, "--",
			"cat", podcontract.ShimDir+"/"+shimctx.StateFile)
		last = raw
		if err != nil || json.Unmarshal([]byte(raw), &st) != nil {
			return false, fmt.Sprintf("%v: %s", err, raw), nil
		}
		return st.ReadAt > since && st.Error == "" && len(st.Instances) > 0, raw, nil
	})
	if err != nil {
		t.Fatalf("%v (last: %s)", err, last)
	}
	free := 0
	for _, in := range st.Instances {
		free += in.Free
	}
	return free
}
