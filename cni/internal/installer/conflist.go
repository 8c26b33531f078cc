package installer

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"

	"github.com/kube-fstack/kube-fstack/internal/fsutil"
)

// MergeConflist makes sure the conflist at path chains plugin (a JSON object with "type"): it
// replaces an entry of the same type, or appends one; a missing file gets a new conflist
// holding only the plugin. Other members and entries are kept as they are.
func MergeConflist(path string, plugin []byte) error {
	var entry map[string]any
	if err := json.Unmarshal(plugin, &entry); err != nil || entry["type"] == nil {
		return fmt.Errorf("plugin config must be a JSON object with a type: %s", plugin)
	}
	list, err := readConflist(path)
	if err != nil {
		return err
	}
	plugins, _ := list["plugins"].([]any)
	merged, changed := mergeEntry(plugins, entry)
	if !changed {
		return nil
	}
	list["plugins"] = merged
	out, err := json.MarshalIndent(list, "", "  ")
	if err != nil {
		return err
	}
	return fsutil.WriteAtomic(path, append(out, '\n'), 0o644)
}

func readConflist(path string) (map[string]any, error) {
	data, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return map[string]any{"cniVersion": "1.1.0", "name": "kube-fstack", "plugins": []any{}}, nil
	}
	if err != nil {
		return nil, err
	}
	var list map[string]any
	if err := json.Unmarshal(data, &list); err != nil {
		return nil, fmt.Errorf("%s is not JSON: %w", path, err)
	}
	if _, ok := list["plugins"].([]any); !ok {
		return nil, fmt.Errorf("%s is not a conflist (no plugins array)", path)
	}
	return list, nil
}

func mergeEntry(plugins []any, entry map[string]any) ([]any, bool) {
	want, _ := json.Marshal(entry)
	for i, p := range plugins {
		m, ok := p.(map[string]any)
		if !ok || m["type"] != entry["type"] {
			continue
		}
		have, _ := json.Marshal(m)
		if string(have) == string(want) {
			return plugins, false
		}
		plugins[i] = entry
		return plugins, true
	}
	return append(plugins, entry), true
}
