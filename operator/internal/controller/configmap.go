package controller

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	corev1ac "k8s.io/client-go/applyconfigurations/core/v1"
	metav1ac "k8s.io/client-go/applyconfigurations/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	fsv1 "github.com/kube-fstack/kube-fstack/api/v1alpha1"
	"github.com/kube-fstack/kube-fstack/internal/podcontract"
	"github.com/kube-fstack/kube-fstack/internal/render"
)

// ConfigMap keys and labels.
const (
	// ManagedByLabel marks the ConfigMaps the operator owns; its cache watches only those.
	ManagedByLabel = "app.kubernetes.io/managed-by"
	ManagedBy      = "kube-fstack"
	KeySpec        = "spec.json"
	KeyConfig      = "config.ini"
	KeyEAL         = "eal.txt"
	KeyConfigHash  = "config-hash"
	// FieldOwner is the operator's field manager for server-side apply.
	FieldOwner = "kube-fstack-operator"
)

// ConfigMapName is the name of a StackInstance's ConfigMap.
func ConfigMapName(stack string) string { return stack + "-fstack" }

// ConflictError says that a ConfigMap with the StackInstance's ConfigMap name exists and is not
// the StackInstance's: the operator leaves it alone.
type ConflictError struct{ Namespace, Name string }

func (e *ConflictError) Error() string {
	return fmt.Sprintf("ConfigMap %s/%s exists and is not this StackInstance's (no controller reference to it), so kube-fstack leaves it untouched",
		e.Namespace, e.Name)
}

// ConfigMapData is what the ConfigMap of a checked StackInstance spec holds: the spec with
// defaults (the pods' snapshot), the config.ini rendered with placeholder facts (each pod's
// dataplane renders its own from the pod's real CPUs, devices and addresses), the EAL argv per
// process and the config hash pods record.
func ConfigMapData(checked *render.Spec, hash string) (map[string]string, error) {
	res := checked.Placeholder()
	spec, err := json.MarshalIndent(checked.Defaulted(), "", "  ")
	if err != nil {
		return nil, err
	}
	var eal strings.Builder
	for _, argv := range res.EAL {
		eal.WriteString(strings.Join(argv, " "))
		eal.WriteByte('\n')
	}
	return map[string]string{
		KeySpec: string(spec) + "\n", KeyConfig: string(res.Config), KeyEAL: eal.String(), KeyConfigHash: hash,
	}, nil
}

// ensureConfigMap writes the ConfigMap when it is missing or holds another config, and never
// touches a ConfigMap of that name that is not the StackInstance's (a *ConflictError): taking it
// over would also have the garbage collector delete it with the StackInstance. Only the metadata
// of the operator's own ConfigMaps is cached (the data of a thousand would double the operator's
// memory), so the hash annotation tells whether the data is current.
func (r *StackInstanceReconciler) ensureConfigMap(ctx context.Context, si *fsv1.StackInstance, checked *render.Spec, hash string) error {
	key := client.ObjectKey{Namespace: si.Namespace, Name: ConfigMapName(si.Name)}
	cached := configMapMeta()
	err := r.Client.Get(ctx, key, cached)
	switch {
	case err == nil && !metav1.IsControlledBy(cached, si):
		return &ConflictError{Namespace: key.Namespace, Name: key.Name} // our label, someone else's object
	case err == nil && cached.Annotations[podcontract.ConfigHashAnnotation] == hash:
		return nil
	case err == nil:
		return r.applyConfigMap(ctx, si, checked, hash)
	case !apierrors.IsNotFound(err):
		return fmt.Errorf("read ConfigMap %s: %w", key, err)
	}
	// Not in the cache: there is none, or one without our label (a user's), or ours and the cache
	// has not seen it yet. A create never changes an existing object; the API server tells which.
	cm, err := configMap(si, checked, hash)
	if err != nil {
		return err
	}
	err = r.Client.Create(ctx, cm, client.FieldOwner(FieldOwner))
	if !apierrors.IsAlreadyExists(err) {
		return err
	}
	live := configMapMeta()
	if err := r.APIReader.Get(ctx, key, live); err != nil {
		return fmt.Errorf("read ConfigMap %s: %w", key, err)
	}
	if !metav1.IsControlledBy(live, si) {
		return &ConflictError{Namespace: key.Namespace, Name: key.Name}
	}
	return r.applyConfigMap(ctx, si, checked, hash)
}

// applyConfigMap brings the StackInstance's own ConfigMap up to date. Forcing ownership of its
// fields is safe only because the caller checked the object is controlled by the StackInstance.
func (r *StackInstanceReconciler) applyConfigMap(ctx context.Context, si *fsv1.StackInstance, checked *render.Spec, hash string) error {
	data, err := ConfigMapData(checked, hash)
	if err != nil {
		return err
	}
	gvk := fsv1.GroupVersion.WithKind("StackInstance")
	cm := corev1ac.ConfigMap(ConfigMapName(si.Name), si.Namespace).
		WithLabels(configMapLabels(si)).
		WithAnnotations(map[string]string{podcontract.ConfigHashAnnotation: hash}).
		WithOwnerReferences(metav1ac.OwnerReference().WithAPIVersion(gvk.GroupVersion().String()).WithKind(gvk.Kind).
			WithName(si.Name).WithUID(si.UID).WithController(true).WithBlockOwnerDeletion(true)).
		WithData(data)
	return r.Client.Apply(ctx, cm, client.FieldOwner(FieldOwner), client.ForceOwnership)
}

// configMap is the StackInstance's ConfigMap as a whole object, for the first write.
func configMap(si *fsv1.StackInstance, checked *render.Spec, hash string) (*corev1.ConfigMap, error) {
	data, err := ConfigMapData(checked, hash)
	if err != nil {
		return nil, err
	}
	gvk := fsv1.GroupVersion.WithKind("StackInstance")
	return &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{
			Namespace: si.Namespace, Name: ConfigMapName(si.Name), Labels: configMapLabels(si),
			Annotations:     map[string]string{podcontract.ConfigHashAnnotation: hash},
			OwnerReferences: []metav1.OwnerReference{*metav1.NewControllerRef(si, gvk)},
		},
		Data: data,
	}, nil
}

func configMapLabels(si *fsv1.StackInstance) map[string]string {
	return map[string]string{ManagedByLabel: ManagedBy, fsv1.StackLabel: si.Name}
}

func configMapMeta() *metav1.PartialObjectMetadata {
	m := &metav1.PartialObjectMetadata{}
	m.SetGroupVersionKind(corev1.SchemeGroupVersion.WithKind("ConfigMap"))
	return m
}
