package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"
	utilexec "k8s.io/client-go/util/exec"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	fsv1 "github.com/kube-fstack/kube-fstack/api/v1alpha1"
	"github.com/kube-fstack/kube-fstack/internal/podcontract"
	"github.com/kube-fstack/kube-fstack/internal/test/fixtures"
)

// recordingExecutor stands in for pods/exec (it needs a kubelet: the e2e suite runs the tools for
// real); it records each command and answers with err.
type recordingExecutor struct {
	runs [][]string
	err  error
}

func (r *recordingExecutor) exec(_ context.Context, _ *corev1.Pod, container string, command []string, stdout, _ io.Writer) error {
	if container != podcontract.DataplaneContainer {
		return errors.New("not the dataplane container: " + container)
	}
	r.runs = append(r.runs, command)
	_, _ = io.WriteString(stdout, "out\n")
	return r.err
}

func toolPod(t *testing.T, processes int32, phase corev1.PodPhase) *corev1.Pod {
	t.Helper()
	p := fixtures.SnapshotPod(t, "web-0", nil, nil)
	raw, err := json.Marshal(fsv1.StackInstanceSpec{Processes: processes})
	if err != nil {
		t.Fatal(err)
	}
	p.Annotations[podcontract.SpecAnnotation] = string(raw)
	p.Status.Phase = phase
	return &p
}

func toolByName(name string) toolCommand {
	for _, tc := range toolCommands {
		if tc.name == name {
			return tc
		}
	}
	panic(name)
}

func TestToolCommandsRunEachProcess(t *testing.T) {
	for _, tc := range []struct {
		tool string
		opts toolOptions
		want [][]string
	}{
		{"netstat", toolOptions{process: -1}, [][]string{{"ff_netstat", "-t", "0", "-an"}, {"ff_netstat", "-t", "1", "-an"}, {"ff_netstat", "-t", "2", "-an"}}},
		{"netstat", toolOptions{process: 1, extra: []string{"-s", "-p", "tcp"}}, [][]string{{"ff_netstat", "-t", "1", "-s", "-p", "tcp"}}},
		{"traffic", toolOptions{process: -1, interval: 1}, [][]string{{"ff_traffic", "-p", "0", "-s"}, {"ff_traffic", "-p", "1", "-s"}, {"ff_traffic", "-p", "2", "-s"}}},
		{"traffic", toolOptions{process: 2, interval: 2, count: 5}, [][]string{{"ff_traffic", "-p", "2", "-d", "2", "-n", "5"}}},
		{"top", toolOptions{process: -1, interval: 1, count: 3}, [][]string{{"ff_top", "-p", "0", "-P", "2", "-d", "1", "-n", "3"}}},
	} {
		c := fake.NewClientBuilder().WithObjects(toolPod(t, 3, corev1.PodRunning)).Build()
		ex := &recordingExecutor{}
		var out bytes.Buffer
		opts := tc.opts // netstat's have no interval, as its flags give none
		if err := runTool(context.Background(), c, ex, toolByName(tc.tool), &opts, "web", "web-0", &out, io.Discard); err != nil {
			t.Fatalf("%s %+v: %v", tc.tool, tc.opts, err)
		}
		if !slices.EqualFunc(ex.runs, tc.want, slices.Equal[[]string]) {
			t.Errorf("%s %+v ran %q, want %q", tc.tool, tc.opts, ex.runs, tc.want)
		}
		if len(tc.want) > 1 && !strings.Contains(out.String(), "# process 1\n") {
			t.Errorf("%s of several processes does not say which is which:\n%s", tc.tool, out.String())
		}
	}
}

func TestToolCommandsRefuseWhatCannotRun(t *testing.T) {
	nt, tt := toolByName("netstat"), toolByName("traffic")
	for _, tc := range []struct {
		name string
		pod  *corev1.Pod
		opts toolOptions
		err  error
		want string
	}{
		{"process beyond the pod's", toolPod(t, 2, corev1.PodRunning), toolOptions{process: 2, interval: 1}, nil, "--process 2: pod web/web-0 runs 2 F-Stack process(es), 0 to 1"},
		{"not running", toolPod(t, 1, corev1.PodPending), toolOptions{process: -1, interval: 1}, nil, "is Pending"},
		{"bad interval", toolPod(t, 1, corev1.PodRunning), toolOptions{process: -1}, nil, "--interval 0"},
		{"no exec rights", toolPod(t, 1, corev1.PodRunning), toolOptions{process: -1, interval: 1},
			apierrors.NewForbidden(schema.GroupResource{Resource: "pods/exec"}, "web-0", errors.New("no")), "needs create on pods/exec in web"},
		{"tool failed", toolPod(t, 1, corev1.PodRunning), toolOptions{process: -1, interval: 1},
			utilexec.CodeExitError{Err: errors.New("exit"), Code: 255}, "exited with status 255"},
	} {
		c := fake.NewClientBuilder().WithObjects(tc.pod).Build()
		cmd := nt
		if tc.name == "bad interval" {
			cmd = tt
		}
		err := runTool(context.Background(), c, &recordingExecutor{err: tc.err}, cmd, &tc.opts, "web", "web-0", io.Discard, io.Discard)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v, want an error saying %q", tc.name, err, tc.want)
		}
		if tc.name == "tool failed" && exitCode(err) != 255 {
			t.Errorf("a tool's exit status 255 gave the command %d", exitCode(err))
		}
	}
	plain := fixtures.SnapshotPod(t, "plain", nil, nil)
	delete(plain.Annotations, podcontract.SpecAnnotation)
	c := fake.NewClientBuilder().WithObjects(&plain).Build()
	if err := runTool(context.Background(), c, &recordingExecutor{}, nt, &toolOptions{process: -1, interval: 1}, "web", "plain", io.Discard, io.Discard); err == nil || !strings.Contains(err.Error(), "runs no F-Stack dataplane") {
		t.Errorf("a pod without a dataplane: %v", err)
	}
}

func TestToolCommandsTakeToolArgumentsOnlyWhereTheyMayHaveThem(t *testing.T) {
	var out, errb bytes.Buffer
	if rc := Run([]string{"top", "web-0", "--", "-x"}, &out, &errb); rc == 0 || !strings.Contains(errb.String(), "top takes no tool arguments after --") {
		t.Errorf("top with -- args: exit %d, %q", rc, errb.String())
	}
}
