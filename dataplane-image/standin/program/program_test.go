package program

import (
	"reflect"
	"testing"

	"github.com/kube-fstack/kube-fstack/internal/render"
)

func mustDo(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

func TestArgv(t *testing.T) {
	res := &render.Result{EAL: [][]string{
		{"f-stack", "-c4", "-n4", "--proc-type=primary", "--vdev=virtio_user0,path=/s.sock,server=1", "--no-pci", "--single-file-segments"},
		{"f-stack", "-c8", "-n4", "--proc-type=secondary", "--vdev=virtio_user0,path=/s.sock,server=1", "--no-pci", "--single-file-segments"},
	}}
	prog := &Program{Program: "dpdk-testpmd", SecondaryProgram: "dpdk-sec", LcoresPerProc: 2,
		PrimaryArgs: []string{"--num-procs={procs}", "--proc-id={proc}"}, SecondaryArgs: []string{"--proc-id={proc}"}}
	cases := []struct {
		name string
		p    *Program
		k    int
		want []string
	}{
		{"program primary", prog, 0, []string{"dpdk-testpmd", "--lcores=0@2,1@2", "-n4", "--proc-type=primary", "--vdev=virtio_user0,path=/s.sock,server=1", "--no-pci", "--single-file-segments", "--", "--num-procs=2", "--proc-id=0"}},
		{"program secondary", prog, 1, []string{"dpdk-sec", "--lcores=0@3,1@3", "-n4", "--proc-type=secondary", "--vdev=virtio_user0,path=/s.sock,server=1", "--no-pci", "--single-file-segments", "--", "--proc-id=1"}},
		{"program as rendered", &Program{Program: "p"}, 1, append([]string{"p"}, res.EAL[1][1:]...)},
	}
	for _, tc := range cases {
		got, err := tc.p.Argv(res, tc.k)
		if err != nil || !reflect.DeepEqual(got, tc.want) {
			t.Errorf("%s:\n got %q %v\nwant %q", tc.name, got, err, tc.want)
		}
	}
	if _, err := prog.Argv(res, 2); err == nil {
		t.Error("a process beyond the rendered ones was accepted")
	}
	bad := &render.Result{EAL: [][]string{{"f-stack", "-c6"}}}
	if _, err := prog.Argv(bad, 0); err == nil {
		t.Error("a two-CPU mask cannot become one process's lcores")
	}
}

// Lcores sharing a CPU (lab option): the renderer's argv has patch 0003's --lcores=<lcore>@<CPU>,
// and program mode keeps the CPU.
func TestArgvWithLcoresSharingACPU(t *testing.T) {
	res := &render.Result{EAL: [][]string{
		{"f-stack", "--lcores=1@1", "-n4", "--proc-type=primary"},
		{"f-stack", "--lcores=127@1", "-n4", "--proc-type=secondary"},
	}}
	prog := &Program{Program: "dpdk-testpmd", LcoresPerProc: 2}
	for k := range 2 {
		got, err := prog.Argv(res, k)
		if err != nil || got[1] != "--lcores=0@1,1@1" {
			t.Errorf("process %d: %q %v, want testpmd's two lcores on CPU 1", k, got, err)
		}
	}
}
