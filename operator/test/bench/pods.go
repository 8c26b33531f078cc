package main

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"gomodules.xyz/jsonpatch/v2"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	"github.com/kube-fstack/kube-fstack/internal/manifest"
	"github.com/kube-fstack/kube-fstack/internal/test/fixtures"
)

// warmupRounds are created first and not counted: they warm caches and connections.
const warmupRounds = 20

// arm is one series of the same pod created in one namespace.
type arm struct {
	label, namespace string
	pod              *corev1.Pod
	// webhook is the webhook the API server calls for this arm, if any.
	webhook string
	// injected: the stored pod must carry the dataplane.
	injected bool
	samples  []time.Duration
}

// prefix starts the names of the arm's pods, unique within its namespace.
func (a *arm) prefix() string {
	if a.webhook == "" && a.injected {
		return "pre-bench-"
	}
	return "bench-"
}

// podBench creates the same pod in every arm in turn.
type podBench struct {
	c          client.Client
	arms       []*arm
	op         *operatorProcess
	floor      *floorProcess
	apiMetrics string
	apiClient  *http.Client
	floorHTTP  *http.Client
	// auditLog is the API server's audit log of pod creates, when the bench asked for one.
	auditLog string
}

func newPodBench(ctx context.Context, c client.Client, cfg *rest.Config, root string, op *operatorProcess, wh *envtest.WebhookInstallOptions) (*podBench, error) {
	tmpl, err := fixtures.ReadPod("nginx-vhost")
	if err != nil {
		return nil, err
	}
	// The injector's golden of that pod: what the webhook makes of it.
	pre, err := manifest.PodFile(filepath.Join(root, "internal", "inject", "testdata", "nginx-vhost.yaml.injected"))
	if err != nil {
		return nil, err
	}
	patch, err := podPatch(tmpl, pre)
	if err != nil {
		return nil, err
	}
	floor, err := startFloor(ctx, c, wh, patch)
	if err != nil {
		return nil, err
	}
	apiClient, err := rest.HTTPClientFor(cfg)
	if err != nil {
		floor.stop()
		return nil, err
	}
	return &podBench{c: c, op: op, floor: floor, apiMetrics: strings.TrimSuffix(cfg.Host, "/") + "/metrics", apiClient: apiClient,
		floorHTTP: floorClient(wh.LocalServingCAData),
		arms: []*arm{
			{label: "baseline: no webhook", namespace: "plain", pod: tmpl},
			{label: "injected pod, no webhook", namespace: "plain", pod: pre, injected: true},
			{label: "webhook: the operator", namespace: "injected", pod: tmpl, webhook: "inject.kubefstack.io", injected: true},
			{label: "floor: allow, no patch", namespace: floorNS, pod: tmpl, webhook: floorAllow},
			{label: "floor: fixed patch", namespace: floorPatchNS, pod: tmpl, webhook: floorPatch, injected: true},
		}}, nil
}

func (b *podBench) stop() { b.floor.stop() }

// podPatch is the JSON patch from pod to injected, as the operator computes it.
func podPatch(pod, injected *corev1.Pod) ([]byte, error) {
	from, err := json.Marshal(pod)
	if err != nil {
		return nil, err
	}
	to, err := json.Marshal(injected)
	if err != nil {
		return nil, err
	}
	ops, err := jsonpatch.CreatePatch(from, to)
	if err != nil {
		return nil, err
	}
	return json.Marshal(ops)
}

// run creates n pods in every arm after the warm-up, one arm after another, starting each
// round with the next arm, and prints what it measured.
func (b *podBench) run(ctx context.Context, n int) error {
	var before snapshot
	for round := range n + warmupRounds {
		if round == warmupRounds {
			var err error
			if before, err = b.snapshot(); err != nil {
				return err
			}
		}
		for k := range b.arms {
			a := b.arms[(round+k)%len(b.arms)]
			d, err := b.create(ctx, a, round)
			if err != nil {
				return err
			}
			if round >= warmupRounds {
				a.samples = append(a.samples, d)
			}
		}
	}
	after, err := b.snapshot()
	if err != nil {
		return err
	}
	b.report(n, before, after)
	if b.auditLog != "" {
		return b.reportServerTimes(b.auditLog)
	}
	return nil
}

// cpuTime is the user and system CPU time process pid has used.
func cpuTime(pid int) time.Duration {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0
	}
	// The fields after the command name, which is in parentheses: utime and stime are the
	// 12th and 13th, in clock ticks of 1/100 s.
	_, rest, _ := strings.Cut(string(data), ") ")
	f := strings.Fields(rest)
	if len(f) < 13 {
		return 0
	}
	utime, _ := strconv.Atoi(f[11])
	stime, _ := strconv.Atoi(f[12])
	return time.Duration(utime+stime) * 10 * time.Millisecond
}

func (b *podBench) create(ctx context.Context, a *arm, round int) (time.Duration, error) {
	pod := a.pod.DeepCopy()
	pod.Namespace = a.namespace
	pod.Name = fmt.Sprintf("%s%d", a.prefix(), round)
	start := time.Now()
	if err := b.c.Create(ctx, pod); err != nil {
		return 0, fmt.Errorf("create pod %s/%s (%s): %w", pod.Namespace, pod.Name, a.label, err)
	}
	d := time.Since(start)
	if got := len(pod.Spec.InitContainers) > 0; got != a.injected {
		return 0, fmt.Errorf("pod %s/%s (%s): injected %v, want %v", pod.Namespace, pod.Name, a.label, got, a.injected)
	}
	return d, nil
}

// snapshot is what the API server, the operator and the floor server have counted so far.
type snapshot struct {
	api, op samples
	floor   floorStats
	opCPU   time.Duration
}

func (b *podBench) snapshot() (s snapshot, err error) {
	if s.api, err = scrape(b.apiClient, b.apiMetrics); err != nil {
		return s, fmt.Errorf("the API server's metrics: %w", err)
	}
	if s.op, err = scrape(http.DefaultClient, b.op.metrics); err != nil {
		return s, fmt.Errorf("the operator's metrics: %w", err)
	}
	if s.floor, err = b.floorStats(); err != nil {
		return s, fmt.Errorf("the floor server's stats: %w", err)
	}
	s.opCPU = cpuTime(b.op.cmd.Process.Pid)
	return s, nil
}

// floorStats are the floor server's counts: TLS handshakes (its own /stats calls included),
// webhook calls answered, and the time its handlers took in all.
type floorStats struct {
	handshakes, calls int
	busy              time.Duration
}

func (b *podBench) floorStats() (floorStats, error) {
	var s floorStats
	resp, err := b.floorHTTP.Get(b.floor.stats)
	if err != nil {
		return s, err
	}
	defer func() { _ = resp.Body.Close() }()
	_, err = fmt.Fscanf(resp.Body, "%d %d %d", &s.handshakes, &s.calls, &s.busy)
	return s, err
}
