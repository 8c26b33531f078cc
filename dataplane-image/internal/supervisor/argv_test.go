package supervisor

import (
	"reflect"
	"testing"

	"github.com/kube-fstack/kube-fstack/internal/render"
)

func TestArgv(t *testing.T) {
	res := &render.Result{EAL: [][]string{
		{"f-stack", "-c4", "-n4", "--proc-type=primary", "--vdev=virtio_user0,path=/s.sock,server=1", "--no-pci", "--single-file-segments"},
		{"f-stack", "-c8", "-n4", "--proc-type=secondary", "--vdev=virtio_user0,path=/s.sock,server=1", "--no-pci", "--single-file-segments"},
	}}
	fstack := &Launch{FStack: "/usr/local/bin/fstack"}
	prog := &Launch{ProgramMode: true, Program: "dpdk-testpmd", SecondaryProgram: "dpdk-sec", LcoresPerProc: 2,
		PrimaryArgs: []string{"--num-procs={procs}", "--proc-id={proc}"}, SecondaryArgs: []string{"--proc-id={proc}"}}
	cases := []struct {
		name string
		l    *Launch
		k    int
		want []string
	}{
		{"F-Stack primary", fstack, 0, []string{"/usr/local/bin/fstack", "--conf", "/etc/f-stack/config.ini", "--proc-type=primary", "--proc-id=0"}},
		{"F-Stack secondary", fstack, 1, []string{"/usr/local/bin/fstack", "--conf", "/etc/f-stack/config.ini", "--proc-type=secondary", "--proc-id=1"}},
		{"program primary", prog, 0, []string{"dpdk-testpmd", "--lcores=0@2,1@2", "-n4", "--proc-type=primary", "--vdev=virtio_user0,path=/s.sock,server=1", "--no-pci", "--single-file-segments", "--", "--num-procs=2", "--proc-id=0"}},
		{"program secondary", prog, 1, []string{"dpdk-sec", "--lcores=0@3,1@3", "-n4", "--proc-type=secondary", "--vdev=virtio_user0,path=/s.sock,server=1", "--no-pci", "--single-file-segments", "--", "--proc-id=1"}},
		{"program as rendered", &Launch{ProgramMode: true, Program: "p"}, 1, append([]string{"p"}, res.EAL[1][1:]...)},
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
	bad := &render.Result{EAL: [][]string{{"f-stack", "-c6"}}}
	if _, err := prog.Argv(bad, "c", 0); err == nil {
		t.Error("a two-CPU mask cannot become one process's lcores")
	}
}

// Lcores sharing a CPU (lab option): the renderer's argv has patch 0003's --lcores=<lcore>@<CPU>;
// program mode keeps the CPU, F-Stack and native programs get the environment the patch reads.
func TestArgvAndEnvWithLcoresSharingACPU(t *testing.T) {
	res := &render.Result{
		EAL: [][]string{
			{"f-stack", "--lcores=1@1", "-n4", "--proc-type=primary"},
			{"f-stack", "--lcores=127@1", "-n4", "--proc-type=secondary"},
		},
		FStackEnv: []render.EnvVar{{Name: "KUBE_FSTACK_LCORE_CPUS", Value: "1,1"}},
	}
	prog := &Launch{ProgramMode: true, Program: "dpdk-testpmd", LcoresPerProc: 2}
	for k := range 2 {
		got, err := prog.Argv(res, "c", k)
		if err != nil || got[1] != "--lcores=0@1,1@1" {
			t.Errorf("process %d: %q %v, want testpmd's two lcores on CPU 1", k, got, err)
		}
	}
	cpus, err := ealCPUs(res)
	if err != nil || !reflect.DeepEqual(cpus, []int{1, 1}) {
		t.Errorf("ealCPUs: %v %v, want [1 1]", cpus, err)
	}
	if cpu, ok := agentCPU(res); cpu != 1 || !ok {
		t.Errorf("agentCPU: %d %v, want CPU 1", cpu, ok)
	}
	s := &Supervisor{Env: []string{"PATH=/bin"}}
	if env := s.fstackEnv(res); !reflect.DeepEqual(env, append(s.childEnv(), "KUBE_FSTACK_LCORE_CPUS=1,1")) {
		t.Errorf("fstackEnv: %q", env)
	}
	if names := fstackEnvNames(res); !reflect.DeepEqual(names, []string{"KUBE_FSTACK_LCORE_CPUS"}) {
		t.Errorf("fstackEnvNames: %q", names)
	}
	for _, bad := range []string{"--lcores=1@x", "--lcores=1", "--lcores=a@1", "--lcores=1@-2"} {
		if _, ok, err := ealCPU(bad); !ok || err == nil {
			t.Errorf("ealCPU(%q) accepted", bad)
		}
	}
	if _, ok, _ := ealCPU("--lcore-x"); ok {
		t.Error("ealCPU took an argument that names no lcore")
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
