package nginxconf

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
)

// Prepared is an Nginx command judged: the configuration file read, the plan, and the argv to
// run (the original plus the plan's -g directives).
type Prepared struct {
	ConfFile string
	Plan     *Plan
	Argv     []string
}

// Prepare reads the configuration argv's nginx will use and judges it. It returns nil, nil for a
// command that runs no server (-t, -T, -v, -V, -h, -s): those pass through untouched. build
// runs `nginx -V` and is only called when the command line does not name the file absolutely.
func Prepare(ctx context.Context, argv []string, shim Shim, build func(ctx context.Context, binary string) (Build, error)) (*Prepared, error) {
	cmd, err := ParseCommand(argv)
	if err != nil {
		return nil, err
	}
	if cmd.NoServer != "" {
		return nil, nil
	}
	b := upstreamBuild
	if !filepath.IsAbs(cmd.Conf) {
		if b, err = build(ctx, argv[0]); err != nil {
			return nil, fmt.Errorf("find the configuration file nginx will read: %w", err)
		}
	}
	conf := cmd.ConfFile(b)
	file, err := ReadFile(conf, DefaultLimits)
	if err != nil {
		return nil, fmt.Errorf("read nginx's configuration: %w", err)
	}
	globals, err := ParseString("nginx -g", cmd.Globals)
	if err != nil {
		return nil, err
	}
	plan := Check(append(globals, file...), shim)
	return &Prepared{ConfFile: conf, Plan: plan, Argv: cmd.WithGlobals(strings.Join(plan.Globals, " "))}, nil
}
