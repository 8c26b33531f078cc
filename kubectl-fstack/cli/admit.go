package cli

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"

	kjson "k8s.io/apimachinery/pkg/util/json"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/yaml"

	fsv1 "github.com/kube-fstack/kube-fstack/api/v1alpha1"
	"github.com/kube-fstack/kube-fstack/internal/crdschema"
)

// admit returns StackInstance number index of data (in the order manifest.StackInstances finds
// them) as the API server would store it: its document defaulted and validated by the CRD with
// kube-apiserver's own libraries (OpenAPI and CEL, internal/crdschema). A manifest the cluster
// refuses is refused here with the API server's field paths and messages, printed to stderr, so
// what renders offline is what the cluster admits and the operator renders.
func admit(stderr io.Writer, data []byte, index int) (*fsv1.StackInstance, error) {
	obj, err := stackDocument(data, index)
	if err != nil {
		return nil, err
	}
	if errs := crdschema.Admit(obj); len(errs) > 0 {
		meta, _ := obj["metadata"].(map[string]any)
		fmt.Fprintf(stderr, "StackInstance %v is refused by its CRD, as the API server would refuse it:\n", meta["name"])
		for _, e := range errs {
			fmt.Fprintf(stderr, "  %s\n", e.Error())
		}
		return nil, errReported
	}
	raw, err := kjson.Marshal(obj)
	if err != nil {
		return nil, err
	}
	var si fsv1.StackInstance
	if err := yaml.UnmarshalStrict(raw, &si); err != nil {
		return nil, fmt.Errorf("StackInstance with the CRD's defaults: %w", err)
	}
	return &si, nil
}

// stackDocument is StackInstance number index of data as untyped JSON, whole numbers as int64,
// as the API server decodes a request.
func stackDocument(data []byte, index int) (map[string]any, error) {
	r := utilyaml.NewYAMLReader(bufio.NewReader(bytes.NewReader(data)))
	for n := 0; ; {
		doc, err := r.Read()
		if errors.Is(err, io.EOF) {
			return nil, fmt.Errorf("no StackInstance number %d", index)
		}
		if err != nil {
			return nil, err
		}
		js, err := yaml.YAMLToJSON(doc)
		if err != nil {
			return nil, err
		}
		var obj map[string]any
		if err := kjson.Unmarshal(js, &obj); err != nil || obj == nil || obj["kind"] != "StackInstance" {
			continue // manifest.StackInstances has already refused what does not decode
		}
		if n == index {
			return obj, nil
		}
		n++
	}
}
