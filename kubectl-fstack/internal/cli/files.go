package cli

import (
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/spf13/pflag"
	"k8s.io/cli-runtime/pkg/genericclioptions"
	"k8s.io/cli-runtime/pkg/resource"
)

// fileFlags are kubectl's own -f/--filename (repeatable, files, directories, - for stdin) and
// -R/--recursive, from k8s.io/cli-runtime, so they read as kubectl apply's do.
type fileFlags struct {
	filenames []string
	recursive bool
}

func (f *fileFlags) add(flags *pflag.FlagSet, usage string) {
	(&genericclioptions.FileNameFlags{Usage: usage, Filenames: &f.filenames, Recursive: &f.recursive}).AddFlags(flags)
}

// input is one file -f named: its name for messages, and its content.
type input struct {
	name string
	data []byte
}

// read reads what -f names in kubectl's way, by cli-runtime's own expansion: "-" is stdin, a file
// is read whatever its name, a directory gives its .json, .yaml and .yml files (in lexical
// order), and with -R those of its subdirectories too. A directory with none is an error, as
// kubectl's "no objects passed" is.
func (f *fileFlags) read() ([]input, error) {
	var out []input
	for _, p := range f.filenames {
		if p == "-" {
			data, err := io.ReadAll(os.Stdin)
			if err != nil {
				return nil, fmt.Errorf("read stdin: %w", err)
			}
			out = append(out, input{name: "-", data: data})
			continue
		}
		if strings.HasPrefix(p, "http://") || strings.HasPrefix(p, "https://") {
			return nil, fmt.Errorf("-f %s: this plugin reads files and directories only (it works offline): download the file first", p)
		}
		visitors, err := resource.ExpandPathsToFileVisitors(nil, p, f.recursive, resource.FileExtensions, nil)
		if err != nil {
			return nil, fmt.Errorf("-f %s: %w", p, err)
		}
		if len(visitors) == 0 {
			hint := ""
			if !f.recursive {
				hint = " (-R reads its subdirectories too)"
			}
			return nil, fmt.Errorf("-f %s: no .json, .yaml or .yml file in it%s", p, hint)
		}
		for _, v := range visitors {
			fv, ok := v.(*resource.FileVisitor)
			if !ok {
				return nil, fmt.Errorf("-f %s: unexpected %T from cli-runtime's expansion", p, v)
			}
			data, err := os.ReadFile(fv.Path)
			if err != nil {
				return nil, err
			}
			out = append(out, input{name: fv.Path, data: data})
		}
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("no file given: name one with -f (repeatable; a directory, with -R its subdirectories too; - for stdin)")
	}
	return out, nil
}

// names is what the files are called in a message: one's name, or "the files of -f".
func names(in []input) string {
	if len(in) == 1 {
		return in[0].name
	}
	return fmt.Sprintf("the %d files of -f", len(in))
}
