package main

import (
	"bytes"
	"errors"
	"testing"

	"github.com/kube-fstack/kube-fstack/internal/logging"
	"github.com/kube-fstack/kube-fstack/internal/test/logtest"
)

// controller-runtime's logr, named and with V-levels, writes the lines every kube-fstack
// binary writes: both formats parse and carry component; V(1) shows at debug only; Error's
// error is under the common err key.
func TestOperatorLogsInBothFormats(t *testing.T) {
	for _, format := range []string{logging.FormatText, logging.FormatJSON} {
		for _, level := range []string{"info", "debug"} {
			var buf bytes.Buffer
			l, err := newLogger(&buf, logging.Options{Format: format, Level: level})
			if err != nil {
				t.Fatal(err)
			}
			l = l.WithName("webhook")
			l.Info("starting", logging.KeyNamespace, "kube-fstack")
			l.V(1).Info("injected", logging.KeyNamespace, "shop", logging.KeyStack, "edge")
			l.Error(errors.New("boom"), "register webhooks")
			lines, err := logtest.Parse(buf.String(), format, logging.ComponentOperator)
			if err != nil {
				t.Fatalf("%s/%s: %v\n%s", format, level, err, buf.String())
			}
			if _, ok := logtest.Find(lines, "starting", map[string]string{logging.KeyNamespace: "kube-fstack", "logger": "webhook"}); !ok {
				t.Errorf("%s/%s: no starting line:\n%s", format, level, buf.String())
			}
			if _, ok := logtest.Find(lines, "register webhooks", map[string]string{logging.KeyErr: "boom", "level": "ERROR"}); !ok {
				t.Errorf("%s/%s: no error line with err:\n%s", format, level, buf.String())
			}
			// logr's V(1) is slog level -1, which slog itself would name "DEBUG+3".
			_, debug := logtest.Find(lines, "injected", map[string]string{logging.KeyStack: "edge", "level": "DEBUG"})
			if debug != (level == "debug") {
				t.Errorf("%s/%s: V(1) shown %v:\n%s", format, level, debug, buf.String())
			}
		}
	}
	if _, err := newLogger(&bytes.Buffer{}, logging.Options{Format: "yaml"}); err == nil {
		t.Error("a bad format must be refused")
	}
}
