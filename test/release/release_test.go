// Package release runs `make release`'s script (hack/release.sh all) as a releaser would, pushing
// to a real OCI registry (distribution's, built at a pinned version by make) that it starts on
// loopback, and checks what it leaves: the CNI image for amd64 and arm64 as one index with its
// licenses inside, the chart naming that index by digest, the kubectl plugin's four archives with
// the license and notices, an SPDX SBOM per image and per binary listing what was linked,
// SHA256SUMS, and cosign signatures made with a throwaway key that verify, and stop verifying when
// a byte or the key changes; in the registry, each image's signature and SBOM attestations and the
// chart's signature, which verify, survive a `cosign copy` into another repository, and are
// refused for an unsigned, foreign-signed or re-tagged image. Only the CNI image is built (the
// operator's recipe is the same; the real dataplane image compiles F-Stack for half an hour), so
// the chart is pushed although it names the others by tag (RELEASE_PUSH_INCOMPLETE_CHART, which
// release.sh accepts only for a loopback registry). Run it with `make test-release` (root: buildah
// mounts image filesystems).
package release

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"crypto/sha256"
	"debug/buildinfo"
	"debug/elf"
	"debug/macho"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

const (
	version  = "v9.8.7-rc.1"
	password = "throwaway"
)

// imageRepo is where the release's images go: the test's registry (TestRelease sets it).
var imageRepo string

var root = filepath.Join("..", "..")

// tool is the pinned binary $ENV names (make test-release sets them) or the one make tools installed.
func tool(t *testing.T, env, glob string) string {
	t.Helper()
	if p := os.Getenv(env); p != "" {
		// A relative path is the repository root's, as make passes it.
		if !filepath.IsAbs(p) {
			p = filepath.Join(root, p)
		}
		a, err := filepath.Abs(p)
		if err != nil {
			t.Fatal(err)
		}
		return a
	}
	found, _ := filepath.Glob(filepath.Join(root, "bin", glob))
	if len(found) == 0 {
		t.Fatalf("%s not found: run `make tools` (or `make test-release`, which installs it)", glob)
	}
	a, _ := filepath.Abs(found[len(found)-1])
	return a
}

type env struct {
	out, key string
	vars     []string
}

func run(t *testing.T, e env, args ...string) (string, error) {
	t.Helper()
	cmd := exec.Command(filepath.Join(root, "hack", "release.sh"), args...)
	cmd.Env = append(os.Environ(), e.vars...)
	var b bytes.Buffer
	cmd.Stdout, cmd.Stderr = &b, &b
	err := cmd.Run()
	return b.String(), err
}

