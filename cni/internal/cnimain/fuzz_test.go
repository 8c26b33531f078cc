package cnimain

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/containernetworking/cni/pkg/skel"
	"github.com/containernetworking/cni/pkg/version"
)

// The CNI environment and stdin come from the runtime, and the container ID and interface name
// become file names: whatever they hold, the dispatcher agrees with skel (the same function
// called, the same error), and what it lets through names a file beneath its directory.
func FuzzEnv(f *testing.F) {
	for _, s := range [][4]string{
		{"ADD", "c0ffee_1.a-b", "net1", conf},
		{"DEL", "-x/y", "net1", conf},
		{"CHECK", "c", "..", conf},
		{"ADD", "c", "net:1", conf},
		{"ADD", "c", "net\u00a01", `{"cniVersion":"1.1.0","name":"a b"}`},
		{"GC", "", "", `{"cniVersion":"1.1.0","name":"n","cni.dev/valid-attachments":[{"containerID":"c","ifname":"../x"}]}`},
		{"STATUS", "", "", `{"cniVersion":"0.3.1","name":"n"}`},
		{"ADD", "c", "net0123456789abc", `{"name":`},
		{"DEL", "c", "net1", `{"cniVersion":"9.9.9","name":"n"}`},
	} {
		f.Add(s[0], s[1], s[2], s[3])
	}
	f.Fuzz(func(t *testing.T, cmd, cid, ifname, stdin string) {
		if strings.ContainsRune(cmd+cid+ifname, 0) {
			return // the kernel passes no NUL in an environment variable
		}
		env := map[string]string{"CNI_COMMAND": cmd, "CNI_CONTAINERID": cid, "CNI_NETNS": "/nonexistent/netns",
			"CNI_IFNAME": ifname, "CNI_ARGS": "K8S_POD_UID=u", "CNI_PATH": "/opt/cni/bin", "CNI_NETNS_OVERRIDE": ""}
		for k, v := range env {
			t.Setenv(k, v)
		}
		var skelArgs, ourArgs *CmdArgs
		withStdin(t, stdin)
		skelFn := func(a *skel.CmdArgs) error {
			skelArgs = &CmdArgs{ContainerID: a.ContainerID, IfName: a.IfName}
			return nil
		}
		want := skel.PluginMainFuncsWithError(skel.CNIFuncs{Add: skelFn, Del: skelFn, Check: skelFn, GC: skelFn, Status: skelFn}, version.All, "")
		ourFn := func(a *CmdArgs) error { ourArgs = a; return nil }
		d := &dispatcher{getenv: os.Getenv, stdin: strings.NewReader(stdin), stdout: &bytes.Buffer{}, stderr: &bytes.Buffer{}}
		got := d.run(Funcs{Add: ourFn, Del: ourFn, Check: ourFn, GC: ourFn, Status: ourFn}, version.All, "")
		if (skelArgs == nil) != (ourArgs == nil) || !sameError(got, want) {
			t.Fatalf("%s %q %q %q: error %+v called %v, skel's %+v called %v", cmd, cid, ifname, stdin, got, ourArgs != nil, want, skelArgs != nil)
		}
		if ourArgs == nil || cmd != "ADD" && cmd != "DEL" && cmd != "CHECK" {
			return
		}
		if ValidateContainerID(ourArgs.ContainerID) != nil || ValidateIfName(ourArgs.IfName) != nil {
			t.Fatalf("let through %q %q, which the validators refuse", ourArgs.ContainerID, ourArgs.IfName)
		}
		dir := "/root/pod"
		if p := filepath.Join(dir, ourArgs.IfName+".sock"); filepath.Dir(p) != dir {
			t.Fatalf("interface %q names %s, outside %s", ourArgs.IfName, p, dir)
		}
	})
}
