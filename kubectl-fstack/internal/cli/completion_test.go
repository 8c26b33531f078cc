package cli

import (
	"slices"
	"strings"
	"testing"
)

// kubectl completes `kubectl fstack ...` by running kubectl_complete-fstack with the words after
// "kubectl fstack": under that name the binary answers as cobra's __complete, under its own name
// it runs the command given.
func TestCompletionArgs(t *testing.T) {
	for _, c := range []struct {
		argv0 string
		args  []string
		want  []string
	}{
		{"/usr/local/bin/kubectl_complete-fstack", []string{"status", ""}, []string{"__complete", "status", ""}},
		{`C:\bin\kubectl_complete-fstack.exe`, []string{""}, []string{"__complete", ""}},
		{"kubectl-fstack", []string{"status"}, []string{"status"}},
	} {
		if got := CompletionArgs(c.argv0, c.args); !slices.Equal(got, c.want) {
			t.Errorf("CompletionArgs(%q, %q) = %q, want %q", c.argv0, c.args, got, c.want)
		}
	}
	out, errOut, code := run(t, CompletionArgs("kubectl_complete-fstack", []string{""})...)
	if code != 0 || !strings.Contains(out, "status\t") || !strings.Contains(out, "doctor\t") || !strings.Contains(out, "version\t") ||
		!strings.Contains(out, "bug-report\t") {
		t.Errorf("completing the commands: exit %d, stdout %q, stderr %q", code, out, errOut)
	}
}

// Every shell's script comes from cobra's generator; -o completes with the table's formats and
// the printers'.
func TestCompletion(t *testing.T) {
	for shell, want := range map[string]string{"bash": "__start_kubectl-fstack", "zsh": "#compdef kubectl-fstack",
		"fish": "complete -c kubectl-fstack", "powershell": "Register-ArgumentCompleter"} {
		out, errOut, code := run(t, "completion", shell)
		if code != 0 || !strings.Contains(out, want) {
			t.Errorf("completion %s: exit %d, stderr %q, script lacks %q", shell, code, errOut, want)
		}
	}
	// bug-report --output completes the archive's file names.
	if out, _, _ := run(t, "__complete", "bug-report", "--output", ""); out != "tar.gz\ntgz\n:8\n" {
		t.Errorf("bug-report --output completes %q, want the extensions tar.gz and tgz (cobra's FilterFileExt)", out)
	}
	for _, cmd := range []string{"status", "doctor", "version"} {
		out, _, _ := run(t, "__complete", cmd, "-o", "")
		for _, f := range []string{"wide\n", "json\n", "yaml\n", "jsonpath\n"} {
			if !strings.Contains(out, f) {
				t.Errorf("%s -o completes %q, lacks %q", cmd, out, f)
			}
		}
	}
}
