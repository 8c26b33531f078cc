package inject

import (
	corev1 "k8s.io/api/core/v1"

	"github.com/kube-fstack/kube-fstack/internal/podcontract"
)

// drainSeconds is the stack's spec.drainSeconds, or the default.
func (p *plan) drainSeconds() int64 {
	if d := p.spec.DrainSeconds; d != nil {
		return int64(*d)
	}
	return podcontract.DefaultDrainSeconds
}

// addDrain gives every regular container (the apps; a program's dataplane) a preStop that sleeps
// for the drain. On deletion the kubelet runs the regular containers' preStop hooks first and
// stops the native sidecars (the injected dataplane) only once the regular containers have
// exited, so the app and its F-Stack keep serving while the operator's EndpointSlices mark the
// pod terminating and kube-proxy moves new connections to the other endpoints; then the app
// stops, then the dataplane. The sleep is the kubelet's own (lifecycle sleep, GA in Kubernetes
// 1.34): no binary in the app's image, no exec into it. A container's own preStop is the user's
// drain and stays.
func (p *plan) addDrain(spec *corev1.PodSpec) {
	d := p.drainSeconds()
	if d == 0 {
		return
	}
	for i := range spec.Containers {
		c := &spec.Containers[i]
		if c.Lifecycle != nil && c.Lifecycle.PreStop != nil {
			continue
		}
		if c.Lifecycle == nil {
			c.Lifecycle = &corev1.Lifecycle{}
		}
		c.Lifecycle.PreStop = &corev1.LifecycleHandler{Sleep: &corev1.SleepAction{Seconds: d}}
	}
}
