package chart

import (
	"strings"
	"testing"
)

// TestSchemaRejects: values.schema.json refuses bad values before anything is rendered, and
// says which key and why.
func TestSchemaRejects(t *testing.T) {
	for _, tc := range []struct {
		name string
		set  []string
		want []string
	}{
		{"unknown cert mode", []string{"certs.mode=foo"}, []string{"certs", "mode", "operator", "cert-manager"}},
		{"unknown top-level key", []string{"operater.replicas=2"}, []string{"operater"}},
		{"unknown operator key", []string{"operator.replica=2"}, []string{"replica"}},
		{"negative replicas", []string{"operator.replicas=-1"}, []string{"replicas"}},
		{"relative socket root", []string{"vhostSocketRoot=run/vhost"}, []string{"vhostSocketRoot"}},
		{"pull policy", []string{"dataplane.image.pullPolicy=Sometimes"}, []string{"pullPolicy"}},
		{"image prefix with a space", []string{"dataplane.allowedImages[0]=a.example/x b.example/y"}, []string{"allowedImages"}},
		{"image prefixes not a list", []string{"dataplane.allowedImages=a.example/x"}, []string{"allowedImages"}},
		{"reserved CPUs not a CPU list", []string{"cni.nodeAgent.kubeletReservedCPUs=0x3"}, []string{"kubeletReservedCPUs"}},
	} {
		t.Run(tc.name, func(t *testing.T) { schemaRefuses(t, tc.set, tc.want) })
	}
}

// schemaRefuses renders the chart with set and fails unless helm refuses it with an error that
// names every part of want; extra are further helm template arguments.
func schemaRefuses(t *testing.T, set, want []string, extra ...string) {
	t.Helper()
	args := append([]string{"template", release, chartDir, "--namespace", namespace}, extra...)
	for _, s := range set {
		args = append(args, "--set", s)
	}
	_, stderr, err := helm(t, args...)
	if err == nil {
		t.Fatalf("helm template --set %v rendered; the schema should refuse it", set)
	}
	for _, w := range want {
		if !strings.Contains(stderr, w) {
			t.Errorf("the error does not name %q:\n%s", w, stderr)
		}
	}
}
