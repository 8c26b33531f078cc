package cli

import (
	"errors"
	"fmt"
	"io"

	kjson "k8s.io/apimachinery/pkg/util/json"

	fsv1 "github.com/kube-fstack/kube-fstack/api/v1alpha1"
	"github.com/kube-fstack/kube-fstack/internal/crdschema"
	"github.com/kube-fstack/kube-fstack/internal/manifest"
)

// stackDoc is one StackInstance document of a file, decoded as the API server decodes it.
type stackDoc struct {
	name string
	obj  map[string]any
}

// readStacks decodes every StackInstance document of data (from file) as the API server decodes
// a request under kubectl's default strict field validation (crdschema.Decode): field names are
// case-sensitive and a field the CRD does not declare is refused with its path. Every refused
// key of every document is printed to stderr before the error is returned, so one run shows all.
// A file without a StackInstance gives none (another file of -f may hold it).
func readStacks(stderr io.Writer, data []byte, file string) ([]stackDoc, error) {
	adm, err := crdschema.Load()
	if err != nil {
		return nil, err
	}
	docs, err := manifest.StackInstanceDocuments(data)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", file, err)
	}
	var out []stackDoc
	var refused bool
	for _, d := range docs {
		obj, err := adm.Decode(d.Raw)
		var fe crdschema.FieldErrors
		if errors.As(err, &fe) {
			refused = true
			fmt.Fprintf(stderr, "StackInstance %s (%s, document %d) is refused, as the API server would refuse it:\n", safe(d.Name), file, d.Index)
			for _, e := range fe {
				fmt.Fprintf(stderr, "  %s\n", safe(e.Error()))
			}
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("%s: document %d (StackInstance %s): %w", file, d.Index, d.Name, err)
		}
		out = append(out, stackDoc{name: d.Name, obj: obj})
	}
	if refused {
		return nil, errReported
	}
	return out, nil
}

// pickStack returns the StackInstance named name among docs, or the only one when name is "";
// flag is the option that names one, for the error when the choice is ambiguous.
func pickStack(docs []stackDoc, name, file, flag string) (map[string]any, error) {
	if name == "" {
		if len(docs) > 1 {
			return nil, fmt.Errorf("%s holds %d StackInstances: choose one with %s", file, len(docs), flag)
		}
		return docs[0].obj, nil
	}
	for _, d := range docs {
		if d.name == name {
			return d.obj, nil
		}
	}
	return nil, fmt.Errorf("%s has no StackInstance named %q", file, name)
}

// admit returns the StackInstance obj (as readStacks decoded it) as the API server would store
// it: defaulted and validated by the CRD with kube-apiserver's own libraries (OpenAPI and CEL,
// internal/crdschema). A manifest the cluster refuses is refused here with the API server's
// field paths and messages, printed to stderr, so what renders offline is what the cluster
// admits and the operator renders.
func admit(stderr io.Writer, obj map[string]any) (*fsv1.StackInstance, error) {
	if errs := crdschema.Admit(obj); len(errs) > 0 {
		meta, _ := obj["metadata"].(map[string]any)
		fmt.Fprintf(stderr, "StackInstance %v is refused by its CRD, as the API server would refuse it:\n", safe(fmt.Sprint(meta["name"])))
		for _, e := range errs {
			fmt.Fprintf(stderr, "  %s\n", safe(e.Error()))
		}
		return nil, errReported
	}
	raw, err := kjson.Marshal(obj)
	if err != nil {
		return nil, err
	}
	var si fsv1.StackInstance
	if err := kjson.Unmarshal(raw, &si); err != nil {
		return nil, fmt.Errorf("StackInstance with the CRD's defaults: %w", err)
	}
	return &si, nil
}

// loadStack reads files and returns their StackInstance named name (the only one when name is
// "") as the API server would store it.
func loadStack(stderr io.Writer, files []input, name, flag string) (*fsv1.StackInstance, error) {
	var docs []stackDoc
	var refused bool
	for _, in := range files {
		d, err := readStacks(stderr, in.data, in.name)
		if errors.Is(err, errReported) {
			refused = true // every file's refusals printed, then one exit
			continue
		}
		if err != nil {
			return nil, err
		}
		docs = append(docs, d...)
	}
	if refused {
		return nil, errReported
	}
	what := names(files)
	if len(docs) == 0 {
		return nil, fmt.Errorf("%s: no StackInstance (apiVersion %s) found", what, fsv1.GroupVersion)
	}
	obj, err := pickStack(docs, name, what, flag)
	if err != nil {
		return nil, err
	}
	return admit(stderr, obj)
}
