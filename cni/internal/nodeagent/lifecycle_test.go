package nodeagent

import (
	"bytes"
	"context"
	"errors"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"

	fsv1 "github.com/kube-fstack/kube-fstack/api/v1alpha1"
	"github.com/kube-fstack/kube-fstack/internal/logging"
	"github.com/kube-fstack/kube-fstack/internal/nodecheck"
	"github.com/kube-fstack/kube-fstack/internal/test/logtest"
)

func nodecheckConfig(t *testing.T) nodecheck.Config { return nodecheck.Config{Root: t.TempDir()} }

// The kubelet replaces its checkpoint by a rename: the inode the agent's mount (here: its open
// file) pins loses its last link. The agent sees that and exits, saying why.
func TestAgentExitsWhenTheCheckpointIsReplaced(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "cpu_manager_state")
	if err := os.WriteFile(path, []byte(`{"policyName":"static"}`), 0o644); err != nil {
		t.Fatal(err)
	}
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if gone, err := unlinked(f); gone || err != nil {
		t.Fatalf("a linked checkpoint reads as replaced: %v %v", gone, err)
	}
	if err := os.WriteFile(path+".tmp", []byte(`{"policyName":"none"}`), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(path+".tmp", path); err != nil { // as the kubelet's checkpoint store does
		t.Fatal(err)
	}
	if gone, err := unlinked(f); !gone || err != nil {
		t.Fatalf("a replaced checkpoint reads as linked: %v %v", gone, err)
	}

	// Run, every millisecond, against a Node the fake API server has: it must end by itself once
	// the checkpoint it opened is replaced, and say why.
	client := fake.NewClientset(&corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n"}})
	log := &syncBuffer{}
	a := &Agent{Client: client, Node: "n", Period: time.Millisecond, Log: agentLog(t, log), Checkpoint: path}
	a.CheckpointMinUptime = 0
	a.Checks.Root = dir
	done := make(chan error, 1)
	go func() { done <- a.Run(context.Background()) }()
	for !strings.Contains(log.String(), "published") {
		time.Sleep(time.Millisecond) // until Run has opened the checkpoint and done a round
	}
	if err := os.WriteFile(path+".tmp", []byte(`{"policyName":"static"}`), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(path+".tmp", path); err != nil {
		t.Fatal(err)
	}
	if err := <-done; !errors.Is(err, ErrCheckpointReplaced) {
		t.Fatalf("Run ended with %v, want ErrCheckpointReplaced", err)
	}
	if !strings.Contains(log.String(), "replaced its CPU manager checkpoint") {
		t.Errorf("no log line says why: %s", log.String())
	}
}

type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// Uninstall removes every node.kubefstack.io/ label and the report, and nothing else.
func TestUnpublish(t *testing.T) {
	node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n",
		Labels: map[string]string{"kubernetes.io/hostname": "n", "kubefstack.io/other": "x",
			fsv1.NodeLabelVhostUser: "ready", fsv1.NodeLabelHugePages("2Mi"): "ready"},
		Annotations: map[string]string{"owner": "ops", fsv1.NodeReportAnnotation: "{}"}}}
	client := fake.NewClientset(node, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "plain", Labels: map[string]string{"team": "x"}}})
	c := &Cleanup{Client: client, Namespace: "kube-fstack", Selector: "app=cni", Poll: time.Millisecond, Log: logging.Discard()}
	if err := c.Run(context.Background()); err != nil {
		t.Fatal(err)
	}
	got, err := client.CoreV1().Nodes().Get(context.Background(), "n", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if want := map[string]string{"kubernetes.io/hostname": "n", "kubefstack.io/other": "x"}; !reflect.DeepEqual(got.Labels, want) {
		t.Errorf("labels %v, want %v", got.Labels, want)
	}
	if want := map[string]string{"owner": "ops"}; !reflect.DeepEqual(got.Annotations, want) {
		t.Errorf("annotations %v, want %v", got.Annotations, want)
	}
	if p := Unpublish(got); p != nil {
		t.Errorf("a clean node gets patch %s", p)
	}
}

// A new pod's agent waits for the installer's first OVS answers before its first round, so it
// does not publish the OVS checks as failed (and drop a label) only because it started first.
func TestFirstRoundWaitsForTheInstaller(t *testing.T) {
	client := fake.NewClientset(&corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n"}})
	var mu sync.Mutex
	calls, readyAtPatch := 0, -1
	client.PrependReactor("patch", "nodes", func(k8stesting.Action) (bool, runtime.Object, error) {
		mu.Lock()
		defer mu.Unlock()
		if readyAtPatch < 0 {
			readyAtPatch = calls
		}
		return false, nil, nil
	})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	log := &syncBuffer{}
	a := &Agent{Client: client, Node: "n", Period: time.Hour, Log: agentLog(t, log), Checks: nodecheckConfig(t),
		FirstRoundWait: time.Hour, FirstRoundAfter: func() bool {
			mu.Lock()
			defer mu.Unlock()
			calls++
			return calls >= 3
		}}
	go func() { _ = a.Run(ctx) }()
	for !strings.Contains(log.String(), "published") {
		time.Sleep(time.Millisecond)
	}
	// The agent's line is the structured log every binary writes, naming its node.
	lines, err := logtest.Parse(log.String(), logging.FormatText, logging.ComponentNodeAgent)
	if err != nil {
		t.Fatalf("%v:\n%s", err, log.String())
	}
	if _, ok := logtest.Find(lines, "published", map[string]string{logging.KeyNode: "n", "report": ""}); !ok {
		t.Errorf("no published line with node and report:\n%s", log.String())
	}
	mu.Lock()
	defer mu.Unlock()
	if readyAtPatch < 3 {
		t.Errorf("the first round published after %d looks for the installer's answers, want it to wait for the 3rd", readyAtPatch)
	}
}

// Before CheckpointMinUptime a replaced checkpoint is logged, once, and the agent runs on: a
// restart at every exclusive-CPU allocation would crash-loop it on a busy node.
func TestAgentRunsOnUntilItsMinUptime(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "cpu_manager_state")
	if err := os.WriteFile(path, []byte(`{"policyName":"static"}`), 0o644); err != nil {
		t.Fatal(err)
	}
	client := fake.NewClientset(&corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n"}})
	log := &syncBuffer{}
	a := &Agent{Client: client, Node: "n", Period: time.Millisecond, Log: agentLog(t, log), Checkpoint: path,
		CheckpointMinUptime: time.Hour, Checks: nodecheckConfig(t)}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- a.Run(ctx) }()
	for !strings.Contains(log.String(), "published") {
		time.Sleep(time.Millisecond)
	}
	if err := os.WriteFile(path+".tmp", []byte(`{"policyName":"static"}`), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(path+".tmp", path); err != nil {
		t.Fatal(err)
	}
	for !strings.Contains(log.String(), "once this agent has run 1h0m0s") {
		time.Sleep(time.Millisecond)
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatalf("Run ended with %v before its minimum uptime, want nil at the context's end", err)
	}
	if n := strings.Count(log.String(), "replaced its CPU manager checkpoint"); n != 1 {
		t.Errorf("the replacement was logged %d times, want once:\n%s", n, log.String())
	}
}

// agentLog is the agent's logger as its command builds it, writing to w.
func agentLog(t *testing.T, w io.Writer) *slog.Logger {
	t.Helper()
	l, err := logging.New(w, logging.ComponentNodeAgent, logging.Options{})
	if err != nil {
		t.Fatal(err)
	}
	return l.With(logging.KeyNode, "n")
}
