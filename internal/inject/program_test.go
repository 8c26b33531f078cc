package inject

import (
	"strings"
	"testing"

	"github.com/kube-fstack/kube-fstack/internal/podcontract"
	"github.com/kube-fstack/kube-fstack/internal/test/fixtures"
)

// A program container (spec.program) becomes the dataplane and gets its privileges, so its
// image passes the dataplane image allow-list at creation and on every later image change.
func TestProgramContainerImageAllowList(t *testing.T) {
	stacks := fixtures.Stacks(t)
	cfg := testConfig()
	cfg.AllowedImages = []string{"registry.example/kube-fstack/"}
	pod := fixtures.LoadPod(t, "native-helloworld")
	pod.Spec.Containers[0].Image = "evil.example/helloworld:1"
	_, _, err := Inject(pod, stacks["native"], cfg)
	if err == nil || !strings.Contains(err.Error(), "spec.containers[0].image") {
		t.Fatalf("an image outside the allow-list must be refused at spec.containers[0].image, got %v", err)
	}
	pod.Spec.Containers[0].Image = "registry.example/kube-fstack/helloworld:1"
	old, _, err := Inject(pod, stacks["native"], cfg)
	if err != nil {
		t.Fatal(err)
	}
	if got := old.Spec.Containers[0].Name; got != podcontract.DataplaneContainer {
		t.Fatalf("the program container is named %q, want %q", got, podcontract.DataplaneContainer)
	}
	changed := old.DeepCopy()
	changed.Spec.Containers[0].Image = "evil.example/helloworld:2"
	errs := CheckPodUpdate(old, changed, cfg)
	if len(errs) != 1 || errs[0].Field != "spec.containers[0].image" {
		t.Fatalf("kubectl set image on the program's dataplane: got %v, want one error at spec.containers[0].image", errs)
	}
}

// The program container named in spec.program.container becomes the dataplane; any other
// container stays as it was, with no shim.
func TestProgramLeavesOtherContainers(t *testing.T) {
	pod := fixtures.LoadPod(t, "native-nginx")
	out, _, err := Inject(pod, fixtures.Stacks(t)["native-nginx"], testConfig())
	if err != nil {
		t.Fatal(err)
	}
	if len(out.Spec.InitContainers) != 0 {
		t.Errorf("a program pod gets no injected sidecar: %v", out.Spec.InitContainers)
	}
	if got := out.Spec.Containers[0]; got.Name != "logs" || len(got.Env) != 0 || len(got.VolumeMounts) != 0 || len(got.Command) != 0 {
		t.Errorf("the log shipper was changed: %+v", got)
	}
	dp := out.Spec.Containers[1]
	want := []string{NativeFlag + "=Nginx", "--", "/usr/local/nginx_fstack/sbin/nginx", "-c", "/etc/nginx/fstack/nginx.conf"}
	if dp.Command != nil || strings.Join(dp.Args, " ") != strings.Join(want, " ") {
		t.Errorf("the program runs under the image's entrypoint with %q, got command %q args %q", want, dp.Command, dp.Args)
	}
	if dp.Lifecycle == nil || dp.Lifecycle.PostStart != nil || dp.Lifecycle.PreStop.Sleep == nil || dp.RestartPolicy != nil {
		t.Errorf("a program's dataplane waits for no shim placement, is a regular container, and drains: %+v %+v", dp.Lifecycle, dp.RestartPolicy)
	}
	st, err := ReadStatus(out)
	if err != nil || st.Program == nil || st.Program.Container != "web" || len(st.ShimContainers) != 0 {
		t.Fatalf("status annotation: %+v, %v", st, err)
	}
}
