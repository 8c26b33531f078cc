package nginxconf

import (
	"testing"

	"github.com/kube-fstack/kube-fstack/internal/fixtures"
)

// The nginx.conf the samples ship passes the launcher's check for the stack each sample binds
// to: a sample a user applies must not be refused at start.
func TestSampleConfigsPassTheCheck(t *testing.T) {
	for workload, instances := range map[string]int{
		"workloads/nginx-vhost.yaml": 2, // vhost-user.yaml: processes 2
		"local-cluster/nginx.yaml":   1, // local-cluster/stack.yaml: processes 1
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
