package facts

import (
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"golang.org/x/sys/unix"

	fsv1 "github.com/kube-fstack/kube-fstack/api/v1alpha1"
	"github.com/kube-fstack/kube-fstack/internal/podcontract"
	"github.com/kube-fstack/kube-fstack/internal/podcontract/snapshot"
	"github.com/kube-fstack/kube-fstack/internal/render"
	"github.com/kube-fstack/kube-fstack/internal/test/fixtures"
)

// Each spec is one a pod's editor could write into kubefstack.io/spec after admission; each is
// refused with a message, never a panic or an allocation sized by a number in it.
func TestDecodeSpecRefusesHostileSpecs(t *testing.T) {
	port := `"ports":[{"name":"data","device":{"pci":{"address":"0000:3b:00.0"}},"ipv4":{"address":"10.0.0.1/24","gateway":"10.0.0.2"}}]`
	cases := map[string]struct{ spec, want string }{
		"processes -5":         {`{"processes":-5,` + port + `}`, "spec.processes"},
		"processes 2147483647": {`{"processes":2147483647,` + port + `}`, "spec.processes"},
		"processes overflow":   {`{"processes":2147483648,` + port + `}`, "not valid JSON"},
		"repeated field":       {`{"processes":1,"processes":64,` + port + `}`, `duplicate field "processes"`},
		"trailing data":        {`{` + port + `} {}`, "not valid JSON"},
		"not an object":        {`[1,2,3]`, "not valid JSON"},
		"duplicate port names": {`{"ports":[{"name":"a","device":{"pci":{"address":"0000:3b:00.0"}},"ipv4":{"address":"10.0.0.1/24","gateway":"10.0.0.2"}},{"name":"a","device":{"pci":{"address":"0000:3b:00.1"}},"ipv4":{"address":"10.0.1.1/24","gateway":"10.0.1.2"}}]}`, "spec.ports[1]: Duplicate value"},
		"bad page size":        {`{"dataplane":{"hugePages":{"pageSize":"3Mi"}},` + port + `}`, "spec.dataplane.hugePages.pageSize"},
		"deep nesting":         {strings.Repeat(`{"dpdk":`, 5000) + strings.Repeat(`}`, 5000), "not valid JSON"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			_, err := DecodeSpec([]byte(tc.spec))
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("want an error containing %q, got %v", tc.want, err)
			}
		})
	}
}

// A field this supervisor does not know (a newer operator's default) is ignored, never mapped by
// case folding onto a field it does know.
func TestDecodeSpecIgnoresUnknownFields(t *testing.T) {
	spec, err := DecodeSpec([]byte(`{"processes":2,"futureKnob":{"x":1},"ports":[{"name":"data","device":{"pci":{"address":"0000:3b:00.0"}},"ipv4":{"address":"10.0.0.1/24","gateway":"10.0.0.2"}}]}`))
	if err != nil || spec.Defaulted().Processes != 2 {
		t.Fatalf("want the spec with 2 processes, got %+v, %v", spec, err)
	}
	spec, err = DecodeSpec([]byte(`{"Processes":-5,"ports":[{"name":"data","device":{"pci":{"address":"0000:3b:00.0"}},"ipv4":{"address":"10.0.0.1/24","gateway":"10.0.0.2"}}]}`))
	if err != nil || spec.Defaulted().Processes != 1 {
		t.Fatalf("a case-folded \"Processes\" must be ignored, not read as processes: got %+v, %v", spec, err)
	}
}

func TestLoadSpecBoundsTheFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "spec")
	mustDo(t, os.WriteFile(path, []byte(`{"ports":[],"x":"`+strings.Repeat("a", podcontract.MaxSpecSnapshot)+`"}`), 0o644))
	_, err := LoadSpec(path)
	if !errors.Is(err, snapshot.ErrTooLarge) {
		t.Fatalf("want snapshot.ErrTooLarge, got %v", err)
	}
}

func TestLoadSpecNamesTheFieldPath(t *testing.T) {
	h := newHarness(t, vhostSpec(2))
	mustDo(t, os.WriteFile(h.paths.SpecFile, []byte(`{"processes":-5,"ports":[{"name":"data","device":{"vhostUser":{}},"ipv4":{"from":"Attachment"}}]}`), 0o644))
	_, err := LoadSpec(h.paths.SpecFile)
	var ve *render.ValidationError
	if !errors.As(err, &ve) || ve.Errs[0].Field != "spec.processes" || !strings.Contains(err.Error(), "kubefstack.io/spec") {
		t.Fatalf("want a ValidationError at spec.processes naming the annotation, got %v", err)
	}
}

