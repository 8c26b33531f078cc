package envtest

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"regexp"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/kube-fstack/kube-fstack/internal/inject"
	"github.com/kube-fstack/kube-fstack/internal/podcontract"
	"github.com/kube-fstack/kube-fstack/internal/test/testenv"
	"github.com/kube-fstack/kube-fstack/kubectl-fstack/internal/cli"
)

// `kubectl fstack status` and `doctor` read each running pod's /status through kube-apiserver's
// pod proxy (pods/NAME:9180/proxy/status). The supervisor cannot run here (no kubelet, no
// F-Stack), so an HTTP server with the supervisor's /status stands in for it on this machine's
// own address at port 9180, and the pod's status names that address as the pod's IP: the API
// server proxies to it as it would to a pod (it refuses loopback addresses, hence not 127.0.0.1).
// As the supervisor, it answers /status and /config only to the pod's status token, which the
// CLI takes from the pod and sends in a header the API server's proxy passes on (it removes
// Authorization). A user without get on pods/proxy sees the containers' counts and one warning
// saying why.
func TestCLIReadsSupervisorThroughPodProxy(t *testing.T) {
	ctx := context.Background()
	ip := hostAddress(t)
	killed := time.Now().UTC().Add(-time.Minute).Truncate(time.Second)
	down := killed.Add(30 * time.Second)
	answer := podcontract.DataplaneStatus{Generation: 3, Ready: false,
		Reason: "port 0 (attachment net1): link down for 12s: the vhost-user peer (OVS) went away; reconnecting",
		Restarts: podcontract.InPlaceRestarts{
			Dataplane: podcontract.RestartCount{Total: 2, Last: &podcontract.RestartRecord{Reason: "process_exit", Message: "F-Stack process 0 (primary) exited: signal: killed", Time: killed}},
			Apps:      map[string]podcontract.RestartCount{"nginx": {Total: 1, Last: &podcontract.RestartRecord{Reason: "exited", Message: "nginx exited", Time: killed}}}},
		Ports: []podcontract.PortStatus{{Port: 0, Attachment: "net1", DownSince: &down}}}
	l, err := net.Listen("tcp", net.JoinHostPort(ip, fmt.Sprint(podcontract.SupervisorPort)))
	if err != nil {
		t.Fatalf("the stand-in supervisor listens where the API server's pod proxy dials, %s:%d: %v (another process holds the port)", ip, podcontract.SupervisorPort, err)
	}
	var token atomic.Value // the pod's, once it is made
	token.Store("")
	private := func(h http.HandlerFunc) http.HandlerFunc {
		return func(w http.ResponseWriter, r *http.Request) {
			if !podcontract.StatusTokenMatches(token.Load().(string), r.Header.Get(podcontract.StatusTokenHeader)) {
				http.Error(w, r.URL.Path+" is "+podcontract.StatusTokenRefusal, http.StatusForbidden)
				return
			}
			h(w, r)
		}
	}
	mux := http.NewServeMux()
	mux.HandleFunc("GET "+podcontract.StatusPath, private(func(w http.ResponseWriter, _ *http.Request) { _ = json.NewEncoder(w).Encode(answer) }))
	running := podcontract.RunningConfig{Generation: 3, ConfigINI: "[dpdk]\nlcore_mask=4\n\n[port0]\naddr=10.99.0.10\n", ShimMode: "pipeline",
		EAL: [][]string{{"f-stack", "-c4", "-n4", "--proc-type=primary"}, {"f-stack", "-c8", "-n4", "--proc-type=secondary"}}}
	mux.HandleFunc("GET "+podcontract.ConfigPath, private(func(w http.ResponseWriter, _ *http.Request) { _ = json.NewEncoder(w).Encode(running) }))
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second}
	go func() { _ = srv.Serve(l) }()
	t.Cleanup(func() { _ = srv.Close() })

	si := stack(t, "vhost-user", "proxied")
	testenv.CreateIfAbsent(t, k8s, si)
	pod := statusPod(t, "proxied-a", si.Name, "node-a", corev1.ContainerState{Running: &corev1.ContainerStateRunning{StartedAt: metav1.NewTime(killed.Add(-time.Hour))}}, false, 1)
	cur := &corev1.Pod{}
	if err := k8s.Get(ctx, client.ObjectKeyFromObject(pod), cur); err != nil {
		t.Fatal(err)
	}
	if token.Store(inject.StatusToken(cur)); token.Load() == "" {
		t.Fatal("the injected pod has no status token")
	}
	cur.Status.PodIP, cur.Status.PodIPs = ip, []corev1.PodIP{{IP: ip}}
	if err := k8s.Status().Update(ctx, cur); err != nil {
		t.Fatal(err)
	}
	writeStackStatus(t, optedInNS, si.Name, cur.Annotations[podcontract.ConfigHashAnnotation], 0, 1)

	kubeconfig := writeKubeconfig(t)
	out := runCLI(t, "status", "--kubeconfig", kubeconfig, si.Name)
	t.Logf("kubectl fstack status:\n%s", out)
	row := regexp.MustCompile(`\nproxied +0/1 +proxied-a +node-a +10\.99\.0\.10 +\w+ +current +Running, not ready: port 0 \(attachment net1\): link down for 12s: the vhost-user peer \(OVS\) went away; reconnecting +3 \(2 in place\) +1 \(1 in place\)\n`)
	if !row.MatchString(out) {
		t.Errorf("status does not match %s", row)
	}
	var list cli.StackStatusList
	if err := json.Unmarshal([]byte(runCLI(t, "status", "--kubeconfig", kubeconfig, "-o", "json", si.Name)), &list); err != nil {
		t.Fatal(err)
	}
	if d := list.Items[0].Pods[0].Dataplane; d.InPlaceRestarts == nil || *d.InPlaceRestarts != 2 || d.LastRestart == nil ||
		d.LastRestart.Message != "F-Stack process 0 (primary) exited: signal: killed" || len(d.Ports) != 1 || d.Ports[0].LinkUp {
		t.Errorf("status -o json dataplane %+v", d)
	}

	// config shows what the pod runs, from the supervisor's /config, with the served addresses.
	out = runCLI(t, "config", "--kubeconfig", kubeconfig, "proxied-a")
	t.Logf("kubectl fstack config:\n%s", out)
	for _, want := range []string{"Pod web/proxied-a (stack proxied), generation 3\n", "Shim: pipeline\n", "Addresses: 10.99.0.10 (port 0)\n",
		"EAL proc 1: f-stack -c8 -n4 --proc-type=secondary\n", "config.ini:\n  [dpdk]\n  lcore_mask=4\n\n  [port0]\n"} {
		if !strings.Contains(out, want) {
			t.Errorf("config lacks %q", want)
		}
	}
	var pc cli.PodConfig
	if err := json.Unmarshal([]byte(runCLI(t, "config", "--kubeconfig", kubeconfig, "-o", "json", "proxied-a")), &pc); err != nil {
		t.Fatal(err)
	}
	if pc.Running.ConfigINI != running.ConfigINI || len(pc.Running.EAL) != 2 || pc.Stack != si.Name || len(pc.Addresses) != 1 {
		t.Errorf("config -o json: %+v", pc)
	}

	// doctor fails on the pod, with the supervisor's reason.
	var stdout, stderr bytes.Buffer
	code := cli.Run([]string{"doctor", "--kubeconfig", kubeconfig, "-n", optedInNS}, &stdout, &stderr)
	t.Logf("kubectl fstack doctor:\n%s%s", stdout.String(), stderr.String())
	if code != 1 || !strings.Contains(stderr.String(), "error: pod web/proxied-a on node node-a: not ready: port 0 (attachment net1): link down for 12s") ||
		!regexp.MustCompile(`FAIL +web/proxied-a +node-a +not ready: port 0`).MatchString(stdout.String()) {
		t.Errorf("doctor exit %d", code)
	}

	// A user who may read pods and StackInstances but not pods/proxy.
	user := "status-reader"
	role := &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Namespace: optedInNS, Name: user}, Rules: []rbacv1.PolicyRule{
		{APIGroups: []string{""}, Resources: []string{"pods"}, Verbs: []string{"get", "list"}},
		{APIGroups: []string{"kubefstack.io"}, Resources: []string{"stackinstances"}, Verbs: []string{"get", "list"}}}}
	binding := &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Namespace: optedInNS, Name: user},
		RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: user},
		Subjects: []rbacv1.Subject{{Kind: rbacv1.UserKind, APIGroup: rbacv1.GroupName, Name: user}}}
	for _, o := range []client.Object{role, binding} {
		if err := k8s.Create(ctx, o); err != nil {
			t.Fatal(err)
		}
	}
	testenv.Eventually(t, 20*time.Second, func() error {
		stdout.Reset()
		stderr.Reset()
		if code := cli.Run([]string{"status", "--kubeconfig", kubeconfig, "--as", user, si.Name}, &stdout, &stderr); code != 0 {
			return fmt.Errorf("exit %d: %s", code, stderr.String()) // RBAC caches take a moment
		}
		return nil
	})
	if !regexp.MustCompile(`\nproxied +0/1 +proxied-a +node-a +10\.99\.0\.10 +\w+ +current +Running, not ready +1 +0\n`).MatchString(stdout.String()) ||
		strings.Count(stderr.String(), "warning:") != 1 ||
		!strings.Contains(stderr.String(), "warning: in-place restarts and the dataplane's health not shown for pod web/proxied-a: pods/proxy forbidden: HTTP 403") {
		t.Errorf("without pods/proxy:\n%s%s", stdout.String(), stderr.String())
	}
	// config says which right it needs.
	stderr.Reset()
	if code := cli.Run([]string{"config", "--kubeconfig", kubeconfig, "--as", user, "proxied-a"}, &bytes.Buffer{}, &stderr); code != 1 ||
		!strings.Contains(stderr.String(), "needs get on pods/proxy in web") {
		t.Errorf("config without pods/proxy: exit %d: %s", code, stderr.String())
	}
	if err := k8s.Delete(ctx, pod); err != nil {
		t.Fatal(err)
	}
}

// hostAddress is an address of this machine the API server's pod proxy accepts as a pod IP: a
// global unicast IPv4 address (not loopback or link-local).
func hostAddress(t *testing.T) string {
	t.Helper()
	addrs, err := net.InterfaceAddrs()
	if err != nil {
		t.Fatal(err)
	}
	for _, a := range addrs {
		if n, ok := a.(*net.IPNet); ok && n.IP.To4() != nil && n.IP.IsGlobalUnicast() {
			return n.IP.String()
		}
	}
	t.Fatalf("this machine has no global unicast IPv4 address (of %v) for the stand-in supervisor: the API server's pod proxy refuses loopback", addrs)
	return ""
}
