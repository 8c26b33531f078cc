package cli

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"unicode"
	"unicode/utf16"
	"unicode/utf8"

	"github.com/spf13/cobra"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/cli-runtime/pkg/genericclioptions"
)

// OutputGroupVersion is the apiVersion of what `-o json|yaml` prints. It is no API resource (the
// API server serves nothing of this group); it versions the structure so scripts can tell when it
// changes incompatibly. The fields are documented on the Go types below and in docs/kubectl-plugin.md.
var OutputGroupVersion = schema.GroupVersion{Group: "cli.kubefstack.io", Version: "v1alpha1"}

// outputFlags is kubectl's -o: the table by default, "wide" for the table with more columns, and
// cli-runtime's printers (json, yaml, jsonpath, go-template, as for kubectl get) for the
// structures. kubectl's -o name is there only for a command whose rows are API objects
// (withNames): elsewhere what is printed is no API object with a name.
type outputFlags struct {
	print *genericclioptions.PrintFlags
	names bool
}

// withNames adds -o name: the command prints resource.group/name of each object itself.
func (f *outputFlags) withNames(cmd *cobra.Command) *outputFlags {
	f.names = true
	cmd.Flag("output").Usage = fmt.Sprintf("Output format. One of: (wide, name, %s); the table when empty.", strings.Join(f.print.AllowedFormats(), ", "))
	return f
}

// name reports whether -o name is wanted.
func (f *outputFlags) name() bool { return f.names && *f.print.OutputFormat == "name" }

func newOutputFlags(cmd *cobra.Command) *outputFlags {
	f := &outputFlags{print: newPrintFlagsFor("")}
	f.print.AddFlags(cmd)
	// AddFlags lists the printers' formats only; the table's own are added to the help.
	cmd.Flag("output").Usage = fmt.Sprintf("Output format. One of: (wide, %s); the table when empty.", strings.Join(f.print.AllowedFormats(), ", "))
	_ = cmd.RegisterFlagCompletionFunc("output", func(*cobra.Command, []string, string) ([]string, cobra.ShellCompDirective) {
		formats := []string{"wide"}
		if f.names {
			formats = append(formats, "name")
		}
		return append(formats, f.print.AllowedFormats()...), cobra.ShellCompDirectiveNoFileComp
	})
	return f
}

func newPrintFlagsFor(format string) *genericclioptions.PrintFlags {
	return &genericclioptions.PrintFlags{
		JSONYamlPrintFlags:   genericclioptions.NewJSONYamlPrintFlags(),
		TemplatePrinterFlags: genericclioptions.NewKubeTemplatePrintFlags(),
		OutputFormat:         &format,
	}
}

// table reports whether the table is wanted, and whether wide.
func (f *outputFlags) table() (table, wide bool) {
	switch *f.print.OutputFormat {
	case "":
		return true, false
	case "wide":
		return true, true
	}
	return false, false
}

// validate fails early, before the cluster is asked, on a format no printer knows.
func (f *outputFlags) validate() error {
	if t, _ := f.table(); t || f.name() {
		return nil
	}
	if _, err := f.print.ToPrinter(); err != nil {
		formats := "wide, "
		if f.names {
			formats += "name, "
		}
		return fmt.Errorf("--output %q: no such format; use %s%s, or no -o for the table",
			*f.print.OutputFormat, formats, strings.Join(f.print.AllowedFormats(), ", "))
	}
	return nil
}

// printObject prints obj with the printer -o names. JSON and YAML escape the cluster's strings by
// their own encoding, so safe is not applied (it would change the data); but encoding/json leaves
// DEL, C1 controls and Unicode format characters (a bidi override) raw, which a terminal may act
// on and which YAML's parser refuses ("control characters are not allowed", so one hostile
// annotation would break -o yaml). escapeJSON writes them as \u escapes first: the same data for
// any JSON or YAML reader.
func (f *outputFlags) printObject(obj any, w io.Writer) error {
	p, err := f.print.ToPrinter()
	if err != nil {
		return fmt.Errorf("--output %q: %w", *f.print.OutputFormat, err)
	}
	raw, err := json.Marshal(obj)
	if err != nil {
		return err
	}
	return p.PrintObj(&runtime.Unknown{Raw: escapeJSON(raw), ContentType: runtime.ContentTypeJSON}, w)
}

// escapeJSON rewrites every rune of raw that is not printable, beyond ASCII's controls that
// encoding/json already escapes, as a JSON \u escape. Outside strings JSON has only printable
// ASCII, so only string contents change, and only in spelling.
func escapeJSON(raw []byte) []byte {
	var b bytes.Buffer
	for _, r := range string(raw) {
		switch {
		case r < utf8.RuneSelf && r != 0x7f, unicode.IsPrint(r):
			b.WriteRune(r)
		case r > 0xffff:
			r1, r2 := utf16.EncodeRune(r)
			fmt.Fprintf(&b, `\u%04x\u%04x`, r1, r2)
		default:
			fmt.Fprintf(&b, `\u%04x`, r)
		}
	}
	return b.Bytes()
}
