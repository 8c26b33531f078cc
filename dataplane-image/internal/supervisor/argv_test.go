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
