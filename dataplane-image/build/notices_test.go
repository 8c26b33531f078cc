package build_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// fakeFStack is an F-Stack tree with only what package.sh notices reads (the test does not have
// F-Stack's source): its LICENSE, DPDK's license directory, a FreeBSD source and Nginx's LICENSE.
func fakeFStack(t *testing.T) string {
	t.Helper()
	ff := t.TempDir()
	files := map[string]string{
		"LICENSE":                       "Main code of F-Stack is BSD 2-Clause licensed.\n",
		"dpdk/license/bsd-3-clause.txt": "BSD-3-Clause text\n",
		"dpdk/license/README":           "DPDK licensing\n",
		"freebsd/netinet/tcp_input.c":   "/*-\n * Copyright (c) 1982, 1986, 1988, 1990, 1993\n *\tThe Regents of the University of California.  All rights reserved.\n * Copyright (c) 2007-2008,2010\n */\n",
		"freebsd/kern/kern_mbuf.c":      "/*\n * Copyright (c) 1982, 1986, 1988, 1990, 1993\n */\n",
		"app/nginx-1.28.0/LICENSE":      "Nginx BSD-2-Clause\n",
	}
	for p, text := range files {
		if err := os.MkdirAll(filepath.Dir(filepath.Join(ff, p)), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(ff, p), []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return ff
}

// The dataplane image ships F-Stack's, DPDK's and Nginx's licenses and the FreeBSD sources'
// copyright lines, each distinct line once (the Dockerfile's package and apps stages run this).
func TestNoticesCollectsFStackDPDKFreeBSDAndNginxLicenses(t *testing.T) {
	ff := fakeFStack(t)
	out := filepath.Join(t.TempDir(), "notices")
	packageSh(t, true, nil, "notices", ff, out, "nginx")
	for f, want := range map[string]string{
		"LICENSE.f-stack":        "F-Stack is BSD 2-Clause",
		"dpdk/bsd-3-clause.txt":  "BSD-3-Clause text",
		"LICENSE.nginx":          "Nginx BSD-2-Clause",
		"freebsd-copyrights.txt": "Copyright (c) 1982, 1986, 1988, 1990, 1993\n",
	} {
		b, err := os.ReadFile(filepath.Join(out, f))
		if err != nil || !strings.Contains(string(b), want) {
			t.Errorf("%s: %v, want it to hold %q:\n%s", f, err, want, b)
		}
	}
	b, _ := os.ReadFile(filepath.Join(out, "freebsd-copyrights.txt"))
	if n := strings.Count(string(b), "Copyright (c) 1982, 1986, 1988, 1990, 1993"); n != 1 {
		t.Errorf("freebsd-copyrights.txt has the shared copyright line %d times, want once:\n%s", n, b)
	}
	if !strings.Contains(string(b), "Copyright (c) 2007-2008,2010") {
		t.Errorf("freebsd-copyrights.txt lacks a file's second copyright line:\n%s", b)
	}

	// Without nginx, no Nginx license; a tree that is not F-Stack's is refused.
	plain := filepath.Join(t.TempDir(), "plain")
	packageSh(t, true, nil, "notices", ff, plain)
	if _, err := os.Stat(filepath.Join(plain, "LICENSE.nginx")); err == nil {
		t.Error("notices without nginx shipped Nginx's license")
	}
	if msg := packageSh(t, false, nil, "notices", t.TempDir(), plain); !strings.Contains(msg, "is not an F-Stack tree") {
		t.Errorf("notices on an empty tree: %s", msg)
	}
}

// debian-notices lists every installed package with its copyright file; on this Debian machine
// every package has one, as in the image.
func TestDebianNoticesListsEveryInstalledPackage(t *testing.T) {
	needTools(t, "dpkg-query")
	out := filepath.Join(t.TempDir(), "debian-packages.txt")
	packageSh(t, true, nil, "debian-notices", out)
	b, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"\nbash ", " /usr/share/doc/bash/copyright\n", "\nlibc6:amd64 "} {
		if !strings.Contains(string(b), want) {
			t.Errorf("debian-packages.txt lacks %q", want)
		}
	}
}
