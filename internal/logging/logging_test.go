package logging_test

import (
	"bytes"
	"errors"
	"flag"
	"strings"
	"testing"

	"github.com/kube-fstack/kube-fstack/internal/logging"
	"github.com/kube-fstack/kube-fstack/internal/test/logtest"
)

// Both formats carry component and the keys a call gives, and a hostile value (a pod's
// annotation may hold newlines and '=') stays one value of one line.
func TestBothFormatsParseWithTheirKeys(t *testing.T) {
	for _, format := range []string{"", logging.FormatText, logging.FormatJSON} {
		var buf bytes.Buffer
		log, err := logging.New(&buf, logging.ComponentSupervisor, logging.Options{Format: format})
		if err != nil {
			t.Fatal(err)
		}
		hostile := "web\nlevel=ERROR msg=forged"
		log.Info("process is up", logging.KeyProcess, 1, logging.KeyPID, 42, logging.KeyStack, hostile)
		log.Error("failed", logging.KeyErr, errors.New("boom"))
		want := format
		if want == "" {
			want = logging.FormatText
		}
		lines, err := logtest.Parse(buf.String(), want, logging.ComponentSupervisor)
		if err != nil {
			t.Fatalf("format %q: %v\n%s", format, err, buf.String())
		}
		if len(lines) != 2 {
			t.Fatalf("format %q: %d lines, want 2:\n%s", format, len(lines), buf.String())
		}
		if l := lines[0]; l[logging.KeyProcess] != "1" || l[logging.KeyPID] != "42" || l[logging.KeyStack] != hostile || l["level"] != "INFO" {
			t.Errorf("format %q: %v", format, l)
		}
		if l := lines[1]; l[logging.KeyErr] != "boom" || l["level"] != "ERROR" {
			t.Errorf("format %q: %v", format, l)
		}
	}
}

func TestLevelFiltersAndBadOptionsAreNamed(t *testing.T) {
	var buf bytes.Buffer
	log, err := logging.New(&buf, logging.ComponentCNI, logging.Options{Level: "warn"})
	if err != nil {
		t.Fatal(err)
	}
	log.Info("quiet")
	log.Warn("loud")
	if strings.Contains(buf.String(), "quiet") || !strings.Contains(buf.String(), "loud") {
		t.Errorf("level warn:\n%s", buf.String())
	}
	_, err = logging.New(&buf, logging.ComponentCNI, logging.Options{Format: "yaml", Level: "loud"})
	if err == nil || !strings.Contains(err.Error(), "--log-format") || !strings.Contains(err.Error(), "--log-level") {
		t.Errorf("bad options: %v, want both flags named", err)
	}
}

// The variable is the default; the flag given wins.
func TestFlagWinsOverEnv(t *testing.T) {
	t.Setenv(logging.EnvFormat, logging.FormatJSON)
	t.Setenv(logging.EnvLevel, "debug")
	var o logging.Options
	fs := flag.NewFlagSet("x", flag.ContinueOnError)
	o.BindFlags(fs)
	if err := fs.Parse([]string{"--log-level=error"}); err != nil {
		t.Fatal(err)
	}
	if o.Format != logging.FormatJSON || o.Level != "error" {
		t.Errorf("options %+v", o)
	}
}
