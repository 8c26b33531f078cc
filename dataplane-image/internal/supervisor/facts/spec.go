package facts

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	kjson "sigs.k8s.io/json"

	fsv1 "github.com/kube-fstack/kube-fstack/api/v1alpha1"
	"github.com/kube-fstack/kube-fstack/internal/podcontract"
	"github.com/kube-fstack/kube-fstack/internal/render"
)

// MaxSpecBytes bounds the spec file: the API server caps all of a pod's annotations together at
// 256 KiB, so a larger file did not come from one.
const MaxSpecBytes = 256 << 10

// LoadSpec reads the StackInstance spec the injector snapshotted into the pod (JSON, the
// kubefstack.io/spec annotation exposed by the downward API). Anyone who may edit the pod can
// change that annotation after admission, so it is read like any untrusted input: bounded,
// strictly decoded, and held to every bound of the CRD before anything is sized by it.
//
// The API version that wrote it is checked first (the file podcontract.PodInfoSpecVersion beside
// it, the kubefstack.io/spec-version annotation): a spec this image cannot read is refused before
// any of it is decoded.
func LoadSpec(path string) (*render.Spec, error) {
	if err := checkSpecVersion(filepath.Join(filepath.Dir(path), podcontract.PodInfoSpecVersion)); err != nil {
		return nil, err
	}
	data, err := readBounded(path, MaxSpecBytes)
	if err != nil {
		return nil, fmt.Errorf("StackInstance spec: %w (the injector exposes the kubefstack.io/spec annotation there through the downward API; use --spec-file to pass one directly)", err)
	}
	if len(bytes.TrimSpace(data)) == 0 {
		return nil, fmt.Errorf("StackInstance spec %s is empty: the pod has no kubefstack.io/spec annotation; was it created through the kube-fstack injector?", path)
	}
	spec, err := DecodeSpec(data)
	if err != nil {
		return nil, fmt.Errorf("StackInstance spec %s (the pod's kubefstack.io/spec annotation): %w", path, err)
	}
	return spec, nil
}

// maxSpecVersionBytes bounds the version file: a group/version is a few dozen bytes.
const maxSpecVersionBytes = 256

// checkSpecVersion refuses a spec written by an API version this image does not read. No file (a
// pod injected before the version was projected) or an empty one (no annotation) is a snapshot
// the operator wrote before it wrote versions, which was v1alpha1's. When a later API version
// changes the spec, this is where its snapshot is told apart and converted.
func checkSpecVersion(path string) error {
	data, err := readBounded(path, maxSpecVersionBytes)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return nil
	case errors.Is(err, errTooLarge):
		return fmt.Errorf("the pod's %s annotation (%s) is more than %d bytes, longer than any API version: it was edited "+
			"after admission; re-create the pod", podcontract.SpecVersionAnnotation, path, maxSpecVersionBytes)
	case err != nil:
		return fmt.Errorf("the pod's %s annotation: %w", podcontract.SpecVersionAnnotation, err)
	}
	v := strings.TrimSpace(string(data))
	if v == "" || v == fsv1.GroupVersion.String() {
		return nil
	}
	return fmt.Errorf("the pod's %s annotation says the StackInstance spec is %q, which this dataplane image does not read "+
		"(it reads %s): the pod was injected by a newer kube-fstack operator than this image, or the annotation was edited; "+
		"run the dataplane image of the operator's release (upgrade spec.dataplane.image of the StackInstance, or the "+
		"operator's --dataplane-image), or re-create the pod",
		podcontract.SpecVersionAnnotation, clip(v), fsv1.GroupVersion.String())
}

// clip bounds a value from the pod for a message.
func clip(s string) string {
	if len(s) > 64 {
		return s[:64] + "..."
	}
	return s
}

var errTooLarge = errors.New("larger than the API server allows a pod's annotations")

// readBounded reads at most limit bytes of path and fails on a larger file.
func readBounded(path string, limit int64) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, limit+1))
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", path, err)
	}
	if int64(len(data)) > limit {
		return nil, fmt.Errorf("%s: more than %d bytes, %w", path, limit, errTooLarge)
	}
	return data, nil
}

// DecodeSpec decodes a spec the way the API server would accept it: one JSON object, field
// names matched exactly, no repeated fields, and every bound and rule of the CRD embedded in this
// binary, and every other check of the renderer (render.Prepare); problems come back with their field paths. Unknown fields are ignored,
// as the API server's own clients do: the operator writes the spec with its defaults applied, so a
// newer operator's new defaulted field must not stop a pod whose StackInstance pins an older
// dataplane image. An ignored field changes nothing, so it gives an editor of the annotation no power.
func DecodeSpec(data []byte) (*render.Spec, error) {
	if len(data) > MaxSpecBytes {
		return nil, fmt.Errorf("%d bytes, %w", len(data), errTooLarge)
	}
	var spec fsv1.StackInstanceSpec
	strict, err := kjson.UnmarshalStrict(data, &spec, kjson.DisallowDuplicateFields)
	if err != nil {
		return nil, fmt.Errorf("not valid JSON for a StackInstance spec: %w", err)
	}
	if len(strict) > 0 {
		return nil, fmt.Errorf("not a StackInstance spec as the API server stores it: %w", errors.Join(strict...))
	}
	checked, errs := render.Prepare(&spec)
	if len(errs) > 0 {
		return nil, &render.ValidationError{Errs: errs}
	}
	return checked, nil
}
