package cli

import (
	"strings"
	"testing"

	"github.com/kube-fstack/kube-fstack/internal/podcontract"
)

// The pod writes /config: what config prints of it reaches the terminal as safe text, with
// config.ini's sections still readable.
func TestConfigPrintsThePodsAnswerAsSafeText(t *testing.T) {
	var b strings.Builder
	err := writeConfig(&b, &PodConfig{Namespace: "web", Pod: "p", Stack: "s", Running: podcontract.RunningConfig{
		Generation: 2, ShimMode: "pipeline\x1b[2J", EAL: [][]string{{"f-stack", "-c2"}},
		ConfigINI: "[dpdk]\nlcore_mask=2\x1b]0;owned\x07\n\n[port0]\n"}})
	if err != nil {
		t.Fatal(err)
	}
	out := b.String()
	if strings.ContainsAny(out, "\x1b\x07") {
		t.Errorf("raw control characters reach the terminal: %q", out)
	}
	for _, want := range []string{"Shim: pipeline\\x1b[2J\n", "EAL proc 0: f-stack -c2\n", "config.ini:\n  [dpdk]\n  lcore_mask=2\\x1b]0;owned\\a\n\n  [port0]\n"} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
}
