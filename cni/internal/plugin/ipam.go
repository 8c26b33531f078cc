package plugin

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"

	"github.com/containernetworking/cni/pkg/types"
	"github.com/containernetworking/cni/pkg/types/create"
)

// IPAM runs an IPAM plugin with the plugin's own stdin, as the CNI spec's delegation says.
type IPAM interface {
	Add(ctx context.Context, plugin string, stdin []byte) (types.Result, error)
	Del(ctx context.Context, plugin string, stdin []byte) error
	Check(ctx context.Context, plugin string, stdin []byte) error
	GC(ctx context.Context, plugin string, stdin []byte) error
	Status(ctx context.Context, plugin string, stdin []byte) error
}

// execIPAM finds the IPAM binary in CNI_PATH and execs it with this process's environment and
// CNI_COMMAND replaced. It is written here instead of using the CNI library's invoke package:
// invoke links OpenTelemetry, net/http and crypto/tls into the binary (a third of its size),
// and every CNI call pays for loading them at process start.
type execIPAM struct{}

func (execIPAM) Add(ctx context.Context, plugin string, stdin []byte) (types.Result, error) {
	out, err := delegate(ctx, "ADD", plugin, stdin)
	if err != nil {
		return nil, err
	}
	return decodeResult(stdin, out)
}

func (execIPAM) Del(ctx context.Context, plugin string, stdin []byte) error {
	_, err := delegate(ctx, "DEL", plugin, stdin)
	return err
}

func (execIPAM) Check(ctx context.Context, plugin string, stdin []byte) error {
	_, err := delegate(ctx, "CHECK", plugin, stdin)
	return err
}

func (execIPAM) GC(ctx context.Context, plugin string, stdin []byte) error {
	_, err := delegate(ctx, "GC", plugin, stdin)
	return err
}

func (execIPAM) Status(ctx context.Context, plugin string, stdin []byte) error {
	_, err := delegate(ctx, "STATUS", plugin, stdin)
	return err
}

// delegate runs plugin with verb and returns its stdout. A failure carries the plugin's own
// CNI error (code and message) when it printed one, so the runtime sees the real cause.
func delegate(ctx context.Context, verb, plugin string, stdin []byte) ([]byte, error) {
	path, err := findPlugin(plugin, filepath.SplitList(os.Getenv("CNI_PATH")))
	if err != nil {
		return nil, err
	}
	var stdout, stderr bytes.Buffer
	cmd := exec.CommandContext(ctx, path)
	cmd.Env = withCommand(os.Environ(), verb)
	cmd.Stdin, cmd.Stdout, cmd.Stderr = bytes.NewReader(stdin), &stdout, &stderr
	cmd.ExtraFiles = inheritedLock(ctx)
	if err := cmd.Run(); err != nil {
		return nil, delegateErr(plugin, err, stdout.Bytes(), stderr.Bytes())
	}
	return stdout.Bytes(), nil
}

// findPlugin looks plugin up in the CNI_PATH directories; a name with a slash could escape them.
func findPlugin(plugin string, dirs []string) (string, error) {
	if plugin == "" || strings.ContainsRune(plugin, os.PathSeparator) {
		return "", fmt.Errorf("invalid plugin name %q", plugin)
	}
	for _, dir := range dirs {
		p := filepath.Join(dir, plugin)
		if st, err := os.Stat(p); err == nil && st.Mode().IsRegular() {
			return p, nil
		}
	}
	return "", fmt.Errorf("plugin %q not found in CNI_PATH %q", plugin, dirs)
}

func withCommand(environ []string, verb string) []string {
	env := make([]string, 0, len(environ)+1)
	for _, kv := range environ {
		if !strings.HasPrefix(kv, "CNI_COMMAND=") {
			env = append(env, kv)
		}
	}
	return append(env, "CNI_COMMAND="+verb)
}

func delegateErr(plugin string, err error, stdout, stderr []byte) error {
	var te types.Error
	if json.Unmarshal(stdout, &te) == nil && te.Code != 0 {
		return &te
	}
	if msg := strings.TrimSpace(string(stderr)); msg != "" {
		return fmt.Errorf("%s: %w: %s", plugin, err, msg)
	}
	return fmt.Errorf("%s: %w", plugin, err)
}

// decodeResult reads an IPAM result in the version it states, or the config's when it states
// none (older plugins omit it, and the spec says it is then the config's).
func decodeResult(conf, out []byte) (types.Result, error) {
	var v struct {
		CNIVersion string `json:"cniVersion"`
	}
	if err := json.Unmarshal(out, &v); err != nil {
		return nil, fmt.Errorf("IPAM result is not JSON: %w", err)
	}
	if v.CNIVersion != "" {
		return create.Create(v.CNIVersion, out)
	}
	confVersion, err := create.DecodeVersion(conf)
	if err != nil {
		return nil, err
	}
	var raw map[string]any
	if err := json.Unmarshal(out, &raw); err != nil || raw == nil {
		return nil, fmt.Errorf("IPAM result is not a JSON object: %s", out)
	}
	raw["cniVersion"] = confVersion
	fixed, err := json.Marshal(raw)
	if err != nil {
		return nil, err
	}
	return create.Create(confVersion, fixed)
}
