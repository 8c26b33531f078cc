package cli

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/kube-fstack/kube-fstack/internal/test/fstackini"
)

// TestRenderMarksProfileValues: the values profile Proxy set carry a '#' line above them naming
// the profile and F-Stack's document; the output stays a config F-Stack reads; and without the
// comments it is byte for byte the renderer's golden, what the dataplane writes and hashes.
func TestRenderMarksProfileValues(t *testing.T) {
	args := []string{"render", "-f", sample(t, "proxy-profile.yaml"), "--cpus", "2-3", "--app-cpus", "4-5",
		"--vhost", "data=/var/run/kube-fstack/vhost/net1.sock"}
	out, errOut, code := run(t, args...)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	for key, want := range map[string]string{
		"enable=1":                           "# profile Proxy (F-Stack config.ini, the comment on [rss_check])",
		"net.inet.ip.portrange.randomtime=0": "# profile Proxy (F-Stack config.ini, the comment on net.inet.ip.portrange.randomtime)",
	} {
		if above := lineAbove(out, key); above != want {
			t.Errorf("above %s: %q, want %q\n%s", key, above, want, out)
		}
	}
	if strings.Count(out, "# profile") != 2 {
		t.Errorf("want exactly the profile's 2 values marked:\n%s", out)
	}
	if _, err := fstackini.Parse([]byte(out), fstackini.V125); err != nil {
		t.Errorf("with the profile's comments the output must stay a config F-Stack reads: %v", err)
	}
	golden, err := os.ReadFile(filepath.Join("..", "..", "..", "internal", "render", "testdata", "golden", "proxy-profile.ini"))
	if err != nil {
		t.Fatal(err)
	}
	if stripped := dropComments(out); stripped != string(golden) {
		t.Errorf("the comments changed more than comments:\n%s", stripped)
	}
	plain, _, _ := run(t, append(args, "--explain=false")...)
	if plain != string(golden) {
		t.Errorf("--explain=false must print exactly the dataplane's file:\n%s", plain)
	}
}

// TestRenderNamesTheOverridingField: a value the spec sets over its profile's says so, with the
// field, above the spec's value; a profile value that cannot apply is a note on stderr.
func TestRenderNamesTheOverridingField(t *testing.T) {
	dir := t.TempDir()
	write := func(name, spec string) string {
		p := filepath.Join(dir, name)
		doc := "apiVersion: kubefstack.io/v1alpha1\nkind: StackInstance\nmetadata: {name: s}\nspec:\n" + spec +
			"  ports:\n  - name: data\n    device: {pci: {address: \"0000:3b:00.0\"}}\n    ipv4: {address: 10.0.0.10/24, gateway: 10.0.0.1}\n"
		if err := os.WriteFile(p, []byte(doc), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	out, errOut, code := run(t, "render", "-f", write("short.yaml", "  profile: ShortConnections\n  dpdk: {pktTxDelayMicroseconds: 80}\n"), "--cpus", "2")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	above := lineAbove(out, "pkt_tx_delay=80")
	if !strings.HasPrefix(above, "# profile ShortConnections would set pkt_tx_delay=50 (F-Stack adapter/syscall/README.md") ||
		!strings.HasSuffix(above, "; spec.dpdk.pktTxDelayMicroseconds overrides it") {
		t.Errorf("above pkt_tx_delay=80: %q\n%s", above, out)
	}
	// A StackInstance stored before profiles existed carries the 100 the CRD used to default.
	out, errOut, code = run(t, "render", "-f", write("long.yaml", "  profile: LongConnections\n  dpdk: {pktTxDelayMicroseconds: 100}\n"), "--cpus", "2")
	if above := lineAbove(out, "pkt_tx_delay=100"); code != 0 || !strings.HasPrefix(above, "# profile LongConnections sets the same (") ||
		!strings.HasSuffix(above, "; spec.dpdk.pktTxDelayMicroseconds sets it explicitly") {
		t.Errorf("exit %d, above pkt_tx_delay=100: %q\n%s", code, above, errOut)
	}
	out, errOut, code = run(t, "render", "-f", write("proxy.yaml", "  profile: Proxy\n"), "--cpus", "2")
	if code != 0 || !strings.Contains(errOut, "note: profile Proxy leaves [rss_check] enable unset: spec.rssCheck.entries lists no upstreams") {
		t.Errorf("exit %d; want a note that the table needs upstreams, stderr:\n%s", code, errOut)
	}
	if strings.Contains(out, "[rss_check]") {
		t.Errorf("no entries, yet an [rss_check] section:\n%s", out)
	}
}

func lineAbove(out, line string) string {
	lines := strings.Split(out, "\n")
	for i := 1; i < len(lines); i++ {
		if lines[i] == line {
			return lines[i-1]
		}
	}
	return ""
}

func dropComments(out string) string {
	var b strings.Builder
	for _, l := range strings.SplitAfter(out, "\n") {
		if !strings.HasPrefix(l, "#") {
			b.WriteString(l)
		}
	}
	return b.String()
}
