package cli

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	kjson "k8s.io/apimachinery/pkg/util/json"
	"sigs.k8s.io/yaml"

	"github.com/kube-fstack/kube-fstack/internal/render"
	"github.com/kube-fstack/kube-fstack/internal/test/fixtures"
)

// TestRenderFlagsFailAsTheDataplane: each pod fact the CLI takes, given a value the dataplane
// refuses, fails the render with the message of the function the dataplane's supervisor checks
// that fact with (dataplane-image/internal/supervisor/facts.go calls the same ones on the
// affinity and cgroup cpuset, PCIDEVICE_<RESOURCE> and the CNI plugin's device info).
func TestRenderFlagsFailAsTheDataplane(t *testing.T) {
	msg := func(err error) string {
		if err == nil {
			t.Fatal("the dataplane's check accepts the bad value")
		}
		return err.Error()
	}
	_, badList := render.ParseCPUList("8-a")
	_, badBDF := render.ParsePCIDevices("5e:02")
	cases := map[string]struct {
		stack string
		args  []string
		want  string
	}{
		"--cpus not a list":   {"vhost-user.yaml", []string{"--cpus", "8-a"}, msg(badList)},
		"--cpus too few":      {"vhost-user.yaml", []string{"--cpus", "3"}, msg(render.CheckDataplaneCPUs([]int{3}, 2, 1))},
		"--pci not a PCI BDF": {"sriov.yaml", []string{"--pci", "intel.com/sriov_dpdk=5e:02"}, msg(badBDF)},
		"--vhost no path":     {"vhost-user.yaml", []string{"--vhost", "data="}, "devinfo: vhost-user.path is missing"},
		"--addr no prefix": {"sriov.yaml", []string{"--addr", "vf=10.1.2.3,10.1.2.1"},
			msg(render.CheckAttachmentAddrs([]string{"10.1.2.3"}, nil))},
		"--addr bad gateway": {"sriov.yaml", []string{"--addr", "vf=10.1.2.3/24,10.1.2.x"},
			msg(render.CheckAttachmentAddrs(nil, []string{"10.1.2.x"}))},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			_, errOut, code := run(t, append([]string{"render", "-f", sample(t, tc.stack)}, tc.args...)...)
			if code == 0 {
				t.Fatal("rendered despite the bad fact")
			}
			if !strings.Contains(errOut, tc.want) {
				t.Errorf("stderr lacks the dataplane's message %q:\n%s", tc.want, errOut)
			}
		})
	}
}

// TestRenderRefusesWhatTheCRDRefuses: a manifest the API server refuses (by a bound, a pattern,
// a CEL rule of the CRD, or a value the Go types would drop) is refused offline by render and
// inject with the API server's own paths and messages: the CRD's defaulting and validation, run
// by kube-apiserver's libraries.
func TestRenderRefusesWhatTheCRDRefuses(t *testing.T) {
	adm := fixtures.CRD(t)
	for name, extra := range map[string]string{
		"bound":                      "  dpdk: {channels: 33}\n",
		"pattern":                    "  dpdk: {filePrefix: 'a b'}\n",
		"CEL rule":                   "  shim: {polling: true}\n",
		"a zero the Go types drop":   "  fstackVersion: ''\n",
		"a zero omitempty would eat": "  dpdk: {channels: 0}\n",
	} {
		t.Run(name, func(t *testing.T) {
			base := string(fixtures.MustRead(t, "samples/vhost-user.yaml"))
			doc := strings.Replace(base, "spec:\n", "spec:\n"+extra, 1)
			file := filepath.Join(t.TempDir(), "stack.yaml")
			if err := os.WriteFile(file, []byte(doc), 0o600); err != nil {
				t.Fatal(err)
			}
			js, err := yaml.YAMLToJSON([]byte(doc))
			if err != nil {
				t.Fatal(err)
			}
			var obj map[string]any
			if err := kjson.Unmarshal(js, &obj); err != nil {
				t.Fatal(err)
			}
			want := adm.Admit(obj)
			if len(want) == 0 {
				t.Fatalf("the API server accepts the case:\n%s", doc)
			}
			for _, cmd := range [][]string{{"render", "-f", file}, {"inject", "--stack", file, "-f", sample(t, "workloads/nginx-vhost.yaml")}} {
				_, errOut, code := run(t, cmd...)
				if code == 0 {
					t.Fatalf("%s accepted what the API server refuses (%v)", cmd[0], want.ToAggregate())
				}
				for _, e := range want {
					if !strings.Contains(errOut, e.Error()) {
						t.Errorf("%s: stderr lacks the API server's %q:\n%s", cmd[0], e.Error(), errOut)
					}
				}
			}
		})
	}
}

