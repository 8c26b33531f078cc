// Package v1alpha1 holds the kubefstack.io/v1alpha1 API: the StackInstance that describes the
// F-Stack stack every bound pod runs.
// +kubebuilder:object:generate=true
// +groupName=kubefstack.io
package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

var (
	// GroupVersion is the API group and version of every type in this package.
	GroupVersion = schema.GroupVersion{Group: "kubefstack.io", Version: "v1alpha1"}

	// SchemeBuilder registers the types of this package with a runtime.Scheme.
	SchemeBuilder = runtime.NewSchemeBuilder(addKnownTypes)

	// AddToScheme adds the types of this package to a runtime.Scheme.
	AddToScheme = SchemeBuilder.AddToScheme
)

func addKnownTypes(s *runtime.Scheme) error {
	s.AddKnownTypes(GroupVersion, &StackInstance{}, &StackInstanceList{}, &AddressClaim{}, &AddressClaimList{}, &DataNetwork{}, &DataNetworkList{})
	metav1.AddToGroupVersion(s, GroupVersion)
	return nil
}
