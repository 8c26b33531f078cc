package render_test

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"sigs.k8s.io/yaml"

	"github.com/kube-fstack/kube-fstack/internal/manifest"
	"github.com/kube-fstack/kube-fstack/internal/render"
	"github.com/kube-fstack/kube-fstack/internal/test/fixtures"
	"github.com/kube-fstack/kube-fstack/internal/test/golden"
)

// Golden files: testdata/golden/<name>.facts.yaml names a sample StackInstance under
// config/samples and the pod facts to render it with; <name>.ini is the config.ini and <name>.eal
// the EAL argv per process plus the shim environment. UPDATE_GOLDEN=1 rewrites them.

const goldenDir = "testdata/golden"

type factsFile struct {
	Stack         string                       `json:"stack"`
	DataplaneCPUs string                       `json:"dataplaneCPUs"`
	AppCPUs       string                       `json:"appCPUs"`
	PCIResources  map[string][]string          `json:"pciResources"`
	Attachments   map[string]attachmentFixture `json:"attachments"`
}

type attachmentFixture struct {
	SocketPath string   `json:"socketPath"`
	MAC        string   `json:"mac"`
	IPs        []string `json:"ips"`
	Gateways   []string `json:"gateways"`
	Server     bool     `json:"server"`
}

func loadScenario(t testing.TB, factsPath string) (*render.Facts, []byte) {
	t.Helper()
	raw, err := os.ReadFile(factsPath)
	if err != nil {
		t.Fatal(err)
	}
	var ff factsFile
	if err := yaml.UnmarshalStrict(raw, &ff); err != nil {
		t.Fatalf("%s: %v", factsPath, err)
	}
	f := &render.Facts{PCIResources: ff.PCIResources, Attachments: map[string]render.Attachment{}}
	if f.DataplaneCPUs, err = render.ParseCPUList(ff.DataplaneCPUs); err != nil {
		t.Fatal(err)
	}
	if f.AppCPUs, err = render.ParseCPUList(ff.AppCPUs); err != nil {
		t.Fatal(err)
	}
	for name, a := range ff.Attachments {
		f.Attachments[name] = render.Attachment{SocketPath: a.SocketPath, MAC: a.MAC, IPs: a.IPs, Gateways: a.Gateways, Server: a.Server}
	}
	return f, fixtures.MustRead(t, "samples/"+ff.Stack)
}

func TestGolden(t *testing.T) {
	scenarios, _ := filepath.Glob(filepath.Join(goldenDir, "*.facts.yaml"))
	if len(scenarios) < 6 {
		t.Fatalf("found %d golden scenarios in %s, want the 6 of the issue", len(scenarios), goldenDir)
	}
	for _, sc := range scenarios {
		name := strings.TrimSuffix(filepath.Base(sc), ".facts.yaml")
		t.Run(name, func(t *testing.T) {
			facts, stack := loadScenario(t, sc)
			sis, err := manifest.StackInstances(stack)
			if err != nil {
				t.Fatal(err)
			}
			spec, res, err := render.RenderDefaulted(&sis[0].Spec, facts)
			if err != nil {
				t.Fatalf("render: %v", err)
			}
			golden.Compare(t, filepath.Join(goldenDir, name+".ini"), res.Config)
			golden.Compare(t, filepath.Join(goldenDir, name+".eal"), ealText(res))
			// The golden itself, read back with F-Stack's rules, must say what the spec says.
			golden, err := os.ReadFile(filepath.Join(goldenDir, name+".ini"))
			if err != nil {
				t.Fatal(err)
			}
			assertConforms(t, spec, facts, golden, res)
		})
	}
}

// TestNoStaleGolden fails when a golden output has no scenario behind it.
func TestNoStaleGolden(t *testing.T) {
	outs, _ := filepath.Glob(filepath.Join(goldenDir, "*"))
	for _, o := range outs {
		base := filepath.Base(o)
		if strings.HasSuffix(base, ".facts.yaml") {
			continue
		}
		stem := strings.TrimSuffix(strings.TrimSuffix(base, ".ini"), ".eal")
		if _, err := os.Stat(filepath.Join(goldenDir, stem+".facts.yaml")); err != nil {
			t.Errorf("%s is stale: no %s.facts.yaml renders it; delete it", o, stem)
		}
	}
}

func ealText(res *render.Result) []byte {
	var b bytes.Buffer
	for k, argv := range res.EAL {
		fmt.Fprintf(&b, "proc %d: %s\n", k, strings.Join(argv, " "))
	}
	for _, e := range res.FStackEnv {
		fmt.Fprintf(&b, "fstack env: %s=%s\n", e.Name, e.Value)
	}
	for _, e := range res.ShimEnv {
		fmt.Fprintf(&b, "launcher env: %s=%s\n", e.Name, e.Value)
	}
	if res.ShimEAL != nil {
		fmt.Fprintf(&b, "shim eal: %s\n", strings.Join(res.ShimEAL, " "))
	}
	return b.Bytes()
}
