package nginxconf

import (
	"slices"
	"testing"

	"github.com/kube-fstack/kube-fstack/internal/test/fixtures"
)

// The nginx.conf the samples ship passes the launcher's check for the stack each sample binds
// to: a sample a user applies must not be refused at start.
func TestSampleConfigsPassTheCheck(t *testing.T) {
	for workload, instances := range map[string]int{
		"workloads/nginx-vhost.yaml": 2, // vhost-user.yaml: processes 2
		"local-cluster/nginx.yaml":   1, // local-cluster/stack.yaml: processes 1
		"quickstart/nginx.yaml":      1, // quickstart/stack.yaml: processes 1
	} {
		conf := sampleConf(t, "samples/"+workload)
		p := check(t, conf, Shim{Instances: instances, CPUs: []int{2, 3}})
		if len(p.Refusals) != 0 || len(p.Warnings) != 0 {
			t.Errorf("%s: refusals %q, warnings %q", workload, p.Refusals, p.Warnings)
		}
	}
}

// sampleConf is the nginx.conf of the first ConfigMap in a sample file.
func sampleConf(t *testing.T, name string) string {
	t.Helper()
	conf, ok := fixtures.LoadWorkload(t, name).NginxConf()
	if !ok {
		t.Fatalf("%s has no ConfigMap with an nginx.conf", name)
	}
	return conf
}

// The F-Stack Nginx sample's nginx.conf passes the supervisor's check for the stack it binds to
// (config/samples/fstack-nginx.yaml: processes 2) with nothing refused: only what the stack
// decides is added.
func TestFStackNginxSamplePassesTheCheck(t *testing.T) {
	conf := sampleConf(t, "samples/workloads/fstack-nginx.yaml")
	main, err := ParseString("/etc/nginx/fstack/nginx.conf", conf)
	if err != nil {
		t.Fatal(err)
	}
	p := CheckFStack(main, FStack{Processes: 2, Config: "/etc/f-stack/config.ini", ConfDir: "/etc/nginx/fstack", CPUs: []int{2, 3}})
	if len(p.Refusals) != 0 || len(p.Warnings) != 0 {
		t.Errorf("refusals %q, warnings %q", p.Refusals, p.Warnings)
	}
	if want := []string{"worker_processes 2;", "fstack_conf /etc/f-stack/config.ini;"}; !containsAll(p.Globals, want) {
		t.Errorf("added %q, want %q among them", p.Globals, want)
	}
}

func containsAll(got, want []string) bool {
	for _, w := range want {
		if !slices.Contains(got, w) {
			return false
		}
	}
	return true
}