// TestRenderRefusesUnknownFieldsWithTheirPath: field names are case-sensitive offline as in the
// API server (ipV4 is not ipv4), and every field the CRD does not declare is refused with its
// full path and the declared name it most likely meant, by render and inject alike.
func TestRenderRefusesUnknownFieldsWithTheirPath(t *testing.T) {
	base := string(fixtures.MustRead(t, "samples/vhost-user.yaml"))
	cases := map[string]struct {
		edit func(string) string
		want []string
	}{
		"case of a key": {func(s string) string { return strings.Replace(s, "    ipv4:", "    ipV4:", 1) },
			[]string{`spec.ports[0].ipV4: unknown field`, `did you mean "ipv4"? (field names are case-sensitive)`}},
		"typo": {func(s string) string { return strings.Replace(s, "  processes: 2", "  proceses: 2", 1) },
			[]string{`spec.proceses: unknown field`, `did you mean "processes"?`}},
		"nothing close": {func(s string) string { return strings.Replace(s, "spec:\n", "spec:\n  zzzzzzzz: 1\n", 1) },
			[]string{"spec.zzzzzzzz: unknown field (the CRD declares no such field; the API server refuses it)\n"}},
		"metadata": {func(s string) string {
			return strings.Replace(s, "  name: vhost-user", "  name: vhost-user\n  lables: {a: b}", 1)
		},
			[]string{"metadata.lables: unknown field"}},
		"two at once": {func(s string) string {
			return strings.Replace(strings.Replace(s, "    ipv4:", "    ipV4:", 1), "  processes: 2", "  proceses: 2", 1)
		}, []string{"spec.ports[0].ipV4: unknown field", "spec.proceses: unknown field"}},
		"a key twice": {func(s string) string {
			return strings.Replace(s, "  processes: 2", "  processes: 2\n  processes: 3", 1)
		},
			[]string{`"processes" already set`}},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			file := filepath.Join(t.TempDir(), "stack.yaml")
			if err := os.WriteFile(file, []byte(tc.edit(base)), 0o600); err != nil {
				t.Fatal(err)
			}
			for _, cmd := range [][]string{{"render", "-f", file}, {"inject", "--stack", file, "-f", sample(t, "workloads/nginx-vhost.yaml")}} {
				out, errOut, code := run(t, cmd...)
				if code == 0 || out != "" {
					t.Fatalf("%s accepted it (exit %d):\n%s", cmd[0], code, out)
				}
				for _, w := range tc.want {
					if !strings.Contains(errOut, w) {
						t.Errorf("%s: stderr lacks %q:\n%s", cmd[0], w, errOut)
					}
				}
				if strings.Contains(errOut, "json: unknown field") {
					t.Errorf("%s: the decoder's message without the path:\n%s", cmd[0], errOut)
				}
			}
		})
	}
}

// TestRenderNamesTheEntryOfACrossFieldRule: the CRD's rules that relate a list's entries to
// spec.ports name the entry and its value offline, as the API server does.
func TestRenderNamesTheEntryOfACrossFieldRule(t *testing.T) {
	base := string(fixtures.MustRead(t, "samples/vhost-user.yaml"))
	doc := strings.Replace(base, "spec:\n", "spec:\n  vlans: [{id: 10, port: data}, {id: 11, port: dta}]\n", 1)
	file := filepath.Join(t.TempDir(), "stack.yaml")
	if err := os.WriteFile(file, []byte(doc), 0o600); err != nil {
		t.Fatal(err)
	}
	_, errOut, code := run(t, "render", "-f", file)
	if want := `spec.vlans[1].port: "dta" names no entry of spec.ports`; code == 0 || !strings.Contains(errOut, want) {
		t.Errorf("exit %d, stderr lacks %q:\n%s", code, want, errOut)
	}
}
