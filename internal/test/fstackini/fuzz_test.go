package fstackini

import (
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

// FuzzParse: any bytes are read the way F-Stack reads config.ini or refused with an *Error;
// nothing panics, nothing grows past the input, and reading is deterministic. The renderer's
// goldens and the parser facts are the seeds.
func FuzzParse(f *testing.F) {
	goldens, _ := filepath.Glob(filepath.Join("..", "..", "render", "testdata", "golden", "*.ini"))
	if len(goldens) == 0 {
		f.Fatal("no golden config.ini under internal/render/testdata/golden: the seeds are missing")
	}
	for _, g := range goldens {
		data, err := os.ReadFile(g)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(data, true)
	}
	f.Add([]byte(minimal), false)
	f.Add([]byte(strings.Replace(minimal, "port_list=0", "port_list=0-65535", 1)), true)
	// A count the checks once walked to its end (CI hung on it).
	f.Add([]byte(strings.Replace(minimal, "nb_vdev=0", "nb_vdev=9000000000000", 1)), true)
	f.Add([]byte("[dpdk]\nlcore_mask=ffffffffffffffffffffffffffffffffff\n  x=1\n[port\n"), true)
	f.Fuzz(func(t *testing.T, data []byte, v125 bool) {
		v := V124
		if v125 {
			v = V125
		}
		c, err := Parse(data, v)
		if err != nil {
			var pe *Error
			if errors.As(err, &pe) && pe.Line > strings.Count(string(data), "\n")+1 {
				t.Fatalf("error names line %d of a %d-line input: %v", pe.Line, strings.Count(string(data), "\n")+1, err)
			}
			return
		}
		again, err := Parse(data, v)
		if err != nil || !reflect.DeepEqual(c, again) {
			t.Fatalf("reading the same bytes twice differs: %v", err)
		}
		if len(c.Lcores) == 0 || len(c.Lcores) > 128 {
			t.Fatalf("accepted %d lcores", len(c.Lcores))
		}
		for k := range c.Lcores {
			if argv := c.EAL(k, v125); len(argv) == 0 || argv[0] != "f-stack" {
				t.Fatalf("EAL(%d) = %q", k, argv)
			}
		}
	})
}
