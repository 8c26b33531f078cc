package supervisor

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"

	fsv1 "github.com/kube-fstack/kube-fstack/api/v1alpha1"
)

// LoadSpec reads the StackInstance spec the injector snapshotted into the pod (JSON, the
// kubefstack.io/spec annotation exposed by the downward API).
func LoadSpec(path string) (*fsv1.StackInstanceSpec, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("StackInstance spec: %w (the injector exposes the kubefstack.io/spec annotation there through the downward API; use --spec-file to pass one directly)", err)
	}
	if len(bytes.TrimSpace(data)) == 0 {
		return nil, fmt.Errorf("StackInstance spec %s is empty: the pod has no kubefstack.io/spec annotation; was it created through the kube-fstack injector?", path)
	}
	var spec fsv1.StackInstanceSpec
	if err := json.Unmarshal(data, &spec); err != nil {
		return nil, fmt.Errorf("StackInstance spec %s is not valid JSON for a StackInstance spec: %w", path, err)
	}
	return &spec, nil
}
