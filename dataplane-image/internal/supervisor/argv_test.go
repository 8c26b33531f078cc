package supervisor

import (
	"reflect"
	"strings"
	"testing"

	"github.com/kube-fstack/kube-fstack/dataplane-image/internal/supervisor/appprobe"
	"github.com/kube-fstack/kube-fstack/dataplane-image/internal/supervisor/native"
	"github.com/kube-fstack/kube-fstack/dataplane-image/standin/program"
	"github.com/kube-fstack/kube-fstack/internal/render"
)

func TestArgv(t *testing.T) {
	res := &render.Result{EAL: [][]string{
		{"f-stack", "-c4", "-n4", "--proc-type=primary", "--vdev=virtio_user0,path=/s.sock,server=1", "--no-pci", "--single-file-segments"},
		{"f-stack", "-c8", "-n4", "--proc-type=secondary", "--vdev=virtio_user0,path=/s.sock,server=1", "--no-pci", "--single-file-segments"},
	}}
	fstack := &Launch{FStack: "/usr/local/bin/fstack"}
	// What the stand-in image starts instead (dataplane-image/standin/program), through the seam.
	prog := &Launch{Programs: &program.Program{Program: "dpdk-testpmd", PrimaryArgs: []string{"--proc-id={proc}"}}}
	cases := []struct {
		name string
		l    *Launch
		k    int
		want []string
	}{
		{"F-Stack primary", fstack, 0, []string{"/usr/local/bin/fstack", "--conf", "/etc/f-stack/config.ini", "--proc-type=primary", "--proc-id=0"}},
		{"F-Stack secondary", fstack, 1, []string{"/usr/local/bin/fstack", "--conf", "/etc/f-stack/config.ini", "--proc-type=secondary", "--proc-id=1"}},
		{"native", &Launch{Native: "PerProcess", NativeArgv: []string{"/hello", "-v"}}, 1, []string{"/hello", "-v", "--conf", "/etc/f-stack/config.ini", "--proc-type=secondary", "--proc-id=1"}},
		{"programs", prog, 0, append(append([]string{"dpdk-testpmd"}, res.EAL[0][1:]...), "--", "--proc-id=0")},
	}
	for _, tc := range cases {
		got, err := tc.l.Argv(res, "/etc/f-stack/config.ini", tc.k)
		if err != nil || !reflect.DeepEqual(got, tc.want) {
			t.Errorf("%s:\n got %q %v\nwant %q", tc.name, got, err, tc.want)
		}
	}
	if _, err := fstack.Argv(res, "c", 2); err == nil {
		t.Error("a process beyond the rendered ones was accepted")
	}
	if _, err := prog.Argv(res, "c", 2); err == nil {
		t.Error("a process beyond the rendered ones was accepted with Programs")
	}
}

// Lcores sharing a CPU (lab option): the renderer's argv has patch 0003's --lcores=<lcore>@<CPU>;
// F-Stack and native programs get the environment the patch reads.
func TestArgvAndEnvWithLcoresSharingACPU(t *testing.T) {
	res := &render.Result{
		EAL: [][]string{
			{"f-stack", "--lcores=1@1", "-n4", "--proc-type=primary"},
			{"f-stack", "--lcores=127@1", "-n4", "--proc-type=secondary"},
		},
		FStackEnv: []render.EnvVar{{Name: "KUBE_FSTACK_LCORE_CPUS", Value: "1,1"}},
	}
	cpus, err := native.EALCPUs(res)
	if err != nil || !reflect.DeepEqual(cpus, []int{1, 1}) {
		t.Errorf("ealCPUs: %v %v, want [1 1]", cpus, err)
	}
	if _, cpu, note := appprobe.Env(nil, "/lib/libff_syscall.so", "kernel-event", true, res); cpu != 1 || strings.Contains(note, "WARNING") {
		t.Errorf("the probe agent's CPU: %d (%s), want CPU 1", cpu, note)
	}
	s := &Supervisor{Env: []string{"PATH=/bin"}}
	if env := s.fstackEnv(res); !reflect.DeepEqual(env, append(s.childEnv(), "KUBE_FSTACK_LCORE_CPUS=1,1")) {
		t.Errorf("fstackEnv: %q", env)
	}
}

func TestFilePrefix(t *testing.T) {
	for _, tc := range []struct {
		eal  []string
		want string
	}{
		{[]string{"f-stack", "-c2"}, "rte"},
		{[]string{"f-stack", "--file-prefix=container-a"}, "container-a"},
		{[]string{"f-stack", "--file-prefix", "x", "--file-prefix=container"}, "container"},
	} {
		if got := FilePrefix(tc.eal); got != tc.want {
			t.Errorf("%v: %s, want %s", tc.eal, got, tc.want)
		}
	}
}
