package cnimain

import (
	"bytes"
	"io"
	"strings"
	"testing"

	"github.com/containernetworking/cni/pkg/types"
)

// A runtime (or anyone who can exec the plugin) sending an endless stdin gets an error naming
// the limit; the plugin reads at most one byte past it.
func TestStdinIsBounded(t *testing.T) {
	env := map[string]string{"CNI_COMMAND": "ADD", "CNI_CONTAINERID": "c1", "CNI_NETNS": "/x", "CNI_IFNAME": "net1", "CNI_PATH": "/x"}
	conf := `{"cniVersion":"1.1.0","name":"n","type":"t","pad":"` + strings.Repeat("a", MaxStdin) + `"}`
	src := &countingReader{r: io.MultiReader(strings.NewReader(conf), zeros{})}
	d := &dispatcher{getenv: func(k string) string { return env[k] }, stdin: src, stdout: &bytes.Buffer{}, stderr: &bytes.Buffer{}}
	_, _, err := d.cmdArgs()
	if err == nil || err.Code != types.ErrDecodingFailure || !strings.Contains(err.Msg, "larger than") {
		t.Fatalf("got %v, want code 6 saying the config is too large", err)
	}
	if src.n > MaxStdin+1 {
		t.Fatalf("read %d bytes, want at most %d", src.n, MaxStdin+1)
	}
	small := &dispatcher{getenv: func(k string) string { return env[k] }, stdin: strings.NewReader(`{"name":"n"}`), stdout: &bytes.Buffer{}, stderr: &bytes.Buffer{}}
	if _, args, err := small.cmdArgs(); err != nil || string(args.StdinData) != `{"name":"n"}` {
		t.Fatalf("a small config: %v", err)
	}
}

type zeros struct{}

func (zeros) Read(p []byte) (int, error) { return len(p), nil }

type countingReader struct {
	r io.Reader
	n int
}

func (c *countingReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.n += n
	return n, err
}
