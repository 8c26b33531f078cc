package render

import (
	"encoding/json"
	"fmt"
	"sync/atomic"

	"k8s.io/apimachinery/pkg/util/validation/field"

	fsv1 "github.com/kube-fstack/kube-fstack/api/v1alpha1"
	"github.com/kube-fstack/kube-fstack/internal/crdwalk"
)

// defaultings counts schemaDefaults' JSON round trips, for the test that holds every path to one.
var defaultings atomic.Int64

// schemaDefaults returns a copy of in with the CRD's defaults applied and what the CRD refuses
// in it: its OpenAPI bounds (crdwalk) and its CEL rules (celRules).
func schemaDefaults(in *fsv1.StackInstanceSpec) (*fsv1.StackInstanceSpec, field.ErrorList) {
	defaultings.Add(1)
	sch, err := crdwalk.Load()
	if err != nil {
		return in.DeepCopy(), field.ErrorList{field.InternalError(field.NewPath("spec"), err)}
	}
	obj, err := toJSON(in)
	if err != nil {
		return in.DeepCopy(), field.ErrorList{field.InternalError(field.NewPath("spec"), err)}
	}
	sch.Default(obj)
	errs := sch.Validate(obj)
	s := &fsv1.StackInstanceSpec{}
	if err := fromJSON(obj, s); err != nil {
		// Only a value the schema refused can fail to decode (a default cannot): keep the input.
		return in.DeepCopy(), append(errs, field.InternalError(field.NewPath("spec"), err))
	}
	if len(errs) > 0 {
		return s, errs
	}
	return s, celRules(s)
}

func toJSON(s *fsv1.StackInstanceSpec) (map[string]any, error) {
	raw, err := json.Marshal(s)
	if err != nil {
		return nil, err
	}
	var obj map[string]any
	if err := json.Unmarshal(raw, &obj); err != nil {
		return nil, err
	}
	return obj, nil
}

func fromJSON(obj map[string]any, s *fsv1.StackInstanceSpec) error {
	raw, err := json.Marshal(obj)
	if err != nil {
		return err
	}
	if err := json.Unmarshal(raw, s); err != nil {
		return fmt.Errorf("spec with the CRD's defaults: %w", err)
	}
	return nil
}

// layerDefaults applies to s (a copy the CRD's defaults are in) the defaults the CRD's schema
// cannot state, each a function of something else: the profile's layer, the shim's (a program
// has none), a port's attachment (its name) and the hugepage size (the flavor and the devices).
func layerDefaults(s *fsv1.StackInstanceSpec) *fsv1.StackInstanceSpec {
	applyProfile(s)
	// Profiles set these two, so F-Stack's values come after the profile's.
	if s.DPDK.PktTxDelayMicroseconds == nil {
		s.DPDK.PktTxDelayMicroseconds = new(int32(100))
	}
	if s.RSSCheck != nil && s.RSSCheck.Enabled == nil {
		s.RSSCheck.Enabled = new(false)
	}
	for i := range s.Ports {
		if s.Ports[i].Attachment == "" {
			s.Ports[i].Attachment = s.Ports[i].Name
		}
	}
	if s.Program != nil {
		// A program linked with libfstack replaces the adapter the shim talks to; the shim's
		// build flags stay unset, so the snapshot keeps to the CRD's rule that a program has
		// no shim settings.
		s.Shim.Enabled = new(false)
	} else {
		for _, b := range []**bool{&s.Shim.Enabled, &s.Shim.KernelEvent, &s.Shim.MultiSC} {
			if *b == nil {
				*b = new(true)
			}
		}
	}
	if hp := &s.Dataplane.HugePages; hp.PageSize == "" {
		hp.PageSize = fsv1.HugePages2Mi
		// Unpatched F-Stack cannot use vhost-user with 2 MiB pages (at most 8 memory regions).
		if s.Dataplane.Flavor == fsv1.FlavorUpstream && HasVhostUser(s) {
			hp.PageSize = fsv1.HugePages1Gi
		}
	}
	return s
}

// HasVhostUser says whether any port of the spec is a vhost-user port (the injector asks it too).
func HasVhostUser(s *fsv1.StackInstanceSpec) bool {
	for i := range s.Ports {
		if s.Ports[i].Device.VhostUser != nil {
			return true
		}
	}
	return false
}
