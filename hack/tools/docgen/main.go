// Command docgen writes the references that are generated rather than kept by hand (make generate
// runs it; make verify fails when what is committed differs):
//
//	docgen crd-ref CRD.yaml OUT.md        the StackInstance reference, from the CRD controller-gen writes
//	docgen chart-values SCHEMA VALUES README
//	                                      the chart README's values table, from values.schema.json and
//	                                      the defaults in values.yaml, between the README's markers
//	docgen pod-contract OUT.md            the reference of every label and annotation key, from
//	                                      internal/podcontract's registry
//
// The sources are the generated CRD, the chart's schema and the key registry the code is held
// to, so a reference cannot say something the API server, Helm or the code does not do.
package main

import (
	"fmt"
	"os"
)

const usage = `usage: docgen crd-ref CRD.yaml OUT.md
       docgen chart-values values.schema.json values.yaml README.md
       docgen pod-contract OUT.md`

func main() {
	if err := run(os.Args[1:]); err != nil {
		fmt.Fprintln(os.Stderr, "docgen:", err)
		os.Exit(1)
	}
}

func run(args []string) error {
	switch {
	case len(args) == 3 && args[0] == "crd-ref":
		return writeCRDRef(args[1], args[2])
	case len(args) == 4 && args[0] == "chart-values":
		return writeChartValues(args[1], args[2], args[3])
	case len(args) == 2 && args[0] == "pod-contract":
		return writePodContractRef(args[1])
	}
	return fmt.Errorf("%s", usage)
}

// writeIfChanged leaves the file (and its mtime) alone when the content is already right.
func writeIfChanged(path string, data []byte) error {
	if old, err := os.ReadFile(path); err == nil && string(old) == string(data) {
		return nil
	}
	return os.WriteFile(path, data, 0o644)
}
