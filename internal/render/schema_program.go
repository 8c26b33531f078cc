package render

import (
	"regexp"

	"k8s.io/apimachinery/pkg/util/validation/field"

	fsv1 "github.com/kube-fstack/kube-fstack/api/v1alpha1"
)

// reContainerName is spec.program.container's pattern (a DNS label), verbatim.
var reContainerName = regexp.MustCompile(`^[a-z0-9]([-a-z0-9]*[a-z0-9])?$`)

// program is the schema of spec.program and the spec's two CEL rules about it: a program
// linked with libfstack has no shim and runs in its own container's image.
func (c *bounds) program(s *fsv1.StackInstanceSpec, root *field.Path) {
	pr := s.Program
	if pr == nil {
		return
	}
	p := root.Child("program")
	if pr.Mode == "" {
		c.add(field.Required(p.Child("mode"), "PerProcess or Nginx"))
	}
	c.enum(p.Child("mode"), string(pr.Mode), string(fsv1.ProgramPerProcess), string(fsv1.ProgramNginx))
	c.str(p.Child("container"), pr.Container, maxDNSLabel, reContainerName)
	if shimSet(&s.Shim) {
		c.add(field.Invalid(root.Child("shim"), "", "a program linked with libfstack uses no shim: remove spec.shim (or leave only enabled: false)"))
	}
	if s.Dataplane.Image != "" {
		c.add(field.Invalid(root.Child("dataplane", "image"), shorten(s.Dataplane.Image),
			"with spec.program the dataplane is the program's container and runs its image; remove spec.dataplane.image"))
	}
}

// shimSet says whether spec.shim asks for anything beyond "no shim"; the CEL rule's twin.
func shimSet(sh *fsv1.ShimSpec) bool {
	return (sh.Enabled != nil && *sh.Enabled) || sh.KernelEvent != nil || sh.MultiSC != nil ||
		sh.ThreadSocket || sh.Polling || len(sh.Containers) > 0
}
