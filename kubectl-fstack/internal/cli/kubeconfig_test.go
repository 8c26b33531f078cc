package cli

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/spf13/pflag"
	"k8s.io/client-go/rest"
)

// A kubeconfig kubectl works with works here: a user with auth-provider oidc gets a client,
// and one with the removed azure provider is told what replaced it, as by kubectl, rather
// than "no Auth Provider found".
func TestKubeconfigAuthProvidersAsKubectl(t *testing.T) {
	kubeconfig := func(provider string) string {
		p := filepath.Join(t.TempDir(), "config")
		raw := `apiVersion: v1
kind: Config
clusters: [{name: c, cluster: {server: "https://127.0.0.1:1"}}]
contexts: [{name: c, context: {cluster: c, user: u}}]
current-context: c
users:
- name: u
  user:
    auth-provider:
      name: ` + provider + `
      config: {idp-issuer-url: "https://issuer.example", client-id: kubectl, id-token: x.y.z}
`
		if err := os.WriteFile(p, []byte(raw), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	c := &clusterFlags{}
	c.add(pflag.NewFlagSet("t", pflag.ContinueOnError))
	*c.config.KubeConfig = kubeconfig("oidc")
	cfg, _, err := c.restConfig()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := rest.HTTPClientFor(cfg); err != nil {
		t.Errorf("auth-provider oidc: %v", err)
	}
	c = &clusterFlags{}
	c.add(pflag.NewFlagSet("t", pflag.ContinueOnError))
	*c.config.KubeConfig = kubeconfig("azure")
	cfg, _, err = c.restConfig()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := rest.HTTPClientFor(cfg); err == nil || !strings.Contains(err.Error(), "kubelogin") {
		t.Errorf("auth-provider azure: want the error naming kubelogin, got %v", err)
	}
}
