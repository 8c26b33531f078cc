package inject

import (
	corev1 "k8s.io/api/core/v1"

	"github.com/kube-fstack/kube-fstack/internal/podcontract"
)

// addShim makes an app container start through the launcher, which preloads the shim for the
// app's own processes only: the container's environment gets none of the shim's variables (a
// kubectl exec shell or an exec probe would attach to F-Stack and hold a context), only what the
// launcher needs to set them. The launcher waits for the dataplane, sets FF_INITIAL_LCORE_ID to
// a CPU of this container's own cpuset (only the container knows it), runs the original
// command, and ends it when the dataplane restarts: a DPDK secondary cannot survive its
// primary, so kubelet then restarts the app against the new dataplane.
func (p *plan) addShim(c *corev1.Container) {
	c.Command = append([]string{launcherPath, "--"}, c.Command...)
	env := append([]corev1.EnvVar{}, p.shimEnv...)
	env = append(env, corev1.EnvVar{Name: podcontract.EnvContainerName, Value: c.Name})
	env = append(env, p.cfg.logEnv()...)
	c.Env = append(c.Env, env...)
	c.VolumeMounts = append(c.VolumeMounts, appMounts(c.Name)...)
	shimSeccomp(c, p.pod.Spec.SecurityContext)
}

// shimSeccomp gives an app container the dataplane's Localhost seccomp profile where it would run
// under the runtime's default one: the shim makes the app's processes DPDK secondaries, which
// map the primary's memory with the NUMA memory-policy calls the default allows only with
// SYS_NICE (measured on real F-Stack v1.25: the shim fails "Could not map memory from primary
// process" under RuntimeDefault, and serves under this profile, which is that default plus
// those calls). An unset profile is the default on kubelets run with --seccomp-default, and
// Unconfined elsewhere; the profile here is stricter than Unconfined and keeps Pod Security
// "restricted"'s rule. An explicit Unconfined or Localhost profile is the user's and stays.
func shimSeccomp(c *corev1.Container, pod *corev1.PodSecurityContext) {
	effective := func() *corev1.SeccompProfile {
		if c.SecurityContext != nil && c.SecurityContext.SeccompProfile != nil {
			return c.SecurityContext.SeccompProfile
		}
		if pod != nil {
			return pod.SeccompProfile
		}
		return nil
	}()
	if effective != nil && effective.Type != corev1.SeccompProfileTypeRuntimeDefault {
		return
	}
	if c.SecurityContext == nil {
		c.SecurityContext = &corev1.SecurityContext{}
	}
	c.SecurityContext.SeccompProfile = &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeLocalhost,
		LocalhostProfile: new(podcontract.SeccompLocalhostProfile)}
}

// appMounts are an app container's: the DPDK volumes as the dataplane has them; the shim volume
// read-only, since every app container runs the launcher and preloads the shim from it, and one
// that could write it could replace either for its siblings; and, as the only place it writes
// (the launcher's markers and requests), its own directory of the app-state volume, so that it
// cannot write in a sibling's name either.
func appMounts(container string) []corev1.VolumeMount {
	mounts := sharedMounts()
	for i := range mounts {
		if mounts[i].Name == podcontract.ShimVolume {
			mounts[i].ReadOnly = true
		}
	}
	return append(mounts, corev1.VolumeMount{Name: podcontract.AppStateVolume, MountPath: podcontract.AppStateDir, SubPath: container})
}
