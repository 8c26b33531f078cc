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

// Every reader of a multi-document file names documents by their place in the file: a document
// of comments only still counts, and other kinds are skipped, not dropped from the count.
func TestStackInstanceDocumentsKeepTheFilesIndexes(t *testing.T) {
	const file = "# a comment-only document\n---\napiVersion: v1\nkind: ConfigMap\nmetadata: [odd]\n---\n" +
		"apiVersion: kubefstack.io/v1alpha1\nkind: StackInstance\nmetadata: {name: web}\nspec: {}\n"
	raw, err := Split([]byte(file))
	if err != nil || len(raw) != 3 {
		t.Fatalf("Split = %d documents, %v; want 3 (the comment-only one kept)", len(raw), err)
	}
	docs, err := StackInstanceDocuments([]byte(file))
	if err != nil {
		t.Fatal(err)
	}
	if len(docs) != 1 || docs[0].Index != 2 || docs[0].Name != "web" || !strings.Contains(string(docs[0].Raw), "kind: StackInstance") {
		t.Fatalf("StackInstanceDocuments = %+v, want the one StackInstance, document 2, named web", docs)
	}

	_, err = StackInstanceDocuments([]byte(file + "---\napiVersion: kubefstack.io/v1\nkind: StackInstance\n"))
	if err == nil || !strings.Contains(err.Error(), "document 3") || !strings.Contains(err.Error(), `apiVersion "kubefstack.io/v1"`) {
		t.Errorf("a StackInstance of another apiVersion: err %v, want one naming document 3 and its apiVersion", err)
	}
	_, err = Documents([]byte(file + "---\nkind: [\n"))
	if err == nil || !strings.Contains(err.Error(), "document 3") {
		t.Errorf("a document that is not YAML: err %v, want one naming document 3", err)
	}
}

func TestStackInstancesDecodeStrictly(t *testing.T) {
	const head = "apiVersion: kubefstack.io/v1alpha1\nkind: StackInstance\nmetadata: {name: web}\n"
	sis, err := StackInstances([]byte("kind: Namespace\n---\n" + head + "spec: {}\n"))
	if err != nil || len(sis) != 1 || sis[0].Name != "web" {
		t.Fatalf("StackInstances = %+v, %v; want web", sis, err)
	}
	if _, err := StackInstances([]byte("kind: Namespace\n---\n" + head + "spec: {portz: []}\n")); err == nil ||
		!strings.Contains(err.Error(), "document 1") || !strings.Contains(err.Error(), "portz") {
		t.Errorf("an unknown field: err %v, want one naming document 1 and the field", err)
	}
	if _, err := StackInstances([]byte("kind: Namespace\n")); err == nil || !strings.Contains(err.Error(), "no StackInstance") {
		t.Errorf("no StackInstance: err %v", err)
	}
}
