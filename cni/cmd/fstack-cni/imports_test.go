package main

import (
	"os/exec"
	"strings"
	"testing"
)

// Every CNI call is a new process, so every package the plugin links is init and page faults
// paid on each ADD, DEL, CHECK and GC. One careless import (a Kubernetes client, a metrics
// library, net/http through some helper) would add tens of packages and silently undo that, so
// the plugin's import graph is held to what it is now: the CNI library's skel, types and
// version, the netns helper skel links, x/sys/unix, the project's own packages, and the
// standard library without the heavy parts below.

// allowedModules are the only packages from outside the standard library and the project.
var allowedModules = []string{
	"github.com/containernetworking/cni/pkg/",
	"github.com/vishvananda/netns",
	"golang.org/x/sys/unix",
	"vendor/golang.org/x/net/dns/dnsmessage", // the standard library's own copy (net)
}

// deniedStd are standard-library packages the plugin has never needed and that each pull many
// more (TLS and X.509 with net/http, the template and go/* parsers, compression, databases).
var deniedStd = []string{
	"net/http", "crypto/tls", "crypto/x509", "text/template", "html/template", "go/", "compress/",
	"archive/", "database/", "encoding/xml", "encoding/gob", "net/rpc", "net/mail", "net/smtp",
	"os/user", "os/signal", "plugin", "runtime/pprof", "expvar", "mime",
}

// maxPackages is the package count when this test was written (134, with skel, log/slog and
// crypto/sha256) plus a small margin for the odd light standard-library package. Raising it
// needs the figure from `make bench-cni` that says the new packages cost nothing.
const maxPackages = 140

const self = "github.com/kube-fstack/kube-fstack/"

func TestImportGraphStaysLean(t *testing.T) {
	goTool, err := exec.LookPath("go")
	if err != nil {
		t.Fatalf("the go tool is not on PATH (export PATH=/usr/local/go/bin:$PATH): %v", err)
	}
	out, err := exec.Command(goTool, "list", "-deps", ".").Output()
	if err != nil {
		t.Fatalf("go list -deps: %v", err)
	}
	pkgs := strings.Fields(string(out))
	if len(pkgs) < 50 {
		t.Fatalf("go list -deps listed %d packages, expected the plugin's whole graph: %q", len(pkgs), pkgs)
	}
	if len(pkgs) > maxPackages {
		t.Errorf("fstack-cni links %d packages, at most %d allowed (see maxPackages)", len(pkgs), maxPackages)
	}
	for _, p := range pkgs {
		if why := forbidden(p); why != "" {
			t.Errorf("fstack-cni links %s: %s", p, why)
		}
	}
}

// forbidden says why the plugin must not link package p, or "" when it may.
func forbidden(p string) string {
	if strings.HasPrefix(p, self) {
		return ""
	}
	first, _, _ := strings.Cut(p, "/")
	if !strings.Contains(first, ".") && first != "vendor" {
		for _, d := range deniedStd {
			if p == d || strings.HasSuffix(d, "/") && strings.HasPrefix(p, d) || strings.HasPrefix(p, d+"/") {
				return "a heavy standard-library package (see deniedStd)"
			}
		}
		return ""
	}
	for _, a := range allowedModules {
		if strings.HasPrefix(p, a) {
			return ""
		}
	}
	return "not in allowedModules: every package is paid for at each CNI call's start"
}

// The checks themselves: what the plugin must never link is refused, what it links is not.
func TestForbidden(t *testing.T) {
	for _, p := range []string{"k8s.io/client-go/kubernetes", "sigs.k8s.io/yaml", "google.golang.org/grpc",
		"github.com/prometheus/client_golang/prometheus", "net/http", "crypto/tls", "go/ast", "compress/gzip",
		"go.opentelemetry.io/otel", "github.com/containernetworking/plugins/pkg/ip"} {
		if forbidden(p) == "" {
			t.Errorf("%s is allowed", p)
		}
	}
	for _, p := range []string{"encoding/json", "log/slog", "crypto/sha256", "net", "github.com/containernetworking/cni/pkg/skel",
		"golang.org/x/sys/unix", self + "internal/ovsdb", "vendor/golang.org/x/net/dns/dnsmessage"} {
		if why := forbidden(p); why != "" {
			t.Errorf("%s is refused: %s", p, why)
		}
	}
}
