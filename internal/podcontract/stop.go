package podcontract

import "time"

// How long each side of an injected pod may take to stop. On deletion the kubelet stops the app
// containers first and the dataplane sidecar after them, all within the pod's
// terminationGracePeriodSeconds; a kubelet SIGKILL that comes first kills shim clients, each of
// which leaks a shim context. So the injector raises a shorter grace period to
// TerminationGracePeriodSeconds, and the launcher and the supervisor keep to these bounds.
const (
	// AppQuitGrace bounds Nginx's graceful stop (SIGQUIT) under the launcher. Short: under the
	// shim Nginx often ignores SIGQUIT (docs/fstack-rules.md §6), and when it stops, it stops in
	// well under a second.
	AppQuitGrace = 3 * time.Second
	// AppTermGrace bounds its fast stop (SIGTERM) after that; then the launcher kills the
	// process group.
	AppTermGrace = 2 * time.Second
	// AppGrace bounds any other app's stop (SIGTERM, then SIGKILL of its process group).
	AppGrace = AppQuitGrace + AppTermGrace
	// ProbeAgentStopGrace bounds the probe agent's clean exit (it gives its context back) when
	// the dataplane stops.
	ProbeAgentStopGrace = time.Second
	// DataplaneStopGrace is the supervisor's default --grace: F-Stack's processes get SIGTERM,
	// then SIGKILL. Killing them loses nothing: the contexts live in their zones, which go with
	// them, and the supervisor removes their hugepage files.
	DataplaneStopGrace = 5 * time.Second
	// stopMargin covers the kubelet's and the runtimes' own steps between the two.
	stopMargin = 2 * time.Second
)

// TerminationGracePeriodSeconds is the shortest grace period that lets an injected pod stop
// without the kubelet's SIGKILL: the app's stop, then the dataplane's.
func TerminationGracePeriodSeconds() int64 {
	d := AppGrace + ProbeAgentStopGrace + DataplaneStopGrace + stopMargin
	return int64((d + time.Second - 1) / time.Second)
}

// DefaultDrainSeconds is the drain of a StackInstance that sets no spec.drainSeconds: long
// enough for every kube-proxy to see the endpoint terminating (its sync period is a second) and
// for short requests in flight to finish.
const DefaultDrainSeconds = 10
