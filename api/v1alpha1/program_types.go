package v1alpha1

// ProgramMode says how the supervisor starts a program linked with libfstack.
// +kubebuilder:validation:Enum=PerProcess;Nginx
type ProgramMode string

const (
	// ProgramPerProcess starts the program once per F-Stack process, as F-Stack's start.sh
	// does: its own arguments, then --conf <config.ini> --proc-type=primary|secondary
	// --proc-id=<k>, the primary first (F-Stack's helloworld and any program calling ff_init
	// with its argv).
	ProgramPerProcess ProgramMode = "PerProcess"
	// ProgramNginx starts F-Stack's Nginx: one master (nginx -c nginx.conf, in the foreground),
	// which forks one worker per F-Stack process, worker 0 the primary; nginx.conf must name the
	// rendered config.ini (fstack_conf) and have worker_processes equal to spec.processes.
	ProgramNginx ProgramMode = "Nginx"
)

// ProgramSpec makes a pod container the dataplane: a program linked with libfstack (F-Stack's
// Nginx, or any program written against F-Stack's API) runs as the F-Stack processes instead
// of F-Stack's fstack adapter, and no app container gets the shim.
type ProgramSpec struct {
	// Mode says how the program is started: PerProcess (once per F-Stack process, as
	// F-Stack's start.sh) or Nginx (F-Stack's Nginx master, which forks the processes).
	// +required
	Mode ProgramMode `json:"mode"`

	// Container is the pod container that runs the program; default: the pod's only
	// container. The injection keeps its image, command, arguments, environment, ports and
	// volume mounts, starts its command under the dataplane image's supervisor (the image's
	// entrypoint: kube-fstack's dataplane image or an image built FROM it) and renames it
	// fstack-dataplane. At most 63 characters (a container name is a DNS label).
	// +kubebuilder:validation:MaxLength=63
	// +kubebuilder:validation:Pattern=`^[a-z0-9]([-a-z0-9]*[a-z0-9])?$`
	// +optional
	Container string `json:"container,omitempty"`
}