// TestRelease is one release run and every check of what it made (the run takes minutes, so the
// checks share it as subtests).
func TestRelease(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Fatal("make release builds images with buildah, which needs root: run `make test-release` as root")
	}
	if _, err := exec.LookPath("buildah"); err != nil {
		t.Fatal("buildah not found: hack/install-deps.sh installs it")
	}
	cosign := tool(t, "COSIGN", "cosign-v*")
	reg := startRegistry(t, tool(t, "REGISTRY_SERVER", "registry-v*"))
	imageRepo = reg + "/kube-fstack-release-test"
	keys := t.TempDir()
	genKey(t, cosign, keys)
	e := env{out: filepath.Join(t.TempDir(), "release"), key: filepath.Join(keys, "cosign.key")}
	e.vars = []string{
		"HELM=" + tool(t, "HELM", "helm-v*"), "COSIGN=" + cosign, "SYFT=" + tool(t, "SYFT", "syft-v*"),
		"COSIGN_KEY=" + e.key, "COSIGN_PASSWORD=" + password, "OUT=" + e.out,
		"IMAGE_REPO=" + imageRepo, "REGISTRY=oci://" + reg + "/charts", "REGISTRY_PLAIN_HTTP=1",
		"RELEASE_PUSH_INCOMPLETE_CHART=1", "RELEASE_IMAGES=cni", "IMAGE_PLATFORMS=linux/amd64 linux/arm64",
		"RELEASE_URL=https://downloads.example/" + version,
	}
	t.Cleanup(func() {
		for _, ref := range []string{imageRepo + "/cni:" + version, imageRepo + "/cni:" + version + "-amd64", imageRepo + "/cni:" + version + "-arm64"} {
			_ = exec.Command("buildah", "manifest", "rm", ref).Run()
			_ = exec.Command("buildah", "rmi", ref).Run()
		}
	})
	if log, err := run(t, e, "all", version); err != nil {
		t.Fatalf("hack/release.sh all %s: %v\n%s", version, err, log)
	}
	r := registryCheck{e: e, cosign: cosign, reg: reg, keys: keys, parent: t}

	t.Run("CNIImageIsOneIndexForAmd64AndArm64WithItsLicenses", func(t *testing.T) { checkImage(t, e) })
	t.Run("ChartNamesTheImageByDigest", func(t *testing.T) { checkChart(t, e) })
	t.Run("PluginArchivesForFourPlatformsWithLicense", func(t *testing.T) { checkArchives(t, e) })
	t.Run("SBOMPerImageAndBinaryListsWhatIsLinked", func(t *testing.T) { checkSBOMs(t, e) })
	t.Run("ChecksumsCoverEveryArtifact", func(t *testing.T) { checkSums(t, e) })
	t.Run("SignaturesVerifyAndFailWhenTamperedOrWrongKey", func(t *testing.T) { checkSignatures(t, e, cosign, keys) })
	t.Run("ImageListNamesEveryImageByDigest", func(t *testing.T) { checkImageList(t, e) })
	t.Run("DataplaneSBOMListsWhatItBuildsFromSource", func(t *testing.T) { r.checkSourceBuiltSBOM(t) })
	t.Run("RegistryHoldsVerifiedSignaturesAttestationsAndChartSignature", func(t *testing.T) { r.checkRegistry(t) })
	t.Run("RelocatedByCosignCopyStillVerifies", func(t *testing.T) { r.checkRelocation(t) })
	// Last: it moves the release's tag to another image.
	t.Run("UnsignedForeignSignedOrRetaggedImagesAreRefused", func(t *testing.T) { r.checkRefused(t) })
}

func genKey(t *testing.T, cosign, dir string) {
	t.Helper()
	cmd := exec.Command(cosign, "generate-key-pair")
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "COSIGN_PASSWORD="+password)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("cosign generate-key-pair: %v\n%s", err, out)
	}
}

func read(t *testing.T, p string) []byte {
	t.Helper()
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// oci is an OCI image layout read from an archive: its files by path.
type oci map[string][]byte

func readOCI(t *testing.T, path string) oci {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	files, err := untar(f)
	if err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	return files
}

func untar(r io.Reader) (map[string][]byte, error) {
	files := map[string][]byte{}
	tr := tar.NewReader(r)
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return files, nil
		}
		if err != nil {
			return nil, err
		}
		if h.Typeflag != tar.TypeReg {
			continue
		}
		b, err := io.ReadAll(tr)
		if err != nil {
			return nil, err
		}
		files[strings.TrimPrefix(h.Name, "./")] = b
	}
}

func (o oci) blob(t *testing.T, digest string) []byte {
	t.Helper()
	b, ok := o["blobs/sha256/"+strings.TrimPrefix(digest, "sha256:")]
	if !ok {
		t.Fatalf("the archive has no blob %s", digest)
	}
	sum := sha256.Sum256(b)
	if "sha256:"+hex.EncodeToString(sum[:]) != digest {
		t.Fatalf("blob %s does not hash to its name", digest)
	}
	return b
}

type descriptor struct {
	MediaType string `json:"mediaType"`
	Digest    string `json:"digest"`
	Platform  *struct {
		Architecture string `json:"architecture"`
		OS           string `json:"os"`
	} `json:"platform"`
}

type manifest struct {
	MediaType string       `json:"mediaType"`
	Manifests []descriptor `json:"manifests"`
	Config    descriptor   `json:"config"`
	Layers    []descriptor `json:"layers"`
}

func decode(t *testing.T, b []byte, v any) {
	t.Helper()
	if err := json.Unmarshal(b, v); err != nil {
		t.Fatalf("%v in %s", err, b)
	}
}

