package cli

import (
	"bufio"
	"bytes"
	"fmt"
	"strings"

	"github.com/kube-fstack/kube-fstack/internal/render"
)

// explainProfile returns config.ini with a '#' line above each value the profile set or would
// have set. The note sits next to the value because that is where a reader of the file looks for
// it; '#' at the start of a line is a comment to F-Stack (docs/fstack-rules.md §1.1), so the output
// stays a config F-Stack reads. It is display only: the dataplane's file and the config hash come
// from the renderer's bytes, never from these.
func explainProfile(cfg []byte, vals []render.ProfileValue) []byte {
	byKey := map[string]render.ProfileValue{}
	for _, v := range vals {
		if v.Unused == "" {
			byKey[v.Section+"\x00"+v.Key] = v
		}
	}
	if len(byKey) == 0 {
		return cfg
	}
	var out bytes.Buffer
	section := ""
	sc := bufio.NewScanner(bytes.NewReader(cfg))
	sc.Buffer(make([]byte, 0, 4096), len(cfg)+1)
	for sc.Scan() {
		line := sc.Text()
		if strings.HasPrefix(line, "[") && strings.HasSuffix(line, "]") {
			section = line[1 : len(line)-1]
		} else if key, value, ok := strings.Cut(line, "="); ok {
			if v, found := byKey[section+"\x00"+key]; found {
				out.WriteString(profileNote(v, value) + "\n")
			}
		}
		out.WriteString(line + "\n")
	}
	return out.Bytes()
}

// profileNote says where the value next to it comes from.
func profileNote(v render.ProfileValue, written string) string {
	switch {
	case v.OverriddenBy == "":
		return fmt.Sprintf("# profile %s (%s)", v.Profile, v.Source)
	case written == v.Value:
		return fmt.Sprintf("# profile %s sets the same (%s); %s sets it explicitly", v.Profile, v.Source, v.OverriddenBy)
	}
	return fmt.Sprintf("# profile %s would set %s=%s (%s); %s overrides it", v.Profile, v.Key, v.Value, v.Source, v.OverriddenBy)
}

// unusedProfileNotes says which of the profile's values do not apply to the spec, and why.
func unusedProfileNotes(vals []render.ProfileValue) []string {
	var out []string
	for _, v := range vals {
		if v.Unused != "" {
			out = append(out, fmt.Sprintf("profile %s leaves [%s] %s unset: %s", v.Profile, v.Section, v.Key, v.Unused))
		}
	}
	return out
}
