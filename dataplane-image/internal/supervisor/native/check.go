// Package native holds what the supervisor needs to run a program linked with libfstack
// (spec.program) instead of F-Stack's adapter: the check that the container's command line and
// the spec tell one story, and for F-Stack's Nginx (mode Nginx) the master's command line judged
// against the stack and the watch of the workers it forks as F-Stack's processes. Starting and
// awaiting the processes stays with the supervisor, which owns every process it starts.
package native

import (
	"fmt"

	fsv1 "github.com/kube-fstack/kube-fstack/api/v1alpha1"
	"github.com/kube-fstack/kube-fstack/internal/podcontract"
)

// Check holds the spec snapshot and the container's command line to one story. The
// injection writes both (the snapshot as an annotation, --native into the container's
// arguments), but anyone who may edit the pod can change the annotation afterwards, while the
// arguments are fixed: a snapshot that now says otherwise is refused, never half-followed.
func Check(native fsv1.ProgramMode, spec *fsv1.StackInstanceSpec) error {
	switch {
	case spec.Program == nil && native != "":
		return fmt.Errorf("the supervisor runs a native program (--native=%s) but the StackInstance spec the pod was admitted with has no spec.program: the pod's %s annotation was changed after admission; recreate the pod", native, podcontract.SpecAnnotation)
	case spec.Program != nil && native == "":
		return fmt.Errorf("the StackInstance spec has spec.program (%s), but this container runs F-Stack's adapter (no --native): a program linked with libfstack runs in its own container, which the injection makes the dataplane; recreate the pod", spec.Program.Mode)
	case spec.Program != nil && spec.Program.Mode != native:
		return fmt.Errorf("the StackInstance spec says spec.program.mode %s but the container runs --native=%s: the pod's %s annotation was changed after admission; recreate the pod", spec.Program.Mode, native, podcontract.SpecAnnotation)
	}
	return nil
}