// checkImage: images/cni.oci.tar's index is the digest images/cni.digest names, it lists a linux
// image for amd64 and one for arm64, and each holds its binaries built for that architecture and
// the licenses (/usr/share/doc/kube-fstack: LICENSE, NOTICE, THIRD_PARTY_NOTICES of its modules).
func checkImage(t *testing.T, e env) {
	digest := strings.TrimSpace(string(read(t, filepath.Join(e.out, "images", "cni.digest"))))
	img := readOCI(t, filepath.Join(e.out, "images", "cni.oci.tar"))
	var top manifest
	decode(t, img["index.json"], &top)
	if len(top.Manifests) != 1 || top.Manifests[0].Digest != digest {
		t.Fatalf("the archive's index.json names %+v, want the one index %s (images/cni.digest)", top.Manifests, digest)
	}
	var index manifest
	decode(t, img.blob(t, digest), &index)
	arches := map[string]elf.Machine{"amd64": elf.EM_X86_64, "arm64": elf.EM_AARCH64}
	seen := map[string]bool{}
	for _, m := range index.Manifests {
		if m.Platform == nil || m.Platform.OS != "linux" {
			t.Errorf("index entry %s has platform %+v, want linux/amd64 or linux/arm64", m.Digest, m.Platform)
			continue
		}
		arch := m.Platform.Architecture
		want, ok := arches[arch]
		if !ok || seen[arch] {
			t.Errorf("index entry %s: architecture %q unexpected or repeated", m.Digest, arch)
			continue
		}
		seen[arch] = true
		var im manifest
		decode(t, img.blob(t, m.Digest), &im)
		files := map[string][]byte{}
		for _, l := range im.Layers {
			zr, err := gzip.NewReader(bytes.NewReader(img.blob(t, l.Digest)))
			if err != nil {
				t.Fatalf("layer %s: %v", l.Digest, err)
			}
			fs, err := untar(zr)
			if err != nil {
				t.Fatalf("layer %s: %v", l.Digest, err)
			}
			for k, v := range fs {
				files[k] = v
			}
		}
		bin := files["usr/local/bin/fstack-cni"]
		if bin == nil {
			t.Fatalf("%s image has no usr/local/bin/fstack-cni", arch)
		}
		ef, err := elf.NewFile(bytes.NewReader(bin))
		if err != nil || ef.Machine != want {
			t.Errorf("%s image's fstack-cni is not a %v ELF binary (%v)", arch, want, err)
		}
		checkDocs(t, arch+" image", files, "usr/share/doc/kube-fstack/", bin)
	}
	if !seen["amd64"] || !seen["arm64"] {
		t.Errorf("the index has %v, want amd64 and arm64", seen)
	}
}

// checkDocs: the directory holds the project's LICENSE and NOTICE as in the tree, and
// THIRD_PARTY_NOTICES naming every module the binary links, with a license text.
func checkDocs(t *testing.T, what string, files map[string][]byte, dir string, bin []byte) {
	t.Helper()
	for _, f := range []string{"LICENSE", "NOTICE"} {
		if !bytes.Equal(files[dir+f], read(t, filepath.Join(root, f))) {
			t.Errorf("%s: %s%s is missing or differs from the tree's %s", what, dir, f, f)
		}
	}
	notices := string(files[dir+"THIRD_PARTY_NOTICES"])
	if notices == "" {
		t.Fatalf("%s: no %sTHIRD_PARTY_NOTICES", what, dir)
	}
	for _, m := range linkedModules(t, bin) {
		if !strings.Contains(notices, "\n"+m+" (in ") {
			t.Errorf("%s: THIRD_PARTY_NOTICES has no section for %s, which the binary links", what, m)
		}
	}
	if !strings.Contains(notices, "Permission is hereby granted") && !strings.Contains(notices, "Redistribution and use in source and binary forms") {
		t.Errorf("%s: THIRD_PARTY_NOTICES carries no license text", what)
	}
}

// linkedModules: "path version" of every module in the binary's build information, the standard
// library as "The Go standard library and runtime, goX".
func linkedModules(t *testing.T, bin []byte) []string {
	t.Helper()
	info, err := buildinfo.Read(bytes.NewReader(bin))
	if err != nil {
		t.Fatalf("no build information: %v", err)
	}
	mods := []string{"The Go standard library and runtime, " + info.GoVersion}
	for _, d := range info.Deps {
		if d.Replace != nil {
			d = d.Replace
		}
		mods = append(mods, d.Path+" "+d.Version)
	}
	return mods
}

