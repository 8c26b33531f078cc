package controller

import (
	"context"
	"encoding/json"
	"strings"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	fsv1 "github.com/kube-fstack/kube-fstack/api/v1alpha1"
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

func (r *StackInstanceReconciler) ensureConfigMap(ctx context.Context, si *fsv1.StackInstance, res *render.Result, hash string) error {
	data, err := ConfigMapData(res, hash)
	if err != nil {
		return err
	}
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: ConfigMapName(si.Name), Namespace: si.Namespace}}
	_, err = controllerutil.CreateOrPatch(ctx, r.Client, cm, func() error {
		if cm.Labels == nil {
			cm.Labels = map[string]string{}
		}
		cm.Labels[ManagedByLabel] = ManagedBy
		cm.Labels[fsv1.StackLabel] = si.Name
		cm.Data = data
		return controllerutil.SetControllerReference(si, cm, r.Client.Scheme())
	})
	return client.IgnoreNotFound(err)
}
