package main

import (
	"slices"
	"testing"

	"github.com/kube-fstack/kube-fstack/dataplane-image/internal/launcher"
	"github.com/kube-fstack/kube-fstack/internal/logging"
)

// The injection's form, `fstack-launcher -- nginx -g ...`, gives the app its command whole; the
// launcher's flags come before "--", and the variable is their default.
func TestParseArgs(t *testing.T) {
	t.Setenv(logging.EnvLevel, "debug")
	l := launcher.New()
	args, err := parseArgs(l, []string{"--log-format=json", "--", "nginx", "-g", "daemon off;"})
	if err != nil || !slices.Equal(args, []string{"nginx", "-g", "daemon off;"}) || l.Logging.Format != logging.FormatJSON || l.Logging.Level != "debug" {
		t.Fatalf("args %q, options %+v, err %v", args, l.Logging, err)
	}
	if _, err := parseArgs(launcher.New(), []string{"--log-format=xml", "--", "true"}); err == nil {
		t.Fatal("a bad format must be refused")
	}
}
