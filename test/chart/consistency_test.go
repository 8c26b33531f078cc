package chart

import (
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// config reads a multi-document file of config/ (generated or hand-written) as objects.
func config(t *testing.T, path ...string) []*unstructured.Unstructured {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(append([]string{root, "config"}, path...)...))
	if err != nil {
		t.Fatal(err)
	}
	return objects(t, "\n"+string(data))
}

// TestWebhooksAsConfigured: with the defaults, the chart's webhook configurations are exactly
// config/webhook/webhooks.yaml (the scoping selectors included).
func TestWebhooksAsConfigured(t *testing.T) {
	want := config(t, "webhook", "webhooks.yaml")
	rendered := objects(t, render(t, "default"))
	for _, kind := range []string{"MutatingWebhookConfiguration", "ValidatingWebhookConfiguration"} {
		w, g := find(want, kind), find(rendered, kind)
		if len(w) != 1 || len(g) != 1 {
			t.Fatalf("%d configured and %d rendered %ss, want one each", len(w), len(g), kind)
		}
		if w[0].GetName() != g[0].GetName() {
			t.Errorf("%s named %q, config/webhook has %q", kind, g[0].GetName(), w[0].GetName())
		}
		if !reflect.DeepEqual(w[0].Object["webhooks"], g[0].Object["webhooks"]) {
			t.Errorf("the chart's %s differs from config/webhook/webhooks.yaml:\nchart: %v\nconfig: %v",
				kind, g[0].Object["webhooks"], w[0].Object["webhooks"])
		}
	}
}

// TestOperatorFlagsNameTheObjects: every name the operator is given on its command line is the
// name of the rendered object (or the Secret the Deployment mounts and cert-manager writes).
func TestOperatorFlagsNameTheObjects(t *testing.T) {
	for _, set := range valueSets(t) {
		rendered := objects(t, render(t, set))
		deploy := find(rendered, "Deployment")
		if len(deploy) != 1 {
			t.Fatalf("%s: %d Deployments, want 1", set, len(deploy))
		}
		flags := operatorFlags(t, deploy[0])
		name := func(kind string) string {
			objs := find(rendered, kind)
			if len(objs) != 1 {
				t.Fatalf("%s: %d %ss, want 1", set, len(objs), kind)
			}
			return objs[0].GetName()
		}
		for flag, want := range map[string]string{
			"--webhook-service":                  webhookService(t, rendered).GetName(),
			"--mutating-webhook-configuration":   name("MutatingWebhookConfiguration"),
			"--validating-webhook-configuration": name("ValidatingWebhookConfiguration"),
			"--cert-secret":                      mountedSecret(t, deploy[0]),
			"--leader-elect":                     "true",
		} {
			if flags[flag] != want {
				t.Errorf("%s: %s=%q, want %q", set, flag, flags[flag], want)
			}
		}
		certs := find(rendered, "Certificate")
		switch flags["--manage-certs"] {
		case "true":
			if len(certs) != 0 {
				t.Errorf("%s: the operator manages certificates, yet a Certificate is rendered", set)
			}
		case "false":
			if len(certs) != 1 {
				t.Fatalf("%s: --manage-certs=false needs a cert-manager Certificate, found %d", set, len(certs))
			}
			secret, _, _ := unstructured.NestedString(certs[0].Object, "spec", "secretName")
			if secret != flags["--cert-secret"] {
				t.Errorf("%s: the Certificate writes %q, the operator reads %q", set, secret, flags["--cert-secret"])
			}
		default:
			t.Errorf("%s: --manage-certs=%q", set, flags["--manage-certs"])
		}
	}
}

func operatorFlags(t *testing.T, deploy *unstructured.Unstructured) map[string]string {
	t.Helper()
	containers, _, _ := unstructured.NestedSlice(deploy.Object, "spec", "template", "spec", "containers")
	if len(containers) != 1 {
		t.Fatalf("the operator Deployment has %d containers, want 1", len(containers))
	}
	args, _, _ := unstructured.NestedStringSlice(containers[0].(map[string]any), "args")
	flags := map[string]string{}
	for _, a := range args {
		k, v, _ := strings.Cut(a, "=")
		flags[k] = v
	}
	return flags
}

func mountedSecret(t *testing.T, deploy *unstructured.Unstructured) string {
	t.Helper()
	volumes, _, _ := unstructured.NestedSlice(deploy.Object, "spec", "template", "spec", "volumes")
	for _, v := range volumes {
		if name, ok, _ := unstructured.NestedString(v.(map[string]any), "secret", "secretName"); ok {
			return name
		}
	}
	t.Fatal("the operator Deployment mounts no Secret")
	return ""
}