// FuzzDecodeSpec: whatever the annotation holds, the supervisor's path through it (decode,
// gather the pod's facts, render) ends in a spec that meets every CRD bound or in an error.
func FuzzDecodeSpec(f *testing.F) {
	for _, seed := range sampleSpecs(f) {
		f.Add(seed)
	}
	f.Add([]byte(`{"processes":-5,"ports":[{"name":"a","device":{"vhostUser":{}},"ipv4":{"from":"Attachment"}}]}`))
	f.Add([]byte(`{"processes":64,"ports":[{"name":"a","processes":[63,0],"device":{"pci":{"resource":"x/y"}},"vlans":[]}]}`))
	f.Add([]byte(`{"dpdk":{"noHuge":true},"freebsd":{"boot":{"a":"1"}},"ports":null}`))
	fs := &FactSource{
		Paths:     Paths{PodSocketDir: "/nonexistent/kube-fstack-fuzz", HugePagesDir: "/nonexistent"},
		Affinity:  func() ([]int, error) { return []int{2, 3, 4, 5}, nil },
		LookupEnv: func(string) (string, bool) { return "0000:3b:02.0,0000:3b:02.1", true },
		Statfs: func(_ string, st *unix.Statfs_t) error {
			st.Type, st.Bsize = hugetlbfsMagic, 2<<20
			return nil
		},
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		spec, err := DecodeSpec(data)
		if err != nil {
			if err.Error() == "" {
				t.Fatal("an error without a message")
			}
			return
		}
		// What the injector would snapshot of it must be accepted again.
		if _, errs := render.Prepare(spec.Defaulted()); len(errs) > 0 {
			t.Fatalf("the defaulted spec DecodeSpec returned is refused: %v", errs)
		}
		_, _ = fs.Gather(spec)
		_, _ = render.Render(spec, render.PlaceholderFacts(spec))
	})
}

// vhostSpec is a spec with one vhost-user port on attachment net1, addressed by its IPAM, and
// no shim.
func vhostSpec(processes int32) *fsv1.StackInstanceSpec {
	return &fixtures.StackInstance("vhost", fixtures.WithProcesses(processes),
		fixtures.WithVhostPort("data", "net1", processes), fixtures.WithShim(false)).Spec
}

// sampleSpecs are the specs of config/samples as the injector writes them into the annotation.
func sampleSpecs(tb testing.TB) [][]byte {
	var out [][]byte
	for _, si := range fixtures.Samples(tb) {
		raw, err := json.Marshal(&si.Spec)
		if err != nil {
			tb.Fatal(err)
		}
		out = append(out, raw)
	}
	return out
}

func TestSamplesDecode(t *testing.T) {
	for _, raw := range sampleSpecs(t) {
		if _, err := DecodeSpec(raw); err != nil {
			t.Errorf("a sample the API server accepts is refused: %v\n%s", err, raw)
		}
	}
}

// The spec's API version (kubefstack.io/spec-version, the file spec-version beside the spec) is
// read before the spec: v1alpha1 and a pod from before versions were written (no file, an empty
// one) load; a version this image does not know and an oversized one are refused, naming the
// annotation, the version and what to do, before the spec is decoded.
func TestLoadSpecChecksTheVersionFirst(t *testing.T) {
	spec, err := json.Marshal(checked(t, fixtures.Stacks(t)["vhost-user"].Spec.DeepCopy()).Defaulted())
	if err != nil {
		t.Fatal(err)
	}
	load := func(t *testing.T, version *string, specData []byte) error {
		dir := t.TempDir()
		if err := os.WriteFile(filepath.Join(dir, "spec"), specData, 0o644); err != nil {
			t.Fatal(err)
		}
		if version != nil {
			if err := os.WriteFile(filepath.Join(dir, "spec-version"), []byte(*version), 0o644); err != nil {
				t.Fatal(err)
			}
		}
		_, err := LoadSpec(filepath.Join(dir, "spec"))
		return err
	}
	str := func(s string) *string { return &s }
	for name, v := range map[string]*string{"no file": nil, "empty": str(""), "v1alpha1": str("kubefstack.io/v1alpha1"),
		"v1alpha1 with a newline": str("kubefstack.io/v1alpha1\n")} {
		if err := load(t, v, spec); err != nil {
			t.Errorf("%s: %v", name, err)
		}
	}
	for _, tc := range []struct {
		name, version string
		want          []string
	}{
		{"unknown version", "kubefstack.io/v1beta1", []string{"kubefstack.io/spec-version annotation", `"kubefstack.io/v1beta1"`,
			"reads kubefstack.io/v1alpha1", "spec.dataplane.image", "re-create the pod"}},
		{"another group", "example.com/v1alpha1", []string{`"example.com/v1alpha1"`, "re-create the pod"}},
		{"oversized", strings.Repeat("v", 300), []string{"kubefstack.io/spec-version annotation", "more than 256 bytes", "re-create the pod"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			// The spec is not even JSON: a refusal that names the version shows it came first.
			err := load(t, &tc.version, []byte("not json"))
			if err == nil {
				t.Fatal("loaded")
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("%v does not say %q", err, w)
				}
			}
		})
	}
}
