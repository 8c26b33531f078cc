package facts

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/kube-fstack/kube-fstack/internal/podcontract"
	"github.com/kube-fstack/kube-fstack/internal/podcontract/snapshot"
	"github.com/kube-fstack/kube-fstack/internal/render"
)

// LoadSpec reads the StackInstance spec the injector snapshotted into the pod (JSON, the
// kubefstack.io/spec annotation exposed by the downward API), with the API version beside it
// (the file podcontract.PodInfoSpecVersion, the kubefstack.io/spec-version annotation), through
// the pod contract's one decoder (snapshot.Decode: the version first, then bounded and strict).
// Anyone who may edit the pod can change that annotation after admission, so the spec is then
// held to every bound and rule of the CRD (render.Prepare) before anything is sized by it.
func LoadSpec(path string) (*render.Spec, error) {
	version, err := readVersion(filepath.Join(filepath.Dir(path), podcontract.PodInfoSpecVersion))
	if err != nil {
		return nil, err
	}
	if err := snapshot.CheckVersion(version); err != nil {
		return nil, err
	}
	data, err := readBounded(path, podcontract.MaxSpecSnapshot)
	if err != nil {
		return nil, fmt.Errorf("StackInstance spec: %w (the injector exposes the %s annotation there through the downward API; use --spec-file to pass one directly)",
			err, podcontract.SpecAnnotation)
	}
	if len(bytes.TrimSpace(data)) == 0 {
		return nil, fmt.Errorf("StackInstance spec %s is empty: the pod has no %s annotation; was it created through the kube-fstack injector?",
			path, podcontract.SpecAnnotation)
	}
	spec, err := decodeChecked(data, version)
	if err != nil {
		return nil, fmt.Errorf("StackInstance spec %s (the pod's %s annotation): %w", path, podcontract.SpecAnnotation, err)
	}
	return spec, nil
}

// readVersion is the version file's content: "" when there is none (a pod injected before the
// version was projected, whose snapshot is v1alpha1's), and a value longer than any version
// (snapshot.MaxVersionBytes) read only that far, for CheckVersion to refuse.
func readVersion(path string) (string, error) {
	data, err := readBounded(path, snapshot.MaxVersionBytes)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return "", nil
	case errors.Is(err, snapshot.ErrTooLarge):
		return string(data) + "?", nil
	case err != nil:
		return "", fmt.Errorf("the pod's %s annotation: %w", podcontract.SpecVersionAnnotation, err)
	}
	return string(data), nil
}

// readBounded reads at most limit bytes of path and fails, with what it read, on a larger file.
func readBounded(path string, limit int) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, int64(limit)+1))
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", path, err)
	}
	if len(data) > limit {
		return data, fmt.Errorf("%s: more than %d bytes, %w", path, limit, snapshot.ErrTooLarge)
	}
	return data, nil
}

// DecodeSpec decodes a spec snapshot written by this API version and checks it as admission
// did (render.Prepare); problems come back with their field paths.
func DecodeSpec(data []byte) (*render.Spec, error) { return decodeChecked(data, "") }

func decodeChecked(data []byte, version string) (*render.Spec, error) {
	spec, err := snapshot.Decode(data, version)
	if err != nil {
		return nil, err
	}
	checked, errs := render.Prepare(spec)
	if len(errs) > 0 {
		return nil, &render.ValidationError{Errs: errs}
	}
	return checked, nil
}
