package seccompprofile

import (
	"encoding/json"
	"slices"
	"testing"

	mobyseccomp "github.com/moby/profiles/seccomp"
	specs "github.com/opencontainers/runtime-spec/specs-go"
)

// allowed is every call a resolved profile allows without an argument condition.
func allowed(p *specs.LinuxSeccomp) map[string]bool {
	out := map[string]bool{}
	for _, r := range p.Syscalls {
		if r.Action == specs.ActAllow && len(r.Args) == 0 {
			for _, n := range r.Names {
				out[n] = true
			}
		}
	}
	return out
}

// The profile is the runtime's default for a container without capabilities plus the NUMA
// memory-policy calls, and nothing else: no call the default keeps behind another capability
// (mount, reboot, bpf, ...) comes with them.
func TestDataplaneIsTheDefaultPlusMemoryPolicy(t *testing.T) {
	raw, err := Dataplane()
	if err != nil {
		t.Fatal(err)
	}
	var got specs.LinuxSeccomp
	if err := json.Unmarshal(raw, &got); err != nil {
		t.Fatalf("the profile is not the OCI LinuxSeccomp JSON the runtimes read: %v", err)
	}
	base, err := mobyseccomp.GetDefaultProfile(&specs.Spec{Process: &specs.Process{Capabilities: &specs.LinuxCapabilities{}}})
	if err != nil {
		t.Fatal(err)
	}
	if got.DefaultAction != specs.ActErrno || got.DefaultAction != base.DefaultAction {
		t.Errorf("default action %q, want the default profile's %q", got.DefaultAction, base.DefaultAction)
	}
	if !slices.Equal(got.Architectures, base.Architectures) || len(got.Architectures) == 0 {
		t.Errorf("architectures %v, want the default's %v", got.Architectures, base.Architectures)
	}
	have, def := allowed(&got), allowed(base)
	assertAddsOnlyMemoryPolicy(t, have, def)
	for _, n := range []string{"mount", "reboot", "bpf", "init_module", "kexec_load", "swapon"} {
		if have[n] {
			t.Errorf("%s is allowed: the default keeps it behind a capability the dataplane does not have", n)
		}
	}
}

// assertAddsOnlyMemoryPolicy asserts that have allows every call def does, and beyond them
// exactly the memory-policy calls.
func assertAddsOnlyMemoryPolicy(t *testing.T, have, def map[string]bool) {
	t.Helper()
	var added []string
	for n := range have {
		if !def[n] {
			added = append(added, n)
		}
	}
	for n := range def {
		if !have[n] {
			t.Errorf("%s is allowed by the default profile but not by the dataplane's", n)
		}
	}
	slices.Sort(added)
	for _, n := range memoryPolicyCalls {
		if !slices.Contains(added, n) {
			t.Errorf("%s not added: EAL's NUMA placement fails without it", n)
		}
	}
	for _, n := range added {
		if !slices.Contains(memoryPolicyCalls, n) && n != "set_mempolicy_home_node" {
			t.Errorf("%s added beyond the memory-policy calls", n)
		}
	}
}
