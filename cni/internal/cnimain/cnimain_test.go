package cnimain

import (
	"bytes"
	"errors"
	"os"
	"strings"
	"testing"

	"github.com/containernetworking/cni/pkg/skel"
	"github.com/containernetworking/cni/pkg/types"
	"github.com/containernetworking/cni/pkg/version"
)

// dispatchCase is one CNI call: its environment (unset variables are empty), its stdin and what
// the plugin function returns.
type dispatchCase struct {
	name  string
	env   map[string]string
	stdin string
	ret   error
}

func env(cmd string, overrides ...string) map[string]string {
	e := map[string]string{"CNI_COMMAND": cmd, "CNI_CONTAINERID": "c0ffee_1.a-b", "CNI_NETNS": "/nonexistent/netns",
		"CNI_IFNAME": "net1", "CNI_ARGS": "K8S_POD_UID=u", "CNI_PATH": "/opt/cni/bin"}
	for i := 0; i+1 < len(overrides); i += 2 {
		e[overrides[i]] = overrides[i+1]
	}
	return e
}

const conf = `{"cniVersion":"1.1.0","name":"net-a","type":"fstack-cni"}`

func dispatchCases() []dispatchCase {
	plainErr, cniError := errors.New("boom"), types.NewError(types.ErrTryAgainLater, "later", "details")
	var cases []dispatchCase
	for _, cmd := range []string{"ADD", "DEL", "CHECK", "GC", "STATUS"} {
		cases = append(cases,
			dispatchCase{cmd + " ok", env(cmd), conf, nil},
			dispatchCase{cmd + " plain error", env(cmd), conf, plainErr},
			dispatchCase{cmd + " CNI error", env(cmd), conf, cniError},
			dispatchCase{cmd + " no container ID", env(cmd, "CNI_CONTAINERID", ""), conf, nil},
			dispatchCase{cmd + " bad container ID", env(cmd, "CNI_CONTAINERID", "-x/y"), conf, nil},
			dispatchCase{cmd + " no netns", env(cmd, "CNI_NETNS", ""), conf, nil},
			dispatchCase{cmd + " own netns", env(cmd, "CNI_NETNS", "/proc/self/ns/net"), conf, nil},
			dispatchCase{cmd + " own netns, override", env(cmd, "CNI_NETNS", "/proc/self/ns/net", "CNI_NETNS_OVERRIDE", "true"), conf, nil},
			dispatchCase{cmd + " no path, no ifname", env(cmd, "CNI_PATH", "", "CNI_IFNAME", ""), conf, nil},
			dispatchCase{cmd + " long ifname", env(cmd, "CNI_IFNAME", "net0123456789abc"), conf, nil},
			dispatchCase{cmd + " dot ifname", env(cmd, "CNI_IFNAME", ".."), conf, nil},
			dispatchCase{cmd + " space in ifname", env(cmd, "CNI_IFNAME", "net\u00a01"), conf, nil},
			dispatchCase{cmd + " colon in ifname", env(cmd, "CNI_IFNAME", "net:1"), conf, nil},
			dispatchCase{cmd + " bad JSON", env(cmd), `{"name":`, nil},
			dispatchCase{cmd + " no name", env(cmd), `{"cniVersion":"1.1.0"}`, nil},
			dispatchCase{cmd + " bad name", env(cmd), `{"cniVersion":"1.1.0","name":"a b"}`, nil},
			dispatchCase{cmd + " old version", env(cmd), `{"cniVersion":"0.3.1","name":"n"}`, nil},
			dispatchCase{cmd + " no version", env(cmd), `{"name":"n"}`, nil},
			dispatchCase{cmd + " unknown version", env(cmd), `{"cniVersion":"9.9.9","name":"n"}`, nil},
			dispatchCase{cmd + " bad version", env(cmd), `{"cniVersion":"x","name":"n"}`, nil},
		)
	}
	return append(cases,
		dispatchCase{"no command", env(""), conf, nil},
		dispatchCase{"unknown command", env("FROB"), conf, nil},
	)
}

