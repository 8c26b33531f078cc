package chart

import (
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
)

// installerContainer is the CNI DaemonSet's installer container as rendered with one value set,
// and false when the set renders no CNI DaemonSet (cni.enabled=false).
func installerContainer(t *testing.T, set string) (corev1.Container, bool) {
	t.Helper()
	ds := find(objects(t, render(t, set)), "DaemonSet")
	for _, o := range ds {
		var spec corev1.PodTemplateSpec
		tmpl, _ := o.Object["spec"].(map[string]any)["template"].(map[string]any)
		if err := runtime.DefaultUnstructuredConverter.FromUnstructured(tmpl, &spec); err != nil {
			t.Fatal(err)
		}
		for _, c := range spec.Spec.Containers {
			if c.Name == "installer" {
				return c, true
			}
		}
	}
	return corev1.Container{}, false
}

// cniEntrypoint is the CNI image's entrypoint, from cni/Dockerfile: the program the probes run.
func cniEntrypoint(t *testing.T) string {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(root, "cni", "Dockerfile"))
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`(?m)^ENTRYPOINT \["([^"]+)"\]`).FindSubmatch(data)
	if m == nil {
		t.Fatal("cni/Dockerfile has no ENTRYPOINT [\"...\"]")
	}
	return string(m[1])
}

// The installer's readiness and liveness probes run the image's installer with --check and the
// installer's own arguments, in every value set: a probe missing, running another program, or
// checking other paths than the installer writes fails here.
func TestCNIInstallerProbesCheckWhatTheInstallerWrites(t *testing.T) {
	want, checked := cniEntrypoint(t), 0
	for _, set := range valueSets(t) {
		c, ok := installerContainer(t, set)
		if !ok {
			continue
		}
		checked++
		for name, p := range map[string]*corev1.Probe{"readiness": c.ReadinessProbe, "liveness": c.LivenessProbe} {
			if p == nil || p.Exec == nil {
				t.Errorf("%s: the installer has no exec %s probe", set, name)
				continue
			}
			cmd := append([]string{want, "--check"}, c.Args...)
			if !slices.Equal(p.Exec.Command, cmd) {
				t.Errorf("%s: %s probe runs\n%q\nwant\n%q", set, name, p.Exec.Command, cmd)
			}
		}
		if l := c.LivenessProbe; l != nil && l.PeriodSeconds*l.FailureThreshold < 60 {
			t.Errorf("%s: liveness restarts after %ds of a node not right: the installer needs several of its intervals to put it back", set, l.PeriodSeconds*l.FailureThreshold)
		}
	}
	if checked == 0 {
		t.Fatal("no value set renders the CNI DaemonSet")
	}
}

// The probe's command works: the real installer, given the rendered arguments (host paths moved
// into a temporary directory), fails the check before it installed, passes once it did, and fails
// again when the installed binary is not the image's. A flag the check cannot parse, or a check
// that passes on an empty node, fails here.
func TestCNIInstallerProbePassesOnlyOnAnInstalledNode(t *testing.T) {
	dir := t.TempDir()
	bin := filepath.Join(dir, "fstack-cni-installer")
	build := exec.Command("go", "build", "-o", bin, "./cni/cmd/fstack-cni-installer")
	build.Dir = root
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	image := filepath.Join(dir, "image")
	if err := os.MkdirAll(image, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(image, "fstack-cni"), []byte("#!/bin/true\nthis release"), 0o755); err != nil {
		t.Fatal(err)
	}
	host := filepath.Join(dir, "host")
	for _, d := range []string{"cni-bin", "cni-conf", "kube-fstack-etc"} {
		if err := os.MkdirAll(filepath.Join(host, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	c, ok := installerContainer(t, "cert-manager") // chains the conflist and writes the node config
	if !ok {
		t.Fatal("the cert-manager value set renders no CNI installer")
	}
	move := strings.NewReplacer("/host/", host+"/", "/usr/local/bin/fstack-cni", filepath.Join(image, "fstack-cni"))
	probe := c.ReadinessProbe.Exec.Command
	run := func(args ...string) error {
		moved := make([]string, len(args))
		for i, a := range args {
			moved[i] = move.Replace(a)
		}
		out, err := exec.Command(bin, moved...).CombinedOutput()
		if err != nil {
			t.Logf("%s", out)
		}
		return err
	}
	if err := run(probe[1:]...); err == nil {
		t.Fatal("the probe passed on a node nothing was installed on")
	}
	if err := run(append([]string{"--once"}, c.Args...)...); err != nil {
		t.Fatalf("install --once: %v", err)
	}
	if err := run(probe[1:]...); err != nil {
		t.Fatalf("the probe failed on an installed node: %v", err)
	}
	if err := os.WriteFile(filepath.Join(host, "cni-bin", "fstack-cni"), []byte("#!/bin/true\nan older release"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := run(probe[1:]...); err == nil {
		t.Fatal("the probe passed with another release's fstack-cni installed")
	}
}
