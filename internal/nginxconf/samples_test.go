package nginxconf

import (
	"bufio"
	"bytes"
	"os"
	"path/filepath"
	"testing"

	corev1 "k8s.io/api/core/v1"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/yaml"
)

// The nginx.conf the samples ship passes the launcher's check for the stack each sample binds
// to: a sample a user applies must not be refused at start.
func TestSampleConfigsPassTheCheck(t *testing.T) {
	for workload, instances := range map[string]int{
		"workloads/nginx-vhost.yaml": 2, // vhost-user.yaml: processes 2
		"local-cluster/nginx.yaml":   1, // local-cluster/stack.yaml: processes 1
	} {
		conf := sampleConf(t, filepath.Join("..", "..", "config", "samples", workload))
		p := check(t, conf, Shim{Instances: instances, CPUs: []int{2, 3}})
		if len(p.Refusals) != 0 || len(p.Warnings) != 0 {
			t.Errorf("%s: refusals %q, warnings %q", workload, p.Refusals, p.Warnings)
		}
	}
}

// sampleConf is the nginx.conf of the first ConfigMap in a sample file.
func sampleConf(t *testing.T, path string) string {
	t.Helper()
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	r := utilyaml.NewYAMLReader(bufio.NewReader(bytes.NewReader(raw)))
	for {
		doc, err := r.Read()
		if err != nil {
			break
		}
		cm := &corev1.ConfigMap{}
		if yaml.Unmarshal(doc, cm) == nil && cm.Kind == "ConfigMap" && cm.Data["nginx.conf"] != "" {
			return cm.Data["nginx.conf"]
		}
	}
	t.Fatalf("%s has no ConfigMap with an nginx.conf", path)
	return ""
}
