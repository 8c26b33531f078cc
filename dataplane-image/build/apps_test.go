package build_test

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// The application targets (F-Stack's Nginx and examples, build-apps.sh) against the stand-in
// tree: testdata/fstack/app/nginx-1.28.0/configure and example/Makefile say what they stand for.

func appsRecipe(t *testing.T) *recipe {
	t.Helper()
	r := newRecipe(t)
	r.mustRun("patch", "lib")
	apps := *r
	apps.script = abs(t, "build-apps.sh")
	return &apps
}

func TestNginxIsBuiltWithTheFStackModuleAndHTTP3ByDefault(t *testing.T) {
	r := appsRecipe(t)
	r.mustRun("nginx")
	bin := filepath.Join(r.out, "nginx-root/usr/local/nginx_fstack/sbin/nginx")
	mustContain(t, "F-Stack's Nginx configure arguments", r.read(bin),
		"--prefix=/usr/local/nginx_fstack", "--with-ff_module", "--with-http_ssl_module", "--with-http_v2_module", "--with-http_v3_module")
	if _, err := os.Stat(filepath.Join(r.out, "nginx-root/usr/local/nginx_fstack/conf/nginx.conf")); err != nil {
		t.Errorf("nginx's install left no conf/nginx.conf under the prefix: %v", err)
	}

	off := appsRecipe(t).with("NGINX_HTTP3=off")
	off.mustRun("nginx")
	got := off.read(filepath.Join(off.out, "nginx-root/usr/local/nginx_fstack/sbin/nginx"))
	if strings.Contains(got, "http_v3") || strings.Contains(got, "http_ssl") {
		t.Errorf("NGINX_HTTP3=off still builds TLS or HTTP/3: %s", got)
	}
	mustContain(t, "NGINX_HTTP3=off configure arguments", got, "--with-ff_module")

	bad := appsRecipe(t).with("NGINX_HTTP3=yes")
	mustContain(t, "NGINX_HTTP3=yes", bad.mustFail("nginx"), "NGINX_HTTP3=yes: want on", "or off")
}

func TestAppsNeedTheLibfstackOfTheirStage(t *testing.T) {
	r := newRecipe(t)
	apps := *r
	apps.script = abs(t, "build-apps.sh")
	for _, step := range []string{"nginx", "examples"} {
		mustContain(t, "build-apps.sh "+step+" before lib", apps.mustFail(step), "libfstack.a is missing: run build-fstack.sh lib first")
	}
	mustContain(t, "an unknown step", apps.mustFail("redis"), "unknown step 'redis'")
}

func TestExamplesAreInstalled(t *testing.T) {
	r := appsRecipe(t)
	r.mustRun("examples")
	for _, e := range []string{"helloworld", "helloworld_epoll"} {
		fi, err := os.Stat(filepath.Join(r.out, "examples", e))
		if err != nil || fi.Mode()&0o111 == 0 {
			t.Errorf("examples: %s not installed executable (%v)", e, err)
		}
	}
}

// The apps stage runs every step of its script, strips what they produce, and each application
// target copies it and checks its libraries; the dataplane is a named target, and the script that
// builds images names it (the last stage is an application target).
func TestApplicationTargetsCopyWhatTheirStepsProduce(t *testing.T) {
	stages := parseDockerfile(t)
	apps := stageNamed(t, stages, "apps")
	runs := strings.Join(apps.all("RUN"), "\n")
	for _, step := range []string{"nginx", "examples"} {
		if !slices.ContainsFunc(apps.all("RUN"), func(r string) bool { return strings.HasSuffix(r, "/src/build-apps.sh "+step) }) {
			t.Errorf("the apps stage does not run build-apps.sh %s: %q", step, apps.all("RUN"))
		}
	}
	if !strings.Contains(runs, "package.sh strip /out/nginx-root /out/examples") {
		t.Errorf("the apps stage does not strip what it built: %q", apps.all("RUN"))
	}
	for target, want := range map[string]struct{ src, checked string }{
		"fstack-nginx":    {"/out/nginx-root/", "/usr/local/nginx_fstack"},
		"fstack-examples": {"/out/examples/", "/usr/local/bin/f-stack-examples"},
	} {
		s := stageNamed(t, stages, target)
		if from := s.instr[0].args; from != "dataplane AS "+target {
			t.Errorf("target %s: FROM %s, want FROM dataplane (the supervisor and F-Stack's tools come with it)", target, from)
		}
		if !slices.ContainsFunc(s.all("COPY"), func(c string) bool { return strings.HasPrefix(c, "--from=apps "+want.src+" ") }) {
			t.Errorf("target %s does not copy %s from the apps stage: %q", target, want.src, s.all("COPY"))
		}
		if !strings.Contains(strings.Join(s.all("RUN"), "\n"), "build-fstack.sh check-libs "+want.checked) {
			t.Errorf("target %s does not check the libraries of %s: %q", target, want.checked, s.all("RUN"))
		}
	}
	script := readFile(t, "../../hack/image-dataplane.sh")
	if !strings.Contains(script, `--target "$TARGET"`) || !strings.Contains(script, "TARGET=${IMAGE_TARGET:-dataplane}") {
		t.Errorf("hack/image-dataplane.sh does not name the Dockerfile's target (dataplane by default): a plain build makes the last stage, %s", stages[len(stages)-1].name)
	}
}

func readFile(t *testing.T, p string) string {
	t.Helper()
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}
