// Package manifest reads StackInstance manifests (YAML or JSON, several documents per file) and
// pod files the way the API server would: unknown fields are errors, so a typo never silently
// drops a setting.
package manifest

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"

	corev1 "k8s.io/api/core/v1"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	strictjson "sigs.k8s.io/json"
	"sigs.k8s.io/yaml"

	fsv1 "github.com/kube-fstack/kube-fstack/api/v1alpha1"
)

// StackInstances decodes every StackInstance in data; documents of other kinds are skipped.
func StackInstances(data []byte) ([]fsv1.StackInstance, error) {
	var out []fsv1.StackInstance
	r := utilyaml.NewYAMLReader(bufio.NewReader(bytes.NewReader(data)))
	for i := 0; ; i++ {
		doc, err := r.Read()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return nil, fmt.Errorf("document %d: %w", i, err)
		}
		var meta struct{ APIVersion, Kind string }
		if err := yaml.Unmarshal(doc, &meta); err != nil {
			return nil, fmt.Errorf("document %d: %w", i, err)
		}
		if meta.Kind != "StackInstance" {
			continue
		}
		if meta.APIVersion != fsv1.GroupVersion.String() {
			return nil, fmt.Errorf("document %d: apiVersion %q, want %s", i, meta.APIVersion, fsv1.GroupVersion)
		}
		var si fsv1.StackInstance
		if err := Strict(doc, &si); err != nil {
			return nil, fmt.Errorf("document %d (%s): %w", i, meta.Kind, err)
		}
		out = append(out, si)
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("no StackInstance (apiVersion %s) found", fsv1.GroupVersion)
	}
	return out, nil
}

// PodFile reads one Pod from a YAML or JSON file.
func PodFile(path string) (*corev1.Pod, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	pod, err := Pod(data)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return pod, nil
}

// Pod decodes one Pod from YAML or JSON.
func Pod(data []byte) (*corev1.Pod, error) {
	pod := &corev1.Pod{}
	if err := Strict(data, pod); err != nil {
		return nil, err
	}
	return pod, nil
}

// Strict decodes one YAML or JSON document into v as the API server decodes a built-in object
// under strict field validation: keys are case-sensitive (sigs.k8s.io/json; encoding/json would
// take ipV4 for ipv4), and a key twice or one v does not declare is an error naming its path
// (unknown field "spec.containerz").
func Strict(doc []byte, v any) error {
	js, err := yaml.YAMLToJSONStrict(doc)
	if err != nil {
		return err
	}
	strict, err := strictjson.UnmarshalStrict(js, v)
	if err != nil {
		return err
	}
	return errors.Join(strict...)
}
