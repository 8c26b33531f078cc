package main

import "testing"

func TestProductIsWhatShips(t *testing.T) {
	for path, want := range map[string]bool{
		"internal/render/emit.go":            true,
		"cni/internal/plugin/add.go":         true,
		"internal/render/emit_test.go":       false,
		"internal/test/fixtures/pods.go":     false,
		"cni/test/bench/latency.go":          false,
		"operator/test/envtest/suite.go":     false,
		"e2e/framework/cluster.go":           false,
		"hack/tools/docgen/main.go":          false,
		"kubectl-fstack/internal/cli/cli.go": true,
	} {
		if got := product(path); got != want {
			t.Errorf("product(%s) = %v, want %v", path, got, want)
		}
	}
}

func TestFunctionLengths(t *testing.T) {
	src := []byte("package p\n\nfunc a() {}\n\ntype T struct{}\n\nfunc (t *T) b() {\n\t_ = 1\n\t_ = 2\n}\n")
	fns, err := functions("p.go", src)
	if err != nil {
		t.Fatal(err)
	}
	if len(fns) != 2 || fns[0].name != "a" || fns[0].lines != 1 || fns[1].name != "(*T).b" || fns[1].lines != 4 || fns[1].pos != "p.go:7" {
		t.Fatalf("functions = %+v", fns)
	}
}