// checkChart: the package's cni image is IMAGE_REPO/cni@<the index's digest>; the images not
// built are named by the version's tag.
func checkChart(t *testing.T, e env) {
	digest := strings.TrimSpace(string(read(t, filepath.Join(e.out, "images", "cni.digest"))))
	tgz := filepath.Join(e.out, "kube-fstack-"+strings.TrimPrefix(version, "v")+".tgz")
	cmd := exec.Command(tool(t, "HELM", "helm-v*"), "template", "kube-fstack", tgz, "--namespace", "kube-fstack-system", "--kube-version", "1.35.4")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("helm template %s: %v\n%s", tgz, err, stderr.String())
	}
	for _, want := range []string{
		"image: " + imageRepo + "/cni@" + digest,
		"image: " + imageRepo + "/operator:" + version,
		"--dataplane-image=" + imageRepo + "/dataplane:" + version,
	} {
		if !bytes.Contains(out, []byte(want)) {
			t.Errorf("the packaged chart renders no %q", want)
		}
	}
}

// checkArchives: four archives, each with kubectl-fstack built for its platform, LICENSE, NOTICE
// and THIRD_PARTY_NOTICES; the krew manifest has each archive's sha256 and installs LICENSE too.
func checkArchives(t *testing.T, e env) {
	manifest := string(read(t, filepath.Join(e.out, "fstack.yaml")))
	for _, goos := range []string{"linux", "darwin"} {
		for _, arch := range []string{"amd64", "arm64"} {
			name := fmt.Sprintf("kubectl-fstack_%s_%s_%s.tar.gz", version, goos, arch)
			b := read(t, filepath.Join(e.out, name))
			zr, err := gzip.NewReader(bytes.NewReader(b))
			if err != nil {
				t.Fatalf("%s: %v", name, err)
			}
			files, err := untar(zr)
			if err != nil {
				t.Fatalf("%s: %v", name, err)
			}
			bin := files["kubectl-fstack"]
			if bin == nil {
				t.Fatalf("%s has no kubectl-fstack", name)
			}
			if got := binaryPlatform(bin); got != goos+"/"+arch {
				t.Errorf("%s's kubectl-fstack is built for %q", name, got)
			}
			checkDocs(t, name, files, "", bin)
			sum := sha256.Sum256(b)
			if !strings.Contains(manifest, "sha256: "+hex.EncodeToString(sum[:])) || !strings.Contains(manifest, "uri: https://downloads.example/"+version+"/"+name) {
				t.Errorf("fstack.yaml lacks %s's uri or sha256", name)
			}
		}
	}
	if strings.Count(manifest, "from: LICENSE") != 4 {
		t.Errorf("fstack.yaml does not install LICENSE on every platform:\n%s", manifest)
	}
}

func binaryPlatform(b []byte) string {
	if f, err := elf.NewFile(bytes.NewReader(b)); err == nil {
		switch f.Machine {
		case elf.EM_X86_64:
			return "linux/amd64"
		case elf.EM_AARCH64:
			return "linux/arm64"
		}
	}
	if f, err := macho.NewFile(bytes.NewReader(b)); err == nil {
		switch f.Cpu {
		case macho.CpuAmd64:
			return "darwin/amd64"
		case macho.CpuArm64:
			return "darwin/arm64"
		}
	}
	return "unknown"
}

// checkSBOMs: an SPDX document per image architecture and per plugin binary, each listing every
// Go module its binaries link.
func checkSBOMs(t *testing.T, e env) {
	type spdx struct {
		SPDXVersion string `json:"spdxVersion"`
		Packages    []struct {
			Name        string `json:"name"`
			VersionInfo string `json:"versionInfo"`
		} `json:"packages"`
	}
	want := map[string]string{}
	for _, arch := range []string{"amd64", "arm64"} {
		want["cni_linux_"+arch] = ""
	}
	for _, goos := range []string{"linux", "darwin"} {
		for _, arch := range []string{"amd64", "arm64"} {
			want[fmt.Sprintf("kubectl-fstack_%s_%s_%s", version, goos, arch)] = fmt.Sprintf("kubectl-fstack_%s_%s_%s.tar.gz", version, goos, arch)
		}
	}
	for name, archive := range want {
		var doc spdx
		decode(t, read(t, filepath.Join(e.out, "sbom", name+".spdx.json")), &doc)
		if !strings.HasPrefix(doc.SPDXVersion, "SPDX-2.") {
			t.Errorf("sbom/%s.spdx.json: spdxVersion %q, want SPDX-2.x", name, doc.SPDXVersion)
		}
		have := map[string]bool{}
		for _, p := range doc.Packages {
			have[p.Name+" "+p.VersionInfo] = true
		}
		if archive == "" {
			// The image: at least the modules of the CNI plugin it carries.
			if !have["github.com/containernetworking/cni "+moduleVersion(t, "github.com/containernetworking/cni")] {
				t.Errorf("sbom/%s.spdx.json does not list github.com/containernetworking/cni, which fstack-cni links", name)
			}
			continue
		}
		zr, err := gzip.NewReader(bytes.NewReader(read(t, filepath.Join(e.out, archive))))
		if err != nil {
			t.Fatal(err)
		}
		files, err := untar(zr)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range linkedModules(t, files["kubectl-fstack"])[1:] {
			if !have[m] {
				t.Errorf("sbom/%s.spdx.json does not list %s, which the binary links", name, m)
			}
		}
	}
}

// moduleVersion is the version go.mod's build list selects.
func moduleVersion(t *testing.T, mod string) string {
	t.Helper()
	cmd := exec.Command("go", "list", "-m", "-f", "{{.Version}}", mod)
	cmd.Dir = root
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list -m %s: %v", mod, err)
	}
	return strings.TrimSpace(string(out))
}

