package controller

import (
	"context"
	"encoding/json"
	"strings"

	corev1 "k8s.io/api/core/v1"
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

// ConfigMapData is what the ConfigMap of a rendered StackInstance holds: the spec with defaults
// (the pods' snapshot), the config.ini rendered with placeholder facts (each pod's dataplane
// renders its own from the pod's real CPUs, devices and addresses), the EAL argv per process and
// the config hash pods record.
func ConfigMapData(res *render.Result, hash string) (map[string]string, error) {
	spec, err := json.MarshalIndent(res.Spec, "", "  ")
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

// ensureConfigMap writes the ConfigMap when it is missing or holds another config. Only its
// metadata is cached (the data of a thousand ConfigMaps would double the operator's memory), so
// the hash annotation tells whether the data is current, and a server-side apply writes it.
func (r *StackInstanceReconciler) ensureConfigMap(ctx context.Context, si *fsv1.StackInstance, res *render.Result, hash string) error {
	meta := &metav1.PartialObjectMetadata{}
	meta.SetGroupVersionKind(corev1.SchemeGroupVersion.WithKind("ConfigMap"))
	err := r.Client.Get(ctx, client.ObjectKey{Namespace: si.Namespace, Name: ConfigMapName(si.Name)}, meta)
	if err == nil && meta.Annotations[podcontract.ConfigHashAnnotation] == hash && metav1.IsControlledBy(meta, si) {
		return nil
	}
	if client.IgnoreNotFound(err) != nil {
		return err
	}
	data, err := ConfigMapData(res, hash)
	if err != nil {
		return err
	}
	gvk := fsv1.GroupVersion.WithKind("StackInstance")
	cm := corev1ac.ConfigMap(ConfigMapName(si.Name), si.Namespace).
		WithLabels(map[string]string{ManagedByLabel: ManagedBy, fsv1.StackLabel: si.Name}).
		WithAnnotations(map[string]string{podcontract.ConfigHashAnnotation: hash}).
		WithOwnerReferences(metav1ac.OwnerReference().WithAPIVersion(gvk.GroupVersion().String()).WithKind(gvk.Kind).
			WithName(si.Name).WithUID(si.UID).WithController(true).WithBlockOwnerDeletion(true)).
		WithData(data)
	return client.IgnoreNotFound(r.Client.Apply(ctx, cm, client.FieldOwner(FieldOwner), client.ForceOwnership))
}
