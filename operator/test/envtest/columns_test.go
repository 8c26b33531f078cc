package envtest

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
)

// getColumns reads a StackInstance as `kubectl get` does (the API server's Table rendering of
// the CRD's printer columns) and returns each column's cell by name.
func getColumns(t *testing.T, namespace, name string) map[string]any {
	t.Helper()
	hc, err := rest.HTTPClientFor(restCfg)
	if err != nil {
		t.Fatal(err)
	}
	url := fmt.Sprintf("%s/apis/kubefstack.io/v1alpha1/namespaces/%s/stackinstances/%s", strings.TrimSuffix(restCfg.Host, "/"), namespace, name)
	req, err := http.NewRequest(http.MethodGet, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Accept", "application/json;as=Table;v=v1;g=meta.k8s.io")
	resp, err := hc.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = resp.Body.Close() }()
	table := &metav1.Table{}
	if err := json.NewDecoder(resp.Body).Decode(table); err != nil || resp.StatusCode != http.StatusOK || len(table.Rows) != 1 {
		t.Fatalf("GET %s as a Table: %s, %v, %d rows", url, resp.Status, err, len(table.Rows))
	}
	cells := map[string]any{}
	for i, c := range table.ColumnDefinitions {
		cells[c.Name] = table.Rows[0].Cells[i]
	}
	return cells
}
