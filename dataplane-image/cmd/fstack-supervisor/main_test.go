package main

import (
	"strings"
	"testing"
)

// An argument the supervisor does not know (a hook naming a subcommand an older image lacks)
// fails the start instead of starting a second dataplane beside the first.
func TestParseFlagsRefusesArguments(t *testing.T) {
	if _, err := parseFlags([]string{"--program-mode", "--program=x", "wait-placd"}); err == nil || !strings.Contains(err.Error(), `"wait-placd"`) {
		t.Fatalf("got %v, want the unknown argument named", err)
	}
	if _, err := parseFlags([]string{"--program-mode", "--program=x"}); err != nil {
		t.Fatalf("flags alone: %v", err)
	}
}
