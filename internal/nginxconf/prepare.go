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
	// PidFile is where the master writes its pid, which `nginx -s reload` signals: the pid
	// directive, else the compiled-in path; empty when nginx -V could not say.
	PidFile string
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
	built := false
	if !filepath.IsAbs(cmd.Conf) {
		if b, err = build(ctx, argv[0]); err != nil {
			return nil, fmt.Errorf("find the configuration file nginx will read: %w", err)
		}
		built = true
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
	main := make([]*Directive, 0, len(globals)+len(file))
	main = append(append(main, globals...), file...)
	plan := Check(main, shim)
	p := &Prepared{ConfFile: conf, Plan: plan, Argv: cmd.WithGlobals(strings.Join(plan.Globals, " "))}
	p.PidFile = pidFile(ctx, cmd, main, b, built, argv[0], build)
	return p, nil
}

// pidFile is the pid directive of the main context (nginx keeps the first), else the build's
// pid path, learnt from nginx -V when it has not been asked yet; "" when it cannot say.
func pidFile(ctx context.Context, cmd *Command, main []*Directive, b Build, built bool, bin string, build func(context.Context, string) (Build, error)) string {
	for _, d := range main {
		if d.Name == "pid" && len(d.Args) == 1 {
			if d.Args[0] == "off" {
				return ""
			}
			return cmd.prefixed(b, d.Args[0])
		}
	}
	if !built {
		var err error
		if b, err = build(ctx, bin); err != nil {
			return ""
		}
	}
	if b.PidPath == "" {
		b.PidPath = upstreamBuild.PidPath
	}
	return cmd.prefixed(b, b.PidPath)
}
