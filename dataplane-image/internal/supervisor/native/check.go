package supervisor

import (
	"fmt"

	fsv1 "github.com/kube-fstack/kube-fstack/api/v1alpha1"
)

// checkNative holds the spec snapshot and the container's command line to one story. The
// injection writes both (the snapshot as an annotation, --native into the container's
// arguments), but anyone who may edit the pod can change the annotation afterwards, while the
// arguments are fixed: a snapshot that now says otherwise is refused, never half-followed.
func checkNative(l *Launch, spec *fsv1.StackInstanceSpec) error {
	switch {
	case spec.Program == nil && l.Native != "":
		return fmt.Errorf("the supervisor runs a native program (--native=%s) but the StackInstance spec the pod was admitted with has no spec.program: the pod's %s annotation was changed after admission; recreate the pod", l.Native, "kubefstack.io/spec")
	case spec.Program != nil && l.Native == "":
		return fmt.Errorf("the StackInstance spec has spec.program (%s), but this container runs F-Stack's adapter (no --native): a program linked with libfstack runs in its own container, which the injection makes the dataplane; recreate the pod", spec.Program.Mode)
	case spec.Program != nil && spec.Program.Mode != l.Native:
		return fmt.Errorf("the StackInstance spec says spec.program.mode %s but the container runs --native=%s: the pod's %s annotation was changed after admission; recreate the pod", spec.Program.Mode, l.Native, "kubefstack.io/spec")
	}
	return nil
}
