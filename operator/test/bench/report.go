package main

import (
	"fmt"
	"sort"
	"strings"
	"time"
)

// What the pod bench prints: per arm the client's latency against the baseline, and where the
// time goes according to the API server, the operator and the floor server.

func (b *podBench) report(n int, before, after snapshot) {
	base := stats(b.arms[0].samples)
	fmt.Printf("pod create through the API server: the same pod, %d per arm, arms interleaved (order rotated every round), %d warm-up rounds not counted\n", n, warmupRounds)
	fmt.Printf("  %-26s %8s %8s %8s %9s %9s   %s\n", "arm", "p50 ms", "p99 ms", "mean ms", "p50/base", "p99/base", "webhook call, API server's mean ms (calls)")
	byLabel := map[string]summary{}
	for _, a := range b.arms {
		s := stats(a.samples)
		byLabel[a.label] = s
		call := ""
		if a.webhook != "" {
			mean, calls := after.api.meanSince(before.api, "apiserver_admission_webhook_admission_duration_seconds",
				`name="`+a.webhook+`"`, `type="admit"`, `operation="CREATE"`)
			call = fmt.Sprintf("%.2f (%d)", mean*1000, calls)
		}
		fmt.Printf("  %-26s %8.2f %8.2f %8.2f %8.2fx %8.2fx   %s\n", a.label, ms(s.p50), ms(s.p99), ms(s.mean),
			ratio(s.p50, base.p50), ratio(s.p99, base.p99), call)
	}
	ours, floor := byLabel[b.arms[2].label], byLabel[b.arms[4].label]
	fmt.Printf("  ratio webhook/baseline   p50 %5.2fx  p99 %5.2fx   (goal <= 1.1x)\n", ratio(ours.p50, base.p50), ratio(ours.p99, base.p99))
	fmt.Printf("  ratio webhook/floor      p50 %5.2fx  p99 %5.2fx   (the operator against the least a webhook returning the same patch can cost)\n",
		ratio(ours.p50, floor.p50), ratio(ours.p99, floor.p99))
	b.reportAdmission(n, before, after)
	handler, calls := after.op.meanSince(before.op, "controller_runtime_webhook_latency_seconds", `webhook="/inject-v1-pod"`)
	fl := after.floor
	floorCalls := fl.calls - before.floor.calls
	fmt.Printf("  handler, body read to response written: operator %.2f ms mean over %d calls, floor server %.2f ms over %d\n",
		handler*1000, calls, ms(fl.busy-before.floor.busy)/float64(max(1, floorCalls)), floorCalls)
	fmt.Printf("  TLS handshakes during the run: operator %.0f, floor server %d (connections reused); operator's since start: %s\n",
		after.op.sum("kubefstack_webhook_tls_handshakes_total")-before.op.sum("kubefstack_webhook_tls_handshakes_total"),
		fl.handshakes-before.floor.handshakes, handshakesByProtocol(after.op))
	fmt.Printf("  operator's CPU per pod created, all arms (it watches every pod with the stack label): %.2f ms\n",
		ms(after.opCPU-before.opCPU)/float64(n*len(b.arms)))
}

// reportAdmission splits the API server's mutating admission per round (one create in every
// arm): the MutatingAdmissionWebhook plugin's time against the webhook calls within it (each
// call's own time includes applying its patch), and the whole mutating admission step.
func (b *podBench) reportAdmission(n int, before, after snapshot) {
	delta := func(metric string, labels ...string) float64 {
		return (after.api.sum(metric+"_sum", labels...) - before.api.sum(metric+"_sum", labels...)) * 1000 / float64(n)
	}
	plugin := delta("apiserver_admission_controller_admission_duration_seconds", `name="MutatingAdmissionWebhook"`, `type="admit"`, `operation="CREATE"`)
	calls, webhooks := 0.0, 0
	for _, a := range b.arms {
		if a.webhook != "" {
			webhooks++
			calls += delta("apiserver_admission_webhook_admission_duration_seconds", `name="`+a.webhook+`"`, `type="admit"`, `operation="CREATE"`)
		}
	}
	admit := delta("apiserver_admission_step_admission_duration_seconds", `type="admit"`, `operation="CREATE"`)
	validate := delta("apiserver_admission_step_admission_duration_seconds", `type="validate"`, `operation="CREATE"`)
	served := delta("apiserver_request_duration_seconds", `verb="POST"`, `resource="pods"`)
	client := time.Duration(0)
	for _, a := range b.arms {
		client += stats(a.samples).mean
	}
	fmt.Printf("  per round of %d creates: client %.2f ms; API server %.2f ms, of which mutating admission %.2f (the webhook plugin %.2f, its %d webhook calls %.2f) and validating admission %.2f\n",
		len(b.arms), ms(client), served, admit, plugin, webhooks, calls, validate)
}

func handshakesByProtocol(op samples) string {
	var parts []string
	for series, v := range op {
		if rest, ok := strings.CutPrefix(series, "kubefstack_webhook_tls_handshakes_total{"); ok {
			parts = append(parts, fmt.Sprintf("%s %.0f", strings.TrimSuffix(rest, "}"), v))
		}
	}
	sort.Strings(parts)
	return strings.Join(parts, ", ")
}

type summary struct{ p50, p99, mean time.Duration }

func stats(d []time.Duration) summary {
	if len(d) == 0 {
		return summary{}
	}
	sort.Slice(d, func(i, j int) bool { return d[i] < d[j] })
	at := func(q float64) time.Duration { return d[min(len(d)-1, int(q*float64(len(d))))] }
	var total time.Duration
	for _, x := range d {
		total += x
	}
	return summary{at(0.50), at(0.99), total / time.Duration(len(d))}
}

func ratio(a, b time.Duration) float64 { return float64(a) / float64(b) }

func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }
