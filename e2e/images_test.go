package e2e

import (
	"archive/tar"
	"compress/gzip"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"os"
	"path"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// ociImage is what the test reads from an OCI archive (hack/lib/image.sh, export_image): the
// digests a runtime reports for the image, its config, and the files of its layers.
type ociImage struct {
	manifestDigest, configDigest string
	config                       struct {
		Config struct {
			User       string   `json:"User"`
			Entrypoint []string `json:"Entrypoint"`
		} `json:"config"`
	}
	files map[string]bool
}

// noticeFiles are the licence notices every image ships (NOTICE says what each artifact holds).
var noticeFiles = []string{"usr/share/doc/kube-fstack/LICENSE", "usr/share/doc/kube-fstack/NOTICE", "usr/share/doc/kube-fstack/THIRD_PARTY_NOTICES"}

// TestImagesFromDockerfiles: the operator and CNI pods the chart runs on the local cluster run
// exactly the images built from ./Dockerfile and cni/Dockerfile (make image-operator, make
// image-cni), and those images are what the Dockerfiles promise: the operator non-root on an
// empty base with its licence notices, the CNI image with every command under cni/cmd and the
// same notices.
func TestImagesFromDockerfiles(t *testing.T) {
	archive := func(name string) string {
		v := os.Getenv(name)
		if v == "" {
			t.Fatalf("%s is not set: run the suite with `make e2e` (hack/cluster/lib.sh, e2e_env, names the image archives)", name)
		}
		return v
	}
	op := readOCIArchive(t, archive("E2E_OPERATOR_ARCHIVE"))
	cni := readOCIArchive(t, archive("E2E_CNI_ARCHIVE"))

	if op.config.Config.User != "65532:65532" || !op.files["fstack-operator"] || !op.files["etc/passwd"] {
		t.Errorf("operator image: user %q, files %v; want user 65532:65532, /fstack-operator and /etc/passwd",
			op.config.Config.User, op.files)
	}
	want := map[string]bool{"fstack-operator": true, "etc/passwd": true, "etc/group": true}
	for _, n := range noticeFiles {
		want[n] = true
		if !cni.files[n] {
			t.Errorf("the CNI image lacks /%s; it holds %v", n, cni.files)
		}
	}
	if !maps.Equal(op.files, want) {
		t.Errorf("operator image holds %v; want only the binary, /etc/passwd, /etc/group and the notices %v on an empty base", op.files, noticeFiles)
	}
	cmds, err := os.ReadDir("../cni/cmd")
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range cmds {
		if c.IsDir() && !cni.files["usr/local/bin/"+c.Name()] {
			t.Errorf("the CNI image lacks /usr/local/bin/%s (cni/cmd/%s); it holds %v", c.Name(), c.Name(), cni.files)
		}
	}
	if ep := cni.config.Config.Entrypoint; len(ep) != 1 || ep[0] != "/usr/local/bin/fstack-cni-installer" {
		t.Errorf("CNI image entrypoint %v; want the installer", ep)
	}

	checkPodsRun(t, "app.kubernetes.io/component=operator", "localhost/kube-fstack/operator:dev", op)
	checkPodsRun(t, "app.kubernetes.io/component=cni", "localhost/kube-fstack/cni:dev", cni)
}

// checkPodsRun: the release's pods with the component label run image (at least one container
// does) and every container of that image runs the archive's image, by digest.
func checkPodsRun(t *testing.T, component, image string, want *ociImage) {
	t.Helper()
	pods, err := env.Clientset.CoreV1().Pods(env.Namespace).List(context.Background(),
		metav1.ListOptions{LabelSelector: component + ",app.kubernetes.io/instance=" + env.Release})
	if err != nil {
		t.Fatal(err)
	}
	seen := 0
	for _, p := range pods.Items {
		for _, s := range p.Status.ContainerStatuses {
			if s.Image != image && !strings.HasSuffix(s.Image, "/"+image) {
				continue
			}
			seen++
			if !runsDigest(s, want) {
				t.Errorf("pod %s container %s runs %s (imageID %s), not the archive's image (manifest %s, config %s)",
					p.Name, s.Name, s.Image, s.ImageID, want.manifestDigest, want.configDigest)
			}
		}
	}
	if seen == 0 {
		t.Errorf("no running container of image %s among the pods labelled %s in %s", image, component, env.Namespace)
	}
}

// runsDigest: containerd reports an imported image by its config digest (the image ID) or, with
// a repo digest, by its manifest's.
func runsDigest(s corev1.ContainerStatus, want *ociImage) bool {
	return s.ImageID != "" && (strings.HasSuffix(s.ImageID, want.configDigest) || strings.HasSuffix(s.ImageID, "@"+want.manifestDigest))
}

// readOCIArchive reads the one image of an OCI archive: index -> manifest -> config and layers.
func readOCIArchive(t *testing.T, file string) *ociImage {
	t.Helper()
	blobs, err := archiveBlobs(file)
	if err != nil {
		t.Fatalf("%s: %v", file, err)
	}
	var index, manifest struct {
		Manifests []struct{ Digest string } `json:"manifests"`
		Config    struct{ Digest string }   `json:"config"`
		Layers    []struct {
			Digest, MediaType string
		} `json:"layers"`
	}
	img := &ociImage{files: map[string]bool{}}
	if err := json.Unmarshal(blobs["index.json"], &index); err != nil || len(index.Manifests) != 1 {
		t.Fatalf("%s: index.json: want one manifest (%v): %s", file, err, blobs["index.json"])
	}
	img.manifestDigest = index.Manifests[0].Digest
	if err := json.Unmarshal(blobs[img.manifestDigest], &manifest); err != nil {
		t.Fatalf("%s: manifest %s: %v", file, img.manifestDigest, err)
	}
	img.configDigest = manifest.Config.Digest
	if err := json.Unmarshal(blobs[img.configDigest], &img.config); err != nil {
		t.Fatalf("%s: config %s: %v", file, img.configDigest, err)
	}
	for _, l := range manifest.Layers {
		if err := layerFiles(blobs[l.Digest], strings.HasSuffix(l.MediaType, "gzip"), img.files); err != nil {
			t.Fatalf("%s: layer %s: %v", file, l.Digest, err)
		}
	}
	return img
}

// archiveBlobs: index.json and each blob of an OCI archive, blobs keyed "sha256:<hex>".
func archiveBlobs(file string) (map[string][]byte, error) {
	f, err := os.Open(file)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	out := map[string][]byte{}
	tr := tar.NewReader(f)
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return out, nil
		}
		if err != nil {
			return nil, err
		}
		name := path.Clean(h.Name)
		key := name
		if dir, hex := path.Split(name); dir == "blobs/sha256/" {
			key = "sha256:" + hex
		} else if name != "index.json" {
			continue
		}
		if out[key], err = io.ReadAll(tr); err != nil {
			return nil, fmt.Errorf("%s: %w", name, err)
		}
	}
}

// layerFiles adds the regular files of a layer tarball to files (paths without the leading /).
func layerFiles(blob []byte, gzipped bool, files map[string]bool) error {
	var r io.Reader = strings.NewReader(string(blob))
	if gzipped {
		zr, err := gzip.NewReader(r)
		if err != nil {
			return err
		}
		r = zr
	}
	tr := tar.NewReader(r)
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return err
		}
		if h.Typeflag == tar.TypeReg {
			files[strings.TrimPrefix(path.Clean(h.Name), "/")] = true
		}
	}
}
