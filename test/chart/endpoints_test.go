package chart

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"sigs.k8s.io/yaml"
)

// TestNetworkPolicyOpensOnlyTheOperatorsPorts: on by default, the operator's NetworkPolicy
// selects the operator's pods and lets in only the ports its container serves (the webhook,
// the probes, metrics when they are on); each is open to any source unless narrowed, so the
// default cannot break an install, and narrowed as the values say.
func TestNetworkPolicyOpensOnlyTheOperatorsPorts(t *testing.T) {
	for _, set := range valueSets(t) {
		rendered := objects(t, render(t, set))
		nps := find(rendered, "NetworkPolicy")
		if len(nps) != 1 {
			t.Fatalf("%s: %d NetworkPolicies, want 1 (on by default)", set, len(nps))
		}
		np, deploy := nps[0], find(rendered, "Deployment")[0]
		sel, _, _ := unstructured.NestedStringMap(np.Object, "spec", "podSelector", "matchLabels")
		podLabels, _, _ := unstructured.NestedStringMap(deploy.Object, "spec", "template", "metadata", "labels")
		if len(sel) == 0 || !labels.SelectorFromSet(sel).Matches(labels.Set(podLabels)) {
			t.Errorf("%s: the NetworkPolicy selects %v, not the operator's pods %v", set, sel, podLabels)
		}
		if types, _, _ := unstructured.NestedStringSlice(np.Object, "spec", "policyTypes"); !slices.Equal(types, []string{"Ingress"}) {
			t.Errorf("%s: policyTypes %v, want [Ingress]", set, types)
		}
		served := containerPortNames(t, deploy)
		rules, _, _ := unstructured.NestedSlice(np.Object, "spec", "ingress")
		from := map[string][]any{}
		for _, r := range rules {
			ports, _, _ := unstructured.NestedSlice(r.(map[string]any), "ports")
			peers, _, _ := unstructured.NestedSlice(r.(map[string]any), "from")
			for _, p := range ports {
				name, _ := p.(map[string]any)["port"].(string)
				if !slices.Contains(served, name) {
					t.Errorf("%s: the NetworkPolicy opens port %q, which the operator's container does not name (%v)", set, name, served)
				}
				from[name] = peers
			}
		}
		for _, name := range served {
			if _, ok := from[name]; !ok {
				t.Errorf("%s: the operator serves port %q, which the NetworkPolicy leaves closed", set, name)
			}
		}
		switch set {
		case "endpoints":
			if !strings.Contains(toYAML(t, from["webhook"]), "10.0.0.0/24") || !strings.Contains(toYAML(t, from["metrics"]), "monitoring") {
				t.Errorf("%s: webhook from %v, metrics from %v; want the values' peers", set, from["webhook"], from["metrics"])
			}
		case "monitoring-custom":
			if !strings.Contains(toYAML(t, from["metrics"]), "kubernetes.io/metadata.name: monitoring") {
				t.Errorf("%s: metrics from %v, want Prometheus's namespace", set, from["metrics"])
			}
		default:
			for name, peers := range from {
				if len(peers) != 0 {
					t.Errorf("%s: port %s is open to %v only; by default it is open to any source", set, name, peers)
				}
			}
		}
	}
}

func containerPortNames(t *testing.T, deploy *unstructured.Unstructured) []string {
	t.Helper()
	containers, _, _ := unstructured.NestedSlice(deploy.Object, "spec", "template", "spec", "containers")
	ports, _, _ := unstructured.NestedSlice(containers[0].(map[string]any), "ports")
	var names []string
	for _, p := range ports {
		names = append(names, p.(map[string]any)["name"].(string))
	}
	return names
}