// checkSums: SHA256SUMS lists every file of the release (but the signatures and the public key)
// with its hash.
func checkSums(t *testing.T, e env) {
	listed := map[string]string{}
	for _, l := range strings.Split(strings.TrimSpace(string(read(t, filepath.Join(e.out, "SHA256SUMS")))), "\n") {
		f := strings.Fields(l)
		if len(f) != 2 {
			t.Fatalf("SHA256SUMS line %q", l)
		}
		listed[f[1]] = f[0]
	}
	n := 0
	err := filepath.Walk(e.out, func(p string, fi os.FileInfo, err error) error {
		if err != nil || fi.IsDir() {
			return err
		}
		rel, _ := filepath.Rel(e.out, p)
		if strings.HasSuffix(rel, ".sig") || rel == "SHA256SUMS" || rel == "cosign.pub" {
			return nil
		}
		n++
		sum := sha256.Sum256(read(t, p))
		if listed[rel] != hex.EncodeToString(sum[:]) {
			t.Errorf("SHA256SUMS: %s listed as %q, want its sha256", rel, listed[rel])
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if n != len(listed) || n < 12 {
		t.Errorf("SHA256SUMS lists %d files, the release has %d", len(listed), n)
	}
}

// checkSignatures: every artifact and SHA256SUMS has a signature that cosign verifies with the
// release's public key, the image's signature payload names its index digest, the script's own
// verify passes; a changed byte, and another key, make it fail.
func checkSignatures(t *testing.T, e env, cosign, keys string) {
	pub := filepath.Join(e.out, "cosign.pub")
	want := read(t, filepath.Join(keys, "cosign.pub"))
	if !bytes.Equal(bytes.TrimSpace(read(t, pub)), bytes.TrimSpace(want)) {
		t.Fatalf("cosign.pub is not the public half of COSIGN_KEY")
	}
	signed := map[string]string{"signatures/cni.payload.json": "signatures/cni.sig"}
	for _, f := range []string{"SHA256SUMS", "fstack.yaml", "images/cni.oci.tar", "kube-fstack-" + strings.TrimPrefix(version, "v") + ".tgz"} {
		signed[f] = f + ".sig"
	}
	for f, sig := range signed {
		cmd := exec.Command(cosign, "verify-blob", "--key", pub, "--insecure-ignore-tlog=true",
			"--signature", filepath.Join(e.out, sig), filepath.Join(e.out, f))
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Errorf("cosign verify-blob %s: %v\n%s", f, err, out)
		}
	}
	var payload struct {
		Critical struct {
			Identity struct {
				DockerReference string `json:"docker-reference"`
			} `json:"identity"`
			Image struct {
				Digest string `json:"docker-manifest-digest"`
			} `json:"image"`
		} `json:"critical"`
	}
	decode(t, read(t, filepath.Join(e.out, "signatures", "cni.payload.json")), &payload)
	digest := strings.TrimSpace(string(read(t, filepath.Join(e.out, "images", "cni.digest"))))
	if payload.Critical.Image.Digest != digest || payload.Critical.Identity.DockerReference != imageRepo+"/cni" {
		t.Errorf("the image signature's payload names %+v, want %s/cni at %s", payload.Critical, imageRepo, digest)
	}
	if log, err := run(t, e, "verify", version); err != nil {
		t.Fatalf("hack/release.sh verify: %v\n%s", err, log)
	}

	// Another key: what the release holds does not verify with it.
	other := t.TempDir()
	genKey(t, cosign, other)
	e2 := e
	e2.vars = append(append([]string{}, e.vars...), "COSIGN_KEY="+filepath.Join(other, "cosign.key"))
	if log, err := run(t, e2, "verify", version); err == nil {
		t.Errorf("hack/release.sh verify passed with a key that did not sign the release:\n%s", log)
	}

	// A deleted signature, of an artifact or of an image: verify fails, naming it (issue 38; it
	// used to skip a file without one).
	for _, sig := range []string{"fstack.yaml.sig", "signatures/cni.sig"} {
		path := filepath.Join(e.out, sig)
		saved := read(t, path)
		if err := os.Remove(path); err != nil {
			t.Fatal(err)
		}
		log, err := run(t, e, "verify", version)
		if err == nil || !strings.Contains(log, sig+" missing") {
			t.Errorf("hack/release.sh verify with %s deleted: %v, want a failure naming it:\n%s", sig, err, log)
		}
		if err := os.WriteFile(path, saved, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	// An image's signature that is another file's (a valid signature of the release's key, over
	// something else): verify fails on the image. Signatures are not in SHA256SUMS, so only the
	// image's check can catch it.
	imageSig := filepath.Join(e.out, "signatures", "cni.sig")
	origSig := read(t, imageSig)
	if err := os.WriteFile(imageSig, read(t, filepath.Join(e.out, "fstack.yaml.sig")), 0o644); err != nil {
		t.Fatal(err)
	}
	if log, err := run(t, e, "verify", version); err == nil || !strings.Contains(log, "signatures/cni.payload.json does not verify") {
		t.Errorf("hack/release.sh verify with another file's signature as the image's: %v, want the image's signature refused:\n%s", err, log)
	}
	if err := os.WriteFile(imageSig, origSig, 0o644); err != nil {
		t.Fatal(err)
	}

	// One byte changed in a signed file (its checksum updated too, so the signature must catch it).
	manifest := filepath.Join(e.out, "fstack.yaml")
	orig := read(t, manifest)
	tampered := append([]byte{}, orig...)
	tampered[len(tampered)-2] ^= 1
	if err := os.WriteFile(manifest, tampered, 0o644); err != nil {
		t.Fatal(err)
	}
	sums := filepath.Join(e.out, "SHA256SUMS")
	origSums := read(t, sums)
	a, b := sha256.Sum256(orig), sha256.Sum256(tampered)
	if err := os.WriteFile(sums, bytes.Replace(origSums, []byte(hex.EncodeToString(a[:])), []byte(hex.EncodeToString(b[:])), 1), 0o644); err != nil {
		t.Fatal(err)
	}
	log, err := run(t, e, "verify", version)
	if err == nil {
		t.Errorf("hack/release.sh verify passed with fstack.yaml and SHA256SUMS changed after signing:\n%s", log)
	} else if !strings.Contains(log, "does not verify") {
		t.Errorf("hack/release.sh verify failed, but not on a signature:\n%s", log)
	}
	// The release as it was, for the checks after this one.
	if err := os.WriteFile(manifest, orig, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(sums, origSums, 0o644); err != nil {
		t.Fatal(err)
	}
}
