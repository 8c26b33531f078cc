package release

import (
	"bytes"
	"encoding/base64"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"
)

// startRegistry runs the pinned registry binary (distribution's) on a free loopback port with its
// storage in a temporary directory, and returns its host:port once it answers. It is stopped when
// the test ends.
func startRegistry(t *testing.T, bin string) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	_ = l.Close()
	dir := t.TempDir()
	conf := filepath.Join(dir, "config.yml")
	// delete.enabled: cosign replaces a signature or attestation manifest by deleting the old one.
	cfg := fmt.Sprintf("version: 0.1\nlog:\n  level: warn\nstorage:\n  filesystem:\n    rootdirectory: %s\n  delete:\n    enabled: true\nhttp:\n  addr: %s\n",
		filepath.Join(dir, "data"), addr)
	if err := os.WriteFile(conf, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	logf, err := os.Create(filepath.Join(dir, "registry.log"))
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bin, "serve", conf)
	// No telemetry exporter: the registry would otherwise try to send traces off this machine.
	cmd.Env = append(os.Environ(), "OTEL_TRACES_EXPORTER=none", "OTEL_METRICS_EXPORTER=none", "OTEL_LOGS_EXPORTER=none")
	cmd.Stdout, cmd.Stderr = logf, logf
	if err := cmd.Start(); err != nil {
		t.Fatalf("start %s: %v", bin, err)
	}
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		_ = logf.Close()
	})
	for deadline := time.Now().Add(15 * time.Second); ; {
		resp, err := http.Get("http://" + addr + "/v2/")
		if err == nil {
			_ = resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return addr
			}
		}
		if time.Now().After(deadline) {
			b, _ := os.ReadFile(logf.Name())
			t.Fatalf("the registry did not answer on %s within 15 s (%v):\n%s", addr, err, b)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// registryCheck holds what the registry checks share: the release run and its registry.
type registryCheck struct {
	e      env
	cosign string
	reg    string // host:port
	keys   string // the directory of the release's key pair
	// unsigned is an image in buildah's store that nobody signed (made by checkSourceBuiltSBOM).
	unsigned string
	// parent is TestRelease: what the subtests share is removed when it ends.
	parent *testing.T
}

// cosignDo runs cosign against the plain-HTTP test registry.
func (r *registryCheck) cosignDo(t *testing.T, args ...string) (string, error) {
	t.Helper()
	args = append(args[:1:1], append([]string{"--allow-http-registry", "--allow-insecure-registry"}, args[1:]...)...)
	cmd := exec.Command(r.cosign, args...)
	cmd.Env = append(os.Environ(), "COSIGN_PASSWORD="+password)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return string(out) + stderr.String(), err
	}
	return string(out), nil
}

// verifyArgs: what docs/verifying-releases.md tells users to run, for a key-signed image with no
// transparency log entry.
func (r *registryCheck) verifyArgs(cmd, ref string) []string {
	a := []string{cmd, "--key", filepath.Join(r.e.out, "cosign.pub"), "--insecure-ignore-tlog=true"}
	if cmd == "verify-attestation" {
		a = append(a, "--type", "spdxjson")
	}
	return append(a, ref)
}

func (r *registryCheck) mustVerify(t *testing.T, cmd, ref string) string {
	t.Helper()
	out, err := r.cosignDo(t, r.verifyArgs(cmd, ref)...)
	if err != nil {
		t.Fatalf("cosign %s %s: %v\n%s", cmd, ref, err, out)
	}
	return out
}

func (r *registryCheck) mustNotVerify(t *testing.T, why, cmd, ref string) {
	t.Helper()
	if out, err := r.cosignDo(t, r.verifyArgs(cmd, ref)...); err == nil {
		t.Errorf("cosign %s %s passed for %s:\n%s", cmd, ref, why, out)
	}
}

