package crdschema

import (
	"context"
	"testing"

	"k8s.io/apiextensions-apiserver/pkg/apis/apiextensions"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apivalidation "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/validation"
	"sigs.k8s.io/yaml"

	"github.com/kube-fstack/kube-fstack/config"
)

// The generated CRD passes the API server's own validation of a CRD, which estimates the cost of
// every CEL rule and message expression: a rule too costly is refused when the chart installs
// the CRD, which no object test here would see (they evaluate the rules, not their cost).
func TestCRDPassesTheAPIServersValidation(t *testing.T) {
	raw, err := config.CRDs.ReadFile(config.StackInstanceCRDFile)
	if err != nil {
		t.Fatal(err)
	}
	var v1 apiextensionsv1.CustomResourceDefinition
	if err := yaml.UnmarshalStrict(raw, &v1); err != nil {
		t.Fatal(err)
	}
	apiextensionsv1.SetObjectDefaults_CustomResourceDefinition(&v1)
	var crd apiextensions.CustomResourceDefinition
	if err := apiextensionsv1.Convert_v1_CustomResourceDefinition_To_apiextensions_CustomResourceDefinition(&v1, &crd, nil); err != nil {
		t.Fatal(err)
	}
	if errs := apivalidation.ValidateCustomResourceDefinition(context.Background(), &crd); len(errs) > 0 {
		for _, e := range errs {
			t.Error(e)
		}
	}
}