func toYAML(t *testing.T, v any) string {
	t.Helper()
	b, err := yaml.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// TestWebhookClientCA: with webhook.clientCA the operator requires the API server's client
// certificate, reading the CA from a ConfigMap the chart renders and mounts (and a new CA rolls
// the pods); without it, nothing of it is rendered.
func TestWebhookClientCA(t *testing.T) {
	values, err := os.ReadFile(filepath.Join("testdata", "values", "endpoints.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var v struct {
		Webhook struct {
			ClientCA string `json:"clientCA"`
		} `json:"webhook"`
	}
	if err := yaml.Unmarshal(values, &v); err != nil || v.Webhook.ClientCA == "" {
		t.Fatalf("endpoints.yaml has no webhook.clientCA: %v", err)
	}
	rendered := objects(t, render(t, "endpoints"))
	deploy := find(rendered, "Deployment")[0]
	flag := operatorFlags(t, deploy)["--webhook-client-ca"]
	if flag == "" {
		t.Fatal("with webhook.clientCA the operator gets no --webhook-client-ca")
	}
	mounts := toYAML(t, deploy.Object["spec"].(map[string]any)["template"])
	cm := ""
	for _, c := range find(rendered, "ConfigMap") {
		if data, _, _ := unstructured.NestedStringMap(c.Object, "data"); data[filepath.Base(flag)] == v.Webhook.ClientCA {
			cm = c.GetName()
		}
	}
	if cm == "" || !strings.Contains(mounts, "name: "+cm) || !strings.Contains(mounts, "mountPath: "+filepath.Dir(flag)) {
		t.Errorf("--webhook-client-ca=%s is not the clientCA value, mounted from a ConfigMap (found %q)", flag, cm)
	}
	if !strings.Contains(mounts, "checksum/webhook-client-ca") {
		t.Errorf("a new client CA does not roll the operator's pods (no checksum annotation)")
	}
	def := objects(t, render(t, "default"))
	if f := operatorFlags(t, find(def, "Deployment")[0])["--webhook-client-ca"]; f != "" {
		t.Errorf("the defaults pass --webhook-client-ca=%s", f)
	}
}

// TestMonitorsScopedAndVerified: the PodMonitor scrapes only the namespaces listed, with a
// sample limit; the ServiceMonitor verifies the operator's certificate against the CA in the
// certificate's Secret for the metrics Service's name, which the operator's certificate names
// (--metrics-service, or the cert-manager Certificate's dnsNames).
func TestMonitorsScopedAndVerified(t *testing.T) {
	for _, set := range []string{"monitoring", "monitoring-custom"} {
		rendered := objects(t, render(t, set))
		pm, sm := find(rendered, "PodMonitor")[0], find(rendered, "ServiceMonitor")[0]
		if any, _, _ := unstructured.NestedBool(pm.Object, "spec", "namespaceSelector", "any"); any {
			t.Errorf("%s: the PodMonitor scrapes every namespace", set)
		}
		if names, _, _ := unstructured.NestedStringSlice(pm.Object, "spec", "namespaceSelector", "matchNames"); len(names) == 0 {
			t.Errorf("%s: the PodMonitor names no namespace", set)
		}
		if limit, _, _ := unstructured.NestedFieldNoCopy(pm.Object, "spec", "sampleLimit"); limit == nil || limit.(float64) <= 0 {
			t.Errorf("%s: the PodMonitor has no sampleLimit", set)
		}
		eps, _, _ := unstructured.NestedSlice(sm.Object, "spec", "endpoints")
		tc, _, _ := unstructured.NestedMap(eps[0].(map[string]any), "tlsConfig")
		if tc["insecureSkipVerify"] == true {
			t.Errorf("%s: the ServiceMonitor skips verification", set)
		}
		secret, _, _ := unstructured.NestedString(tc, "ca", "secret", "name")
		key, _, _ := unstructured.NestedString(tc, "ca", "secret", "key")
		deploy := find(rendered, "Deployment")[0]
		flags := operatorFlags(t, deploy)
		if secret != flags["--cert-secret"] || key != "ca.crt" {
			t.Errorf("%s: the ServiceMonitor's CA is %s/%s, want ca.crt of the certificate Secret %s", set, secret, key, flags["--cert-secret"])
		}
		serverName, _ := tc["serverName"].(string)
		if want := flags["--metrics-service"] + "." + namespace + ".svc"; flags["--metrics-service"] == "" || serverName != want {
			t.Errorf("%s: serverName %q, want %q (--metrics-service=%q)", set, serverName, want, flags["--metrics-service"])
		}
		if svc := serviceNamed(rendered, flags["--metrics-service"]); svc == nil {
			t.Errorf("%s: --metrics-service=%s names no rendered Service", set, flags["--metrics-service"])
		}
	}
	rendered := objects(t, render(t, "cert-manager"))
	flags := operatorFlags(t, find(rendered, "Deployment")[0])
	dns, _, _ := unstructured.NestedStringSlice(find(rendered, "Certificate")[0].Object, "spec", "dnsNames")
	if !slices.Contains(dns, flags["--metrics-service"]+"."+namespace+".svc") {
		t.Errorf("cert-manager: the Certificate's dnsNames %v lack the metrics Service %s", dns, flags["--metrics-service"])
	}
}

func serviceNamed(objs []*unstructured.Unstructured, name string) *unstructured.Unstructured {
	for _, s := range find(objs, "Service") {
		if s.GetName() == name {
			return s
		}
	}
	return nil
}

// TestNetworkAttachmentDefinitionScoped: one per listed namespace (Multus with
// namespaceIsolation serves a NetworkAttachmentDefinition to its own namespace only), and never
// in the namespace default, which Multus serves to every namespace.
func TestNetworkAttachmentDefinitionScoped(t *testing.T) {
	var got []string
	for _, nad := range find(objects(t, render(t, "endpoints")), "NetworkAttachmentDefinition") {
		got = append(got, nad.GetNamespace())
	}
	if !slices.Equal(got, []string{"web", "fstack-demo"}) {
		t.Errorf("NetworkAttachmentDefinitions in %v, want one in each of web, fstack-demo", got)
	}
	for _, set := range [][]string{
		{"networkAttachmentDefinition.enabled=true", "networkAttachmentDefinition.namespace=default"},
		{"networkAttachmentDefinition.enabled=true", "networkAttachmentDefinition.namespaces={web,default}"},
	} {
		args := []string{"template", release, chartDir, "--namespace", namespace, "--kube-version", kubeVersion}
		for _, s := range set {
			args = append(args, "--set", s)
		}
		if _, stderr, err := helm(t, args...); err == nil || !strings.Contains(stderr, "not in the namespace default") {
			t.Errorf("--set %v: want refused, got %v\n%s", set, err, stderr)
		}
	}
}
