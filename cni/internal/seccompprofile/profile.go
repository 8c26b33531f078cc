// Package seccompprofile makes the Localhost seccomp profile that injected dataplane containers
// run under, so they need no SYS_NICE. The runtimes' default profile (RuntimeDefault) allows
// get_mempolicy, set_mempolicy and mbind only to a container holding SYS_NICE, and a NUMA-aware
// EAL calls them to place each hugepage segment; SYS_NICE is outside Pod Security "baseline",
// a Localhost profile is not. The profile is the default profile, resolved for this node's
// architecture and kernel as a runtime resolves it for a container without capabilities, with
// those calls allowed whatever the capabilities. Nothing else is added.
package seccompprofile

import (
	"encoding/json"
	"fmt"
	"slices"

	mobyseccomp "github.com/moby/profiles/seccomp"
	specs "github.com/opencontainers/runtime-spec/specs-go"
)

// memoryPolicyCalls are the calls the default profile keeps behind SYS_NICE that DPDK's EAL
// makes (lib/eal/linux/eal_memory.c and eal_memalloc.c, through libnuma).
var memoryPolicyCalls = []string{"get_mempolicy", "set_mempolicy", "mbind"}

// Dataplane is the profile's JSON: the OCI runtime spec's LinuxSeccomp, which containerd reads
// as it is and CRI-O reads as the same fields of its own format.
func Dataplane() ([]byte, error) {
	def := mobyseccomp.DefaultProfile()
	found := false
	for _, rule := range def.Syscalls {
		if rule.Includes == nil || !slices.Equal(rule.Includes.Caps, []string{"CAP_SYS_NICE"}) {
			continue
		}
		if !containsAll(rule.Names, memoryPolicyCalls) {
			continue
		}
		// Only the capability condition goes: an architecture or kernel condition on the same
		// rule still applies.
		rule.Includes.Caps = nil
		found = true
	}
	if !found {
		// The library's default no longer gates these calls on SYS_NICE: a profile made
		// without knowing why would be a guess, so refuse instead.
		return nil, fmt.Errorf("the default seccomp profile has no rule allowing %v to CAP_SYS_NICE holders", memoryPolicyCalls)
	}
	raw, err := json.Marshal(def)
	if err != nil {
		return nil, err
	}
	// An empty bounding set: the dataplane drops every capability, and the ones a stack adds
	// back (IPC_LOCK, NET_ADMIN) gate no rule of the default profile.
	resolved, err := mobyseccomp.LoadProfile(string(raw), &specs.Spec{Process: &specs.Process{Capabilities: &specs.LinuxCapabilities{}}})
	if err != nil {
		return nil, fmt.Errorf("resolve the default seccomp profile: %w", err)
	}
	return json.MarshalIndent(resolved, "", "  ")
}

func containsAll(have, want []string) bool {
	for _, w := range want {
		if !slices.Contains(have, w) {
			return false
		}
	}
	return true
}
