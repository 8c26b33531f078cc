package manifest

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestPodFileRefusesUnknownFields(t *testing.T) {
	dir := t.TempDir()
	good, bad := filepath.Join(dir, "good.yaml"), filepath.Join(dir, "bad.yaml")
	if err := os.WriteFile(good, []byte("apiVersion: v1\nkind: Pod\nmetadata: {name: a}\nspec: {containers: [{name: c, image: i}]}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(bad, []byte("apiVersion: v1\nkind: Pod\nmetadata: {name: a}\nspec: {containerz: []}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	pod, err := PodFile(good)
	if err != nil || pod.Name != "a" || pod.Spec.Containers[0].Image != "i" {
		t.Fatalf("PodFile(good) = %+v, %v", pod, err)
	}
	if _, err := PodFile(bad); err == nil || !strings.Contains(err.Error(), "containerz") || !strings.Contains(err.Error(), bad) {
		t.Errorf("PodFile(bad): err %v, want one naming the file and the unknown field", err)
	}
	if _, err := PodFile(filepath.Join(dir, "missing.yaml")); err == nil {
		t.Error("PodFile(missing): no error")
	}
}
