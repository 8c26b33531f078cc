package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"sigs.k8s.io/controller-runtime/pkg/envtest"
)

// auditPolicy records pod creates at Metadata level, with their receive and completion times.
const auditPolicy = `apiVersion: audit.k8s.io/v1
kind: Policy
omitStages: [RequestReceived, ResponseStarted]
rules:
- level: Metadata
  verbs: [create]
  resources: [{group: "", resources: [pods]}]
- level: None
`

// enableAudit makes the API server write an audit log of pod creates (asynchronously, in
// batches, so the request path only takes the timestamps) and returns its path.
func enableAudit(env *envtest.Environment) (string, error) {
	dir, err := os.MkdirTemp("", "fstack-bench-audit-")
	if err != nil {
		return "", err
	}
	policy := filepath.Join(dir, "policy.yaml")
	if err := os.WriteFile(policy, []byte(auditPolicy), 0o600); err != nil {
		return "", err
	}
	log := filepath.Join(dir, "audit.log")
	env.ControlPlane.GetAPIServer().Configure().
		Set("audit-policy-file", policy).Set("audit-log-path", log).Set("audit-log-mode", "batch")
	return log, nil
}

// auditEvent is what the bench reads of an audit event.
type auditEvent struct {
	Stage     string `json:"stage"`
	ObjectRef struct {
		Namespace string `json:"namespace"`
		Name      string `json:"name"`
	} `json:"objectRef"`
	Received time.Time `json:"requestReceivedTimestamp"`
	Complete time.Time `json:"stageTimestamp"`
}

// serverTimes reads the API server's own time for each measured create of the bench's pods
// (received to response complete), by arm.
func (b *podBench) serverTimes(path string) (map[*arm][]time.Duration, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer func() { _ = f.Close() }()
	byKey := map[string]*arm{}
	for _, a := range b.arms {
		byKey[a.namespace+"/"+a.prefix()] = a
	}
	out := map[*arm][]time.Duration{}
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		var e auditEvent
		if err := json.Unmarshal(sc.Bytes(), &e); err != nil || e.Stage != "ResponseComplete" {
			continue
		}
		name := e.ObjectRef.Name
		i := strings.LastIndexByte(name, '-')
		if i < 0 {
			continue
		}
		round, err := strconv.Atoi(name[i+1:])
		a := byKey[e.ObjectRef.Namespace+"/"+name[:i+1]]
		if err != nil || a == nil || round < warmupRounds {
			continue
		}
		out[a] = append(out[a], e.Complete.Sub(e.Received))
	}
	return out, sc.Err()
}

// reportServerTimes prints each arm's API-server time beside the client's.
func (b *podBench) reportServerTimes(path string) error {
	time.Sleep(2 * time.Second) // the log is written in batches
	times, err := b.serverTimes(path)
	if err != nil {
		return fmt.Errorf("read the audit log: %w", err)
	}
	base := stats(times[b.arms[0]])
	fmt.Printf("  API server's own time per create (audit: received to response complete)\n")
	for _, a := range b.arms {
		s := stats(times[a])
		fmt.Printf("  %-26s %8.2f %8.2f %8.2f %8.2fx %8.2fx   (%d creates)\n", a.label, ms(s.p50), ms(s.p99), ms(s.mean),
			ratio(s.p50, base.p50), ratio(s.p99, base.p99), len(times[a]))
	}
	return nil
}
