package crdschema

import (
	"errors"
	"fmt"
	"regexp"
	"slices"
	"strings"

	structuralschema "k8s.io/apiextensions-apiserver/pkg/apiserver/schema"
	"k8s.io/apiextensions-apiserver/pkg/apiserver/schema/pruning"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	kjson "k8s.io/apimachinery/pkg/util/json"
	strictjson "sigs.k8s.io/json"
	"sigs.k8s.io/yaml"
)

// FieldError is a key of a document the API server refuses under kubectl's default field
// validation (Strict): a field the CRD's schema does not declare, or a key given twice. Field
// names are case-sensitive there, as here: ipV4 is not ipv4.
type FieldError struct {
	// Path is where the key is, as the API server names it: spec.ports[0].ipV4.
	Path string
	// Duplicate is set for a key given twice, else the key is unknown.
	Duplicate bool
	// Suggest is the declared field the key most likely meant, "" when none is close.
	Suggest string
}

func (e *FieldError) Error() string {
	if e.Duplicate {
		return e.Path + ": duplicate field (given twice; the API server refuses it)"
	}
	msg := e.Path + ": unknown field (the CRD declares no such field; the API server refuses it)"
	if e.Suggest != "" {
		msg += fmt.Sprintf(": did you mean %q?", e.Suggest)
		if strings.EqualFold(e.Suggest, lastKey(e.Path)) {
			msg += " (field names are case-sensitive)"
		}
	}
	return msg
}

// FieldErrors are all the refused keys of one document.
type FieldErrors []*FieldError

func (e FieldErrors) Error() string {
	msgs := make([]string, len(e))
	for i, fe := range e {
		msgs[i] = fe.Error()
	}
	return strings.Join(msgs, "; ")
}

// Decode reads one StackInstance document (YAML or JSON) as the API server decodes a request
// with strict field validation, kubectl's default: keys case-sensitive (sigs.k8s.io/json, the
// API server's decoder), no key twice, and every field declared by the CRD's schema (the API
// server's pruning, which reports what it would drop) or, under metadata, by ObjectMeta. Whole
// numbers come back as int64, as the API server holds them. A document that does not parse is
// an error; refused keys are FieldErrors, every one of the document.
func (a *Admission) Decode(doc []byte) (map[string]any, error) {
	js, err := yaml.YAMLToJSONStrict(doc)
	if err != nil {
		return nil, err
	}
	var obj map[string]any
	strict, err := strictjson.UnmarshalStrict(js, &obj)
	if err != nil {
		return nil, err
	}
	if obj == nil {
		return nil, errors.New("the document is empty or not an object")
	}
	var errs FieldErrors
	for _, e := range strict {
		errs = append(errs, strictFieldError("", e))
	}
	if md, ok := obj["metadata"]; ok {
		raw, err := kjson.Marshal(md)
		if err != nil {
			return nil, err
		}
		var meta metav1.ObjectMeta
		strict, err := strictjson.UnmarshalStrict(raw, &meta)
		if err != nil {
			return nil, fmt.Errorf("metadata: %w", err)
		}
		for _, e := range strict {
			errs = append(errs, strictFieldError("metadata.", e))
		}
	}
	unknown := pruning.PruneWithOptions(obj, a.structural, true, structuralschema.UnknownFieldPathOptions{TrackUnknownFieldPaths: true})
	for _, p := range unknown {
		errs = append(errs, &FieldError{Path: p, Suggest: a.suggest(p)})
	}
	if len(errs) > 0 {
		return nil, errs
	}
	return obj, nil
}

func strictFieldError(prefix string, err error) *FieldError {
	fe := &FieldError{Path: prefix + err.Error()}
	if p, ok := err.(interface{ FieldPath() string }); ok {
		fe.Path = prefix + p.FieldPath()
	}
	fe.Duplicate = strings.HasPrefix(err.Error(), "duplicate field")
	return fe
}

// pathStep is one key (.name) or list index ([3]) of a pruned field's path.
var pathStep = regexp.MustCompile(`(?:^|\.)([^.\[\]]+)|\[\d+\]`)

// suggest returns the field declared next to the unknown key at path that the key most likely
// meant: the same name in other case, else one within two edits. A path the steps cannot follow
// (a map key holding a dot) gets no suggestion.
func (a *Admission) suggest(path string) string {
	s := a.structural
	steps := pathStep.FindAllStringSubmatch(path, -1)
	if len(steps) == 0 || strings.Join(flatten(steps), "") != path {
		return ""
	}
	for _, st := range steps[:len(steps)-1] {
		switch {
		case s == nil:
			return ""
		case st[1] == "":
			s = s.Items
		case hasProp(s, st[1]):
			p := s.Properties[st[1]]
			s = &p
		case s.AdditionalProperties != nil:
			s = s.AdditionalProperties.Structural
		default:
			return ""
		}
	}
	if s == nil {
		return ""
	}
	key := steps[len(steps)-1][1]
	names := make([]string, 0, len(s.Properties))
	for n := range s.Properties {
		names = append(names, n)
	}
	slices.Sort(names)
	for _, n := range names {
		if strings.EqualFold(n, key) {
			return n
		}
	}
	best, bestD := "", 3
	for _, n := range names {
		if d := editDistance(strings.ToLower(key), strings.ToLower(n)); d < bestD {
			best, bestD = n, d
		}
	}
	return best
}

func hasProp(s *structuralschema.Structural, k string) bool { _, ok := s.Properties[k]; return ok }

func flatten(steps [][]string) []string {
	out := make([]string, len(steps))
	for i, st := range steps {
		out[i] = st[0]
	}
	return out
}

func lastKey(path string) string {
	steps := pathStep.FindAllStringSubmatch(path, -1)
	if len(steps) == 0 {
		return ""
	}
	return steps[len(steps)-1][1]
}

// editDistance is the Levenshtein distance of a and b, counted in bytes: field names are ASCII.
func editDistance(a, b string) int {
	if len(a) > 64 || len(b) > 64 {
		return 64 // a hostile key gets no suggestion, and costs nothing
	}
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev, cur = cur, prev
	}
	return prev[len(b)]
}
