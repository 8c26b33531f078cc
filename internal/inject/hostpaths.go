package inject

import (
	"fmt"
	"path"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/kube-fstack/kube-fstack/internal/podcontract"
)

// Until every pod on a node has left the hostPath layout of the socket root, pods of the
// namespaces that opt in still run where the socket root and the project's other host
// directories hold what other pods and OVS rely on. The volume's name says nothing about what it
// mounts, so every hostPath volume is checked by its path: at, under or above one of them is
// refused, whatever it is called. /run and /var/run are one directory on the nodes (a symlink),
// so both spellings are compared. A path through another symlink of the node cannot be seen from
// here; Pod Security "baseline" on the namespace, which refuses every hostPath, closes that.

// hostRoots are the node directories no pod of an opted-in namespace may mount.
func (c Config) hostRoots() []string {
	return []string{c.HostSocketRoot, podcontract.HostStateRoot, podcontract.HostLogRoot}
}

// CheckHostPaths refuses every hostPath volume of pod at, under or above one of the project's
// host directories, naming the volume's field path.
func CheckHostPaths(pod *corev1.Pod, cfg Config) field.ErrorList {
	var errs field.ErrorList
	for i, v := range pod.Spec.Volumes {
		if v.HostPath == nil {
			continue
		}
		for _, root := range cfg.hostRoots() {
			if overlaps(v.HostPath.Path, root) {
				errs = append(errs, field.Forbidden(field.NewPath("spec", "volumes").Index(i).Child("hostPath", "path"), fmt.Sprintf(
					"hostPath %q of volume %q reaches %s, kube-fstack's directory on the node (the vhost-user sockets of every pod, or "+
						"the plugin's files): no pod of a namespace labelled kubefstack.io/injection=enabled may mount it; "+
						"remove the volume (the injection gives the dataplane its own socket directory)",
					v.HostPath.Path, v.Name, root)))
				break
			}
		}
	}
	return errs
}

// overlaps reports whether p is root, beneath it or above it.
func overlaps(p, root string) bool {
	p, root = nodePath(p), nodePath(root)
	return within(p, root) || within(root, p)
}

func within(p, dir string) bool {
	return p == dir || dir == "/" || strings.HasPrefix(p, dir+"/")
}

// nodePath cleans p as the kubelet would resolve it and spells /run as /var/run. A relative
// path (the API server refuses one, but this runs before it) is taken from the root.
func nodePath(p string) string {
	p = path.Clean("/" + p)
	if p == "/run" || strings.HasPrefix(p, "/run/") {
		p = "/var" + p
	}
	return p
}

// CheckSkipped is what a pod that is not injected must still pass in an opted-in namespace: an
// opted-out pod (kubefstack.io/inject: "false") may neither declare nor mount a volume named like
// an injected one, an already injected one must use fstack-vhost as the injection does
// (CheckAlreadyInjected), and neither may mount the project's host directories.
func CheckSkipped(pod *corev1.Pod, d Decision, cfg Config) field.ErrorList {
	var errs field.ErrorList
	switch d {
	case SkippedAlreadyInjected:
		errs = CheckAlreadyInjected(pod, cfg)
	case SkippedOptOut:
		errs = checkOptedOut(pod)
	}
	return append(errs, CheckHostPaths(pod, cfg)...)
}

// checkOptedOut refuses, in a pod that opted out, volumes named like the injected ones and every
// use of such a name: the injection's checks would have refused them, and opting out must not
// be the way around them.
func checkOptedOut(pod *corev1.Pod) field.ErrorList {
	isInjectedName := func(name string) bool { return slices.Contains(podcontract.InjectedVolumes(), name) }
	var errs field.ErrorList
	for i, v := range pod.Spec.Volumes {
		if isInjectedName(v.Name) {
			errs = append(errs, field.Forbidden(field.NewPath("spec", "volumes").Index(i).Child("name"), fmt.Sprintf(
				"%s is reserved for the volumes kube-fstack injects, also in a pod with kubefstack.io/inject: \"false\"; rename this volume", v.Name)))
		}
	}
	return append(errs, injectedVolumeUses(&pod.Spec)...)
}