func (r *registryCheck) buildah(t *testing.T, args ...string) string {
	t.Helper()
	out, err := exec.Command("buildah", args...).CombinedOutput()
	if err != nil {
		t.Fatalf("buildah %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return strings.TrimSpace(string(out))
}

// statement is the in-toto statement of an attestation, its predicate the SPDX SBOM.
type statement struct {
	PredicateType string `json:"predicateType"`
	Subject       []struct {
		Digest map[string]string `json:"digest"`
	} `json:"subject"`
	Predicate struct {
		Packages []struct {
			Name        string `json:"name"`
			VersionInfo string `json:"versionInfo"`
		} `json:"packages"`
	} `json:"predicate"`
}

// attestations decodes what cosign verify-attestation prints: one DSSE envelope a line.
func attestations(t *testing.T, out string) []statement {
	t.Helper()
	var sts []statement
	for _, l := range strings.Split(strings.TrimSpace(out), "\n") {
		if !strings.HasPrefix(l, "{") {
			continue
		}
		var env struct {
			Payload string `json:"payload"`
		}
		decode(t, []byte(l), &env)
		raw, err := base64.StdEncoding.DecodeString(env.Payload)
		if err != nil {
			t.Fatalf("attestation payload: %v", err)
		}
		var st statement
		decode(t, raw, &st)
		sts = append(sts, st)
	}
	return sts
}

// checkRegistry: the index the chart names and each platform's image carry a signature that
// verifies with the release's key and no transparency log; each platform's image an SPDX
// attestation of its own SBOM, the index one per platform; the pushed chart a signature; and the
// script's own verify, pointed at the registry, agrees.
func (r *registryCheck) checkRegistry(t *testing.T) {
	digest := strings.TrimSpace(string(read(t, filepath.Join(r.e.out, "images", "cni.digest"))))
	index := imageRepo + "/cni@" + digest
	var sigs []struct {
		Critical struct {
			Image struct {
				Digest string `json:"docker-manifest-digest"`
			} `json:"image"`
		} `json:"critical"`
	}
	decode(t, []byte(r.mustVerify(t, "verify", index)), &sigs)
	if len(sigs) == 0 || sigs[0].Critical.Image.Digest != digest {
		t.Errorf("the signature on %s signs %+v", index, sigs)
	}
	cniVersion := moduleVersion(t, "github.com/containernetworking/cni")
	img := readOCI(t, filepath.Join(r.e.out, "images", "cni.oci.tar"))
	var idx manifest
	decode(t, img.blob(t, digest), &idx)
	if len(idx.Manifests) != 2 {
		t.Fatalf("the index has %d images, want 2", len(idx.Manifests))
	}
	for _, m := range idx.Manifests {
		ref := imageRepo + "/cni@" + m.Digest
		r.mustVerify(t, "verify", ref)
		sts := attestations(t, r.mustVerify(t, "verify-attestation", ref))
		if len(sts) != 1 {
			t.Fatalf("%s (%s) has %d SPDX attestations, want its own SBOM's", ref, m.Platform.Architecture, len(sts))
		}
		st := sts[0]
		if st.PredicateType != "https://spdx.dev/Document" || len(st.Subject) != 1 || "sha256:"+st.Subject[0].Digest["sha256"] != m.Digest {
			t.Errorf("%s: attestation %s about %+v, want an SPDX document about %s", ref, st.PredicateType, st.Subject, m.Digest)
		}
		found := false
		for _, p := range st.Predicate.Packages {
			found = found || p.Name == "github.com/containernetworking/cni" && p.VersionInfo == cniVersion
		}
		if !found {
			t.Errorf("%s's attested SBOM does not list github.com/containernetworking/cni %s, which fstack-cni links", ref, cniVersion)
		}
	}
	if sts := attestations(t, r.mustVerify(t, "verify-attestation", index)); len(sts) != 2 {
		t.Errorf("the index %s has %d SPDX attestations, want one per platform (2)", index, len(sts))
	}
	r.mustVerify(t, "verify", r.reg+"/charts/kube-fstack:"+strings.TrimPrefix(version, "v"))

	log, err := run(t, r.e, "verify", version)
	if err != nil || !strings.Contains(log, "verified in the registry") {
		t.Errorf("hack/release.sh verify with REGISTRY: %v, want the registry checked:\n%s", err, log)
	}
}

// checkImageList: images.txt names the one image built, by tag and digest.
func checkImageList(t *testing.T, e env) {
	digest := strings.TrimSpace(string(read(t, filepath.Join(e.out, "images", "cni.digest"))))
	if got, want := strings.TrimSpace(string(read(t, filepath.Join(e.out, "images.txt")))), imageRepo+"/cni:"+version+"@"+digest; got != want {
		t.Errorf("images.txt is %q, want %q", got, want)
	}
}

// checkRelocation: what docs/verifying-releases.md tells users to run to mirror a release, `cosign
// copy` of every image of images.txt and of the chart into another repository keeps every signature
// and attestation (the script's verify passes against the copy); `cosign save` and `cosign load`
// for an air gap keep those of each image and the chart.
func (r *registryCheck) checkRelocation(t *testing.T) {
	mirror := r.reg + "/mirror"
	for _, line := range strings.Split(strings.TrimSpace(string(read(t, filepath.Join(r.e.out, "images.txt")))), "\n") {
		src, _, _ := strings.Cut(line, "@")
		name := src[strings.LastIndex(src, "/")+1:]
		if out, err := r.cosignDo(t, "copy", "--force", src, mirror+"/"+name); err != nil {
			t.Fatalf("cosign copy %s: %v\n%s", src, err, out)
		}
	}
	chart := "/kube-fstack:" + strings.TrimPrefix(version, "v")
	if out, err := r.cosignDo(t, "copy", "--force", r.reg+"/charts"+chart, mirror+"/charts"+chart); err != nil {
		t.Fatalf("cosign copy the chart: %v\n%s", err, out)
	}
	r.verifyMirror(t, mirror, "the cosign copy")

	// Air-gapped: cosign save into directories, cosign load from them under each tag.
	airgap, dirs := r.reg+"/airgap", t.TempDir()
	for _, line := range strings.Split(strings.TrimSpace(string(read(t, filepath.Join(r.e.out, "images.txt")))), "\n") {
		src, _, _ := strings.Cut(line, "@")
		name := src[strings.LastIndex(src, "/")+1:]
		dir := filepath.Join(dirs, name)
		if out, err := r.cosignDo(t, "save", "--dir", dir, src); err != nil {
			t.Fatalf("cosign save %s: %v\n%s", src, err, out)
		}
		if out, err := r.cosignDo(t, "load", "--dir", dir, airgap+"/"+name); err != nil {
			t.Fatalf("cosign load %s: %v\n%s", name, err, out)
		}
	}
	dir := filepath.Join(dirs, "chart")
	if out, err := r.cosignDo(t, "save", "--dir", dir, r.reg+"/charts"+chart); err != nil {
		t.Fatalf("cosign save the chart: %v\n%s", err, out)
	}
	if out, err := r.cosignDo(t, "load", "--dir", dir, airgap+"/charts"+chart); err != nil {
		t.Fatalf("cosign load the chart: %v\n%s", err, out)
	}
	// cosign save keeps the index's signature and attestations (what the chart, and so a pod and an
	// admission policy, name), not each platform image's: checked as a policy would check it.
	for _, line := range strings.Split(strings.TrimSpace(string(read(t, filepath.Join(r.e.out, "images.txt")))), "\n") {
		src, digest, _ := strings.Cut(line, "@")
		ref := airgap + "/" + src[strings.LastIndex(src, "/")+1:strings.LastIndex(src, ":")] + "@" + digest
		r.mustVerify(t, "verify", ref)
		r.mustVerify(t, "verify-attestation", ref)
	}
	r.mustVerify(t, "verify", airgap+"/charts"+chart)
}

// verifyMirror: the script's verify passes against the images and chart under mirror.
func (r *registryCheck) verifyMirror(t *testing.T, mirror, how string) {
	t.Helper()
	e := r.e
	e.vars = append(append([]string{}, r.e.vars...), "IMAGE_REPO="+mirror, "REGISTRY=oci://"+mirror+"/charts")
	log, err := run(t, e, "verify", version)
	if err != nil || !strings.Contains(log, "verified in the registry") {
		t.Errorf("hack/release.sh verify against %s in %s: %v\n%s", how, mirror, err, log)
	}
}

// checkSourceBuiltSBOM: an image carrying the record the dataplane image's build writes
// (dataplane-image/build/package.sh sbom, run on the build tests' stand-in of F-Stack's tree with
// the Dockerfile's versions) gets an SBOM from the release's own syft run (hack/release.sh sbom)
// that lists F-Stack, DPDK and Nginx at those versions. The real dataplane image cannot be built
// here (F-Stack's source is out of reach); this is the path its SBOM takes.
func (r *registryCheck) checkSourceBuiltSBOM(t *testing.T) {
	df := string(read(t, filepath.Join(root, "dataplane-image", "Dockerfile")))
	arg := func(name string) string {
		m := regexp.MustCompile(`(?m)^ARG ` + name + `=(\S+)$`).FindStringSubmatch(df)
		if m == nil {
			t.Fatalf("dataplane-image/Dockerfile has no ARG %s=<value>", name)
		}
		return m[1]
	}
	fstack, dpdk, commit := arg("FSTACK_VERSION"), arg("DPDK_VERSION"), arg("FSTACK_COMMIT")
	tree := filepath.Join(root, "dataplane-image", "build", "testdata", "fstack")
	rootfs := t.TempDir()
	sbomDir := filepath.Join(rootfs, "usr", "share", "doc", "kube-fstack", "sbom")
	for _, app := range [][]string{nil, {"nginx"}} {
		cmd := exec.Command("bash", append([]string{filepath.Join(root, "dataplane-image", "build", "package.sh"), "sbom", tree, sbomDir}, app...)...)
		cmd.Env = append(os.Environ(), "FSTACK_VERSION="+fstack, "DPDK_VERSION="+dpdk, "FSTACK_COMMIT="+commit)
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("package.sh sbom %v: %v\n%s", app, err, out)
		}
	}
	name := "localhost/kube-fstack-release-test/source-built:" + version
	ctr := r.buildah(t, "from", "scratch")
	r.buildah(t, "copy", ctr, rootfs, "/")
	r.buildah(t, "commit", "-q", ctr, name)
	r.buildah(t, "rm", ctr)
	r.parent.Cleanup(func() { _ = exec.Command("buildah", "rmi", name).Run() })
	r.unsigned = name
	archive := filepath.Join(t.TempDir(), "source-built.oci.tar")
	r.buildah(t, "push", "-q", name, "oci-archive:"+archive)

	out := filepath.Join(t.TempDir(), "sbom.spdx.json")
	if log, err := run(t, r.e, "sbom", version, "oci-archive:"+archive, out); err != nil {
		t.Fatalf("hack/release.sh sbom: %v\n%s", err, log)
	}
	var doc struct {
		Packages []struct {
			Name        string `json:"name"`
			VersionInfo string `json:"versionInfo"`
		} `json:"packages"`
	}
	decode(t, read(t, out), &doc)
	have := map[string]string{}
	for _, p := range doc.Packages {
		have[p.Name] = p.VersionInfo
	}
	nginx := regexp.MustCompile(`NGINX_DIR=\$\{NGINX_DIR:-app/nginx-([0-9.]+)\}`).FindStringSubmatch(string(read(t, filepath.Join(root, "dataplane-image", "build", "build-apps.sh"))))
	if nginx == nil {
		t.Fatal("build-apps.sh names no app/nginx-<version>")
	}
	if have["f-stack"] != fstack || !strings.HasPrefix(have["dpdk"], dpdk) || have["nginx"] != nginx[1] {
		t.Errorf("the release's SBOM of an image built from source lists f-stack %q, dpdk %q, nginx %q; want %s, %s.x, %s",
			have["f-stack"], have["dpdk"], have["nginx"], fstack, dpdk, nginx[1])
	}
}

// checkRefused: what a policy engine must refuse is refused: an image nobody signed (no signature,
// no attestation), one signed with another key, a copy of the release without its signatures
// (the script's verify names it), and the release's tag moved to another image.
func (r *registryCheck) checkRefused(t *testing.T) {
	if r.unsigned == "" {
		t.Fatal("no unsigned image: DataplaneSBOMListsWhatItBuildsFromSource did not run")
	}
	unsigned := imageRepo + "/unsigned:" + strings.TrimPrefix(version, "v")
	r.buildah(t, "push", "-q", "--tls-verify=false", r.unsigned, "docker://"+unsigned)
	r.mustNotVerify(t, "an image nobody signed", "verify", unsigned)
	r.mustNotVerify(t, "an image nobody attested", "verify-attestation", unsigned)

	other := t.TempDir()
	genKey(t, r.cosign, other)
	if out, err := r.cosignDo(t, "sign", "--yes", "--key", filepath.Join(other, "cosign.key"), "--tlog-upload=false", unsigned); err != nil {
		t.Fatalf("cosign sign with another key: %v\n%s", err, out)
	}
	r.mustNotVerify(t, "an image signed with another key", "verify", unsigned)
	if out, err := r.cosignDo(t, "verify", "--key", filepath.Join(other, "cosign.pub"), "--insecure-ignore-tlog=true", unsigned); err != nil {
		t.Errorf("the other key's own signature does not verify (so the refusal above proves nothing): %v\n%s", err, out)
	}

	// The release's images copied without their signatures (buildah, not cosign copy).
	bare := r.reg + "/bare"
	r.buildah(t, "manifest", "push", "-q", "--all", "--format", "oci", "--tls-verify=false", imageRepo+"/cni:"+version, "docker://"+bare+"/cni:"+version)
	e := r.e
	e.vars = append(append([]string{}, r.e.vars...), "IMAGE_REPO="+bare)
	if log, err := run(t, e, "verify", version); err == nil || !strings.Contains(log, "image "+bare+"/cni@") || !strings.Contains(log, "has no signature that verifies") {
		t.Errorf("hack/release.sh verify against a copy without signatures: %v, want the image named as unsigned:\n%s", err, log)
	}

	// The release's tag moved to another image: verifying by tag (what a pod naming the tag gets)
	// fails, verifying the digest the chart names still passes.
	moved := imageRepo + "/cni:" + version
	r.buildah(t, "push", "-q", "--tls-verify=false", r.unsigned, "docker://"+moved)
	r.mustNotVerify(t, "the release's tag moved to an unsigned image", "verify", moved)
	digest := strings.TrimSpace(string(read(t, filepath.Join(r.e.out, "images", "cni.digest"))))
	r.mustVerify(t, "verify", imageRepo+"/cni@"+digest)
}
