package build_test

import (
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// The image's SBOM record of what it builds from source (package.sh sbom): syft cannot see F-Stack,
// its statically linked DPDK or F-Stack's Nginx, so the build names them, at the versions the
// Dockerfile pins. test/release checks that the release's syft merges such a record; these tests
// check the record and that the Dockerfile writes it and ships it.

// globalArgs are the Dockerfile's ARGs before its first FROM, by name.
func globalArgs(t *testing.T) map[string]string {
	t.Helper()
	b, err := os.ReadFile("../Dockerfile")
	if err != nil {
		t.Fatal(err)
	}
	args := map[string]string{}
	for _, l := range strings.Split(string(b), "\n") {
		if strings.HasPrefix(l, "FROM ") {
			break
		}
		if rest, ok := strings.CutPrefix(l, "ARG "); ok {
			name, val, _ := strings.Cut(strings.TrimSpace(rest), "=")
			args[name] = val
		}
	}
	return args
}

type spdxDoc struct {
	SPDXVersion string `json:"spdxVersion"`
	Packages    []struct {
		Name         string `json:"name"`
		SPDXID       string `json:"SPDXID"`
		VersionInfo  string `json:"versionInfo"`
		ExternalRefs []struct {
			Type    string `json:"referenceType"`
			Locator string `json:"referenceLocator"`
		} `json:"externalRefs"`
	} `json:"packages"`
	Relationships []spdxRel `json:"relationships"`
}

type spdxRel struct {
	From string `json:"spdxElementId"`
	Type string `json:"relationshipType"`
	To   string `json:"relatedSpdxElement"`
}

func readSPDX(t *testing.T, path string) spdxDoc {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var d spdxDoc
	if err := json.Unmarshal(b, &d); err != nil {
		t.Fatalf("%s is not JSON: %v\n%s", path, err, b)
	}
	if d.SPDXVersion != "SPDX-2.3" {
		t.Errorf("%s: spdxVersion %q, want SPDX-2.3", path, d.SPDXVersion)
	}
	return d
}

// versions maps each package's name to "version purl".
func (d spdxDoc) versions() map[string]string {
	m := map[string]string{}
	for _, p := range d.Packages {
		purl := ""
		for _, r := range p.ExternalRefs {
			if r.Type == "purl" {
				purl = r.Locator
			}
		}
		m[p.Name] = p.VersionInfo + " " + purl
	}
	return m
}

func TestSBOMRecordNamesFStackDPDKAndNginxAtTheDockerfilesVersions(t *testing.T) {
	args := globalArgs(t)
	commit := "761639943bdda33103aa98241ca6a3079f1c1b7e"
	if args["FSTACK_VERSION"] == "" || args["DPDK_VERSION"] == "" {
		t.Fatalf("the Dockerfile declares no global ARG FSTACK_VERSION and DPDK_VERSION (got %v): the labels and the SBOM record read them", args)
	}
	dpdk, err := os.ReadFile("testdata/fstack/dpdk/VERSION")
	if err != nil {
		t.Fatal(err)
	}
	env := []string{"FSTACK_COMMIT=" + commit, "FSTACK_VERSION=" + args["FSTACK_VERSION"], "DPDK_VERSION=" + args["DPDK_VERSION"]}
	out := t.TempDir()
	packageSh(t, true, env, "sbom", abs(t, "testdata/fstack"), out)
	doc := readSPDX(t, filepath.Join(out, "f-stack.spdx.json"))
	got := doc.versions()
	if want := args["FSTACK_VERSION"] + " pkg:github/F-Stack/f-stack@" + commit; got["f-stack"] != want {
		t.Errorf("f-stack: %q, want %q", got["f-stack"], want)
	}
	d := strings.TrimSpace(string(dpdk))
	if want := d + " pkg:generic/dpdk@" + d; got["dpdk"] != want || !strings.HasPrefix(d, args["DPDK_VERSION"]+".") {
		t.Errorf("dpdk: %q, want %q (the tree's dpdk/VERSION, a release of DPDK_VERSION=%s)", got["dpdk"], want, args["DPDK_VERSION"])
	}
	if !slices.Contains(doc.Relationships, spdxRel{"SPDXRef-DOCUMENT", "DESCRIBES", "SPDXRef-Package-f-stack"}) {
		t.Errorf("the record does not DESCRIBE f-stack: %+v", doc.Relationships)
	}

	// Nginx's version is the one build-apps.sh builds (its NGINX_DIR in F-Stack's tree).
	apps, err := os.ReadFile("build-apps.sh")
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`NGINX_DIR=\$\{NGINX_DIR:-app/nginx-([0-9.]+)\}`).FindSubmatch(apps)
	if m == nil {
		t.Fatal("build-apps.sh has no NGINX_DIR=${NGINX_DIR:-app/nginx-<version>}")
	}
	packageSh(t, true, env[:2], "sbom", abs(t, "testdata/fstack"), out, "nginx")
	if got, want := readSPDX(t, filepath.Join(out, "nginx.spdx.json")).versions()["nginx"], string(m[1])+" pkg:generic/nginx@"+string(m[1]); got != want {
		t.Errorf("nginx: %q, want %q", got, want)
	}
}

