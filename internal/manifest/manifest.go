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

// Split splits data into its documents as kubectl reads a file: YAML documents separated by
// "---" lines, or JSON. A document of only comments or blank lines is kept, so a document's
// index is its place in the file, which every reader's errors name. This is the one splitter of
// multi-document files: the CLI, the fixtures and this package read through it.
func Split(data []byte) ([][]byte, error) {
	var docs [][]byte
	r := utilyaml.NewYAMLReader(bufio.NewReader(bytes.NewReader(data)))
	for i := 0; ; i++ {
		doc, err := r.Read()
		if errors.Is(err, io.EOF) {
			return docs, nil
		}
		if err != nil {
			return nil, fmt.Errorf("document %d: %w", i, err)
		}
		docs = append(docs, doc)
	}
}

// Document is one document of a file and what readers pick it by.
type Document struct {
	// Index is the document's place in the file, from 0.
	Index int
	// APIVersion, Kind and Name are empty when the document does not set them.
	APIVersion, Kind, Name string
	Raw                    []byte
}

// Documents splits data (Split) and reads each document's apiVersion, kind and metadata.name.
// A document that is not YAML is an error naming its index.
func Documents(data []byte) ([]Document, error) {
	raw, err := Split(data)
	if err != nil {
		return nil, err
	}
	out := make([]Document, 0, len(raw))
	for i, doc := range raw {
		var head struct {
			APIVersion, Kind string
			// Any shape: a document of another kind is skipped, whatever its metadata.
			Metadata any
		}
		if err := yaml.Unmarshal(doc, &head); err != nil {
			return nil, fmt.Errorf("document %d: %w", i, err)
		}
		d := Document{Index: i, APIVersion: head.APIVersion, Kind: head.Kind, Raw: doc}
		if m, ok := head.Metadata.(map[string]any); ok {
			d.Name, _ = m["name"].(string)
		}
		out = append(out, d)
	}
	return out, nil
}

// StackInstanceDocuments are the StackInstance documents of data, not decoded: each caller
// decodes as it must (StackInstances into the Go type, the CLI through the CRD as the API server
// does). Documents of other kinds are skipped; a StackInstance of another apiVersion is an error.
func StackInstanceDocuments(data []byte) ([]Document, error) {
	docs, err := Documents(data)
	if err != nil {
		return nil, err
	}
	var out []Document
	for _, d := range docs {
		if d.Kind != "StackInstance" {
			continue
		}
		if d.APIVersion != fsv1.GroupVersion.String() {
			return nil, fmt.Errorf("document %d: apiVersion %q, want %s", d.Index, d.APIVersion, fsv1.GroupVersion)
		}
		out = append(out, d)
	}
	return out, nil
}

// StackInstances decodes every StackInstance in data strictly (Strict); documents of other
// kinds are skipped.
func StackInstances(data []byte) ([]fsv1.StackInstance, error) {
	docs, err := StackInstanceDocuments(data)
	if err != nil {
		return nil, err
	}
	var out []fsv1.StackInstance
	for _, d := range docs {
		var si fsv1.StackInstance
		if err := Strict(d.Raw, &si); err != nil {
			return nil, fmt.Errorf("document %d (%s): %w", d.Index, d.Kind, err)
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
