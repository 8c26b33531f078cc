package docs

import (
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// A namespace an install command makes or opts in carries its Pod Security level in the same
// command block, not only in prose: the chart's namespace `privileged` (the CNI DaemonSet uses
// host paths and the host network), a tenant namespace `baseline` (what a vhost-user stack's
// injected pods meet; docs/security.md) or `privileged` (PCI ports, KNI). `restricted` cannot run
// an injected pod (DPDK's runtime directory is root's), so it counts as missing.
var (
	createNS   = regexp.MustCompile(`\b(?:kubectl|kc) create (?:namespace|ns) ([a-z0-9.-]+|<[a-z]+>)`)
	optIn      = regexp.MustCompile(`\b(?:kubectl|kc) label (?:namespace|ns) ([a-z0-9.-]+|<[a-z]+>)[^\n]*kubefstack\.io/injection=enabled`)
	helmNS     = regexp.MustCompile(`\bhelm(?:-v[0-9.]+)? (?:install|upgrade --install)\b[^\n]*`)
	nsFlag     = regexp.MustCompile(`(?:^|\s)(?:-n|--namespace)[ =]([a-z0-9.-]+)`)
	psaLabel   = regexp.MustCompile(`\b(?:kubectl|kc) label (?:namespace|ns) ([a-z0-9.-]+|<[a-z]+>)[^\n]*pod-security\.kubernetes\.io/enforce=([a-z]+)`)
	createFlag = regexp.MustCompile(`--create-namespace\b`)
)

// namespaceNeeds lists, for one command block, each namespace it makes or opts in and the Pod
// Security levels that namespace may be given.
func namespaceNeeds(body string) map[string][]string {
	body = joinLines(body)
	need := map[string][]string{}
	for _, m := range createNS.FindAllStringSubmatch(body, -1) {
		need[m[1]] = []string{"baseline", "privileged"}
	}
	for _, m := range optIn.FindAllStringSubmatch(body, -1) {
		need[m[1]] = []string{"baseline", "privileged"}
	}
	// The release's namespace, whether the block makes it or helm does: the CNI DaemonSet's.
	for _, cmd := range helmNS.FindAllString(body, -1) {
		if m := nsFlag.FindStringSubmatch(cmd); m != nil {
			need[m[1]] = []string{"privileged"}
		}
	}
	return need
}

// missingPSA is what a block lacks: one line per namespace without an allowed level.
func missingPSA(body string) []string {
	body = joinLines(body)
	given := map[string]string{}
	for _, m := range psaLabel.FindAllStringSubmatch(body, -1) {
		given[m[1]] = m[2]
	}
	var out []string
	for ns, levels := range namespaceNeeds(body) {
		level, ok := given[ns]
		switch {
		case !ok:
			out = append(out, "namespace "+ns+" is made or opted in without `kubectl label namespace "+ns+" pod-security.kubernetes.io/enforce="+levels[0]+"`")
		case !slices.Contains(levels, level):
			out = append(out, "namespace "+ns+" enforces "+level+", want one of "+strings.Join(levels, ", "))
		}
	}
	if createFlag.MatchString(body) {
		// helm makes the namespace after nothing could label it: its pods meet whatever the
		// cluster's default level is first.
		out = append(out, "helm --create-namespace makes a namespace no command labelled first: create and label it before `helm install`")
	}
	return out
}

// joinLines makes each command one line: a backslash at the end of a line continues it.
func joinLines(body string) string { return strings.ReplaceAll(body, "\\\n", " ") }

// shellFence says whether a block is commands (not output or YAML).
func shellFence(lang string) bool {
	return lang == "sh" || lang == "bash" || lang == "shell" || lang == "console"
}

func TestInstallCommandsSetPodSecurity(t *testing.T) {
	checked := 0
	for _, rel := range userDocs(t) {
		for _, f := range fences(t, rel) {
			if !shellFence(f.lang) {
				continue
			}
			if len(namespaceNeeds(f.body)) > 0 {
				checked++
			}
			for _, miss := range missingPSA(f.body) {
				t.Errorf("%s:%d: %s", rel, f.line, miss)
			}
		}
	}
	notes := filepath.Join("charts", "kube-fstack", "templates", "NOTES.txt")
	for _, miss := range missingPSA(read(t, notes)) {
		t.Errorf("%s: %s", notes, miss)
	}
	if checked < 4 {
		t.Fatalf("only %d command blocks make or opt in a namespace: the patterns no longer find the install commands", checked)
	}
}

// The rule itself: each way of making or opting in a namespace without its level is caught, and
// the commands the pages show pass.
func TestMissingPSAFindsEachGap(t *testing.T) {
	bad := map[string]string{
		"create only":        "kubectl create namespace web\n",
		"opt-in only":        "kubectl label namespace web kubefstack.io/injection=enabled\n",
		"helm creates":       "helm install kube-fstack oci://x -n kube-fstack-system --create-namespace\n",
		"helm, no label":     "kubectl create namespace kube-fstack-system\nhelm install kube-fstack oci://x \\\n  -n kube-fstack-system\n",
		"release baseline":   "kubectl create namespace s\nkubectl label namespace s pod-security.kubernetes.io/enforce=baseline\nhelm install k c -n s\n",
		"tenant restricted":  "kubectl create namespace web\nkubectl label namespace web pod-security.kubernetes.io/enforce=restricted\n",
		"another namespace":  "kubectl create namespace web\nkubectl label namespace shop pod-security.kubernetes.io/enforce=baseline\n",
		"kc create (multus)": "kc create namespace fstack-demo\n",
	}
	for name, body := range bad {
		if len(missingPSA(body)) == 0 {
			t.Errorf("%s: not caught:\n%s", name, body)
		}
	}
	good := "kubectl create namespace kube-fstack-system\nkubectl label namespace kube-fstack-system pod-security.kubernetes.io/enforce=privileged\n" +
		"kubectl create namespace web\nkubectl label namespace web kubefstack.io/injection=enabled pod-security.kubernetes.io/enforce=baseline\n" +
		"helm install kube-fstack oci://x --version 0.1.0 \\\n  -n kube-fstack-system \\\n  --set a=b\n"
	if miss := missingPSA(good); len(miss) != 0 {
		t.Errorf("the install commands were refused: %v", miss)
	}
}