// TestMatchesSkel runs every case through skel and through Main's dispatcher: the same function
// is called (or none) and the same CNI error comes back.
func TestMatchesSkel(t *testing.T) {
	codes := map[uint]int{}
	t.Cleanup(func() {
		// The cases must reach every outcome, or the comparison proves little.
		for _, code := range []uint{0, types.ErrIncompatibleCNIVersion, types.ErrInvalidEnvironmentVariables,
			types.ErrInvalidNetNS, types.ErrDecodingFailure, types.ErrInvalidNetworkConfig, types.ErrInternal, types.ErrTryAgainLater} {
			if codes[code] == 0 {
				t.Errorf("no case ended with code %d: %v", code, codes)
			}
		}
	})
	for _, tc := range dispatchCases() {
		t.Run(tc.name, func(t *testing.T) {
			var skelCalled, ourCalled []string
			record := func(calls *[]string, name string) func(*CmdArgs) error {
				return func(*CmdArgs) error { *calls = append(*calls, name); return tc.ret }
			}
			skelRecord := func(name string) func(*skel.CmdArgs) error {
				return func(*skel.CmdArgs) error { skelCalled = append(skelCalled, name); return tc.ret }
			}
			for k, v := range tc.env {
				t.Setenv(k, v)
			}
			t.Setenv("CNI_NETNS_OVERRIDE", tc.env["CNI_NETNS_OVERRIDE"])
			withStdin(t, tc.stdin)
			want := skel.PluginMainFuncsWithError(skel.CNIFuncs{Add: skelRecord("ADD"), Del: skelRecord("DEL"),
				Check: skelRecord("CHECK"), GC: skelRecord("GC"), Status: skelRecord("STATUS")}, version.All, "")
			d := &dispatcher{getenv: os.Getenv, stdin: strings.NewReader(tc.stdin), stdout: &bytes.Buffer{}, stderr: &bytes.Buffer{}}
			got := d.run(Funcs{Add: record(&ourCalled, "ADD"), Del: record(&ourCalled, "DEL"),
				Check: record(&ourCalled, "CHECK"), GC: record(&ourCalled, "GC"), Status: record(&ourCalled, "STATUS")}, version.All, "")
			if strings.Join(ourCalled, ",") != strings.Join(skelCalled, ",") {
				t.Errorf("called %v, skel called %v", ourCalled, skelCalled)
			}
			if got == nil {
				codes[0]++
			} else {
				codes[got.Code]++
			}
			if !sameError(got, want) {
				t.Errorf("error %+v, skel's %+v", got, want)
			}
		})
	}
}

func sameError(a, b *types.Error) bool {
	if a == nil || b == nil {
		return a == nil && b == nil
	}
	return *a == *b
}

func withStdin(t *testing.T, data string) {
	t.Helper()
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	go func() { _, _ = w.WriteString(data); w.Close() }()
	old := os.Stdin
	os.Stdin = r
	t.Cleanup(func() { os.Stdin = old; r.Close() })
}

func TestVersionAndAbout(t *testing.T) {
	var out, errOut bytes.Buffer
	d := &dispatcher{getenv: func(k string) string { return map[string]string{"CNI_COMMAND": "VERSION"}[k] },
		stdin: strings.NewReader("ignored"), stdout: &out, stderr: &errOut}
	if err := d.run(Funcs{}, version.All, "about"); err != nil {
		t.Fatal(err)
	}
	var want bytes.Buffer
	_ = version.All.Encode(&want)
	if out.String() != want.String() {
		t.Errorf("VERSION printed %q, want %q", out.String(), want.String())
	}
	out.Reset()
	d.getenv = func(string) string { return "" }
	if err := d.run(Funcs{}, version.All, "about"); err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(errOut.String(), "about\nCNI protocol versions supported: 0.1.0, ") || out.Len() != 0 {
		t.Errorf("no CNI_COMMAND printed %q on stderr and %q on stdout", errOut.String(), out.String())
	}
}