// The record refuses to guess: a DPDK that is not the one the Dockerfile's label names, or a
// missing pin, fails the build with the ARG to fix.
func TestSBOMRecordRefusesVersionsThatDisagree(t *testing.T) {
	tree := abs(t, "testdata/fstack")
	commit := "FSTACK_COMMIT=761639943bdda33103aa98241ca6a3079f1c1b7e"
	mustContain(t, "another DPDK", packageSh(t, false, []string{commit, "FSTACK_VERSION=v1.25", "DPDK_VERSION=22.11"}, "sbom", tree, t.TempDir()),
		"the Dockerfile says DPDK_VERSION=22.11")
	mustContain(t, "no version", packageSh(t, false, []string{commit, "FSTACK_VERSION=", "DPDK_VERSION=23.11"}, "sbom", tree, t.TempDir()),
		"FSTACK_VERSION=''")
	mustContain(t, "a tag as commit", packageSh(t, false, []string{"FSTACK_COMMIT=v1.25", "FSTACK_VERSION=v1.25", "DPDK_VERSION=23.11"}, "sbom", tree, t.TempDir()),
		"want the 40-hex commit")
}

// The package stage writes the record with the global ARGs, the dataplane image ships it where the
// release's syft looks, and F-Stack's Nginx image adds its own; the DPDK label reads the same ARG.
func TestDockerfileWritesAndShipsTheSBOMRecord(t *testing.T) {
	stages := parseDockerfile(t)
	pkg := stageNamed(t, stages, "package")
	for _, a := range []string{"FSTACK_VERSION", "DPDK_VERSION"} {
		if !slices.Contains(pkg.all("ARG"), a) {
			t.Errorf("the package stage does not declare ARG %s: package.sh sbom would not see the global value", a)
		}
	}
	if !strings.Contains(strings.Join(pkg.all("RUN"), "\n"), `/src/package.sh sbom "$FF_PATH" /out/sbom`) {
		t.Errorf("the package stage does not run package.sh sbom into /out/sbom")
	}
	dp := stageNamed(t, stages, "dataplane")
	if !slices.Contains(dp.all("COPY"), "--from=package /out/sbom/ /usr/share/doc/kube-fstack/sbom/") {
		t.Errorf("the dataplane stage does not ship the SBOM record in /usr/share/doc/kube-fstack/sbom/")
	}
	if !strings.Contains(strings.Join(dp.all("LABEL"), " "), `io.kubefstack.dpdk-version="${DPDK_VERSION}"`) || !slices.Contains(dp.all("ARG"), "DPDK_VERSION") {
		t.Errorf("the dpdk-version label is not the ARG DPDK_VERSION the SBOM record is checked against")
	}
	apps := stageNamed(t, stages, "apps")
	if !strings.Contains(strings.Join(apps.all("RUN"), "\n"), `/src/package.sh sbom "$FF_PATH" /out/sbom-nginx nginx`) || !slices.Contains(apps.all("ARG"), "FSTACK_VERSION") {
		t.Errorf("the apps stage does not write Nginx's SBOM record (with ARG FSTACK_VERSION)")
	}
	if !slices.Contains(stageNamed(t, stages, "fstack-nginx").all("COPY"), "--from=apps /out/sbom-nginx/ /usr/share/doc/kube-fstack/sbom/") {
		t.Errorf("the fstack-nginx stage does not ship Nginx's SBOM record")
	}
}
