package cli

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"sync"

	corev1 "k8s.io/api/core/v1"
	typedcorev1 "k8s.io/client-go/kubernetes/typed/core/v1"
)

// podLogReader reads a container's log, as kubectl logs does.
type podLogReader interface {
	readLog(ctx context.Context, namespace, pod string, opts *corev1.PodLogOptions) (io.ReadCloser, error)
}

// coreLogs reads logs through the API server (get on pods/log).
type coreLogs struct{ c typedcorev1.CoreV1Interface }

func (l coreLogs) readLog(ctx context.Context, namespace, pod string, opts *corev1.PodLogOptions) (io.ReadCloser, error) {
	return l.c.Pods(namespace).GetLogs(pod, opts).Stream(ctx)
}

// serverLogFactor times --max-file-size is what the API server is asked to send of a log at
// most: the kubelet cuts a log's tail at limitBytes from its start, so the newest lines are
// kept only if the tail fits; lines this long (a tail of --max-log-lines lines more than
// four files' worth) are rare enough to only say so.
const serverLogFactor = 4

// logJob is one log to collect: a container's current or previous one, or why there is none.
type logJob struct {
	pod       *corev1.Pod
	container string
	previous  bool
	name      string
	// skip says why the log is not asked for (the container never started).
	skip error
}

func (j logJob) what() string {
	w := fmt.Sprintf("pod %s/%s: the log of container %s", j.pod.Namespace, j.pod.Name, j.container)
	if j.previous {
		w += " (the previous one, before its last restart)"
	}
	return w
}

// logResult is what a logJob got.
type logResult struct {
	data      []byte
	truncated string
	err       error
}

// writeLogs writes every container's log of the stacks' pods, then of the operator's:
// statusParallel at a time, each group written in order, so the archive is the same whatever
// answers first and no more than a group's logs are held at once.
func (c *collector) writeLogs(ctx context.Context) {
	var jobs []logJob
	for i := range c.stacks {
		for j := range c.stacks[i].pods {
			p := &c.stacks[i].pods[j]
			jobs = append(jobs, logJobs(p, c.stacks[i].dir+"/"+archivePath("pods", p.Name))...)
		}
	}
	for i := range c.operators {
		for j := range c.operators[i].pods {
			p := &c.operators[i].pods[j]
			jobs = append(jobs, logJobs(p, c.operators[i].dir+"/"+archivePath("pods", p.Name))...)
		}
	}
	for start := 0; start < len(jobs); start += statusParallel {
		group := jobs[start:min(start+statusParallel, len(jobs))]
		results := make([]logResult, len(group))
		var wg sync.WaitGroup
		for i := range group {
			if group[i].skip != nil {
				results[i].err = group[i].skip
				continue
			}
			wg.Go(func() { results[i] = fetchLog(ctx, c.src.logs, group[i], c.limits) })
		}
		wg.Wait()
		for i, r := range results {
			if r.err != nil {
				c.a.fail(group[i].name, group[i].what(), r.err)
			} else {
				c.a.addLog(group[i].name, group[i].what(), r.data, r.truncated)
			}
		}
	}
}

// logJobs are the logs of every container of p, its init containers (the dataplane among them)
// first: the current one, and the previous one when the container restarted.
func logJobs(p *corev1.Pod, dir string) []logJob {
	statuses := map[string]*corev1.ContainerStatus{}
	for _, list := range [][]corev1.ContainerStatus{p.Status.InitContainerStatuses, p.Status.ContainerStatuses} {
		for i := range list {
			statuses[list[i].Name] = &list[i]
		}
	}
	var jobs []logJob
	for _, list := range [][]corev1.Container{p.Spec.InitContainers, p.Spec.Containers} {
		for _, ct := range list {
			st := statuses[ct.Name]
			j := logJob{pod: p, container: ct.Name, name: dir + "/logs/" + archivePath(ct.Name+".log")}
			switch {
			case st == nil:
				j.skip = fmt.Errorf("the container has no status yet (pod %s): it has not started", orDash(string(p.Status.Phase)))
			case st.State.Waiting != nil && st.RestartCount == 0 && st.LastTerminationState.Terminated == nil:
				j.skip = fmt.Errorf("the container has not started (waiting: %s)", orDash(st.State.Waiting.Reason))
			}
			jobs = append(jobs, j)
			if st != nil && st.LastTerminationState.Terminated != nil {
				jobs = append(jobs, logJob{pod: p, container: ct.Name, previous: true, name: dir + "/logs/" + archivePath(ct.Name+".previous.log")})
			}
		}
	}
	return jobs
}

// fetchLog reads a log's last --max-log-lines lines, then keeps its last --max-file-size bytes.
func fetchLog(ctx context.Context, r podLogReader, j logJob, limits BugReportLimits) logResult {
	tail, limit := limits.LogLines+1, limits.FileBytes*serverLogFactor
	rc, err := r.readLog(ctx, j.pod.Namespace, j.pod.Name, &corev1.PodLogOptions{Container: j.container, Previous: j.previous,
		TailLines: &tail, LimitBytes: &limit})
	if err != nil {
		return logResult{err: err}
	}
	defer rc.Close()
	data, err := io.ReadAll(io.LimitReader(rc, limit))
	if err != nil {
		return logResult{err: fmt.Errorf("read the log: %w", err)}
	}
	data, truncated := tailLog(data, limits, int64(len(data)) >= limit)
	return logResult{data: data, truncated: truncated}
}

// tailLog cuts a log asked for with one line more than --max-log-lines to the bounds, and
// says how it was cut. serverCut: the API server sent as much as it was asked to at most.
func tailLog(data []byte, limits BugReportLimits, serverCut bool) ([]byte, string) {
	var notes string
	if serverCut {
		notes = fmt.Sprintf("its last %d lines are more than %s: the API server sent their first %s, so the newest lines are missing",
			limits.LogLines, byteSize(limits.FileBytes*serverLogFactor), byteSize(limits.FileBytes*serverLogFactor))
	}
	lines := int64(bytes.Count(data, []byte("\n")))
	if len(data) > 0 && data[len(data)-1] != '\n' {
		lines++
	}
	if lines > limits.LogLines {
		if i := bytes.IndexByte(data, '\n'); i >= 0 {
			data = data[i+1:]
		}
		notes = joinNotes(notes, fmt.Sprintf("its last %d lines (--max-log-lines)", limits.LogLines))
	}
	if int64(len(data)) > limits.FileBytes {
		data = data[int64(len(data))-limits.FileBytes:]
		// From the first whole line on.
		if i := bytes.IndexByte(data, '\n'); i >= 0 && i < len(data)-1 {
			data = data[i+1:]
		}
		notes = joinNotes(notes, fmt.Sprintf("its last %s (--max-file-size)", byteSize(limits.FileBytes)))
	}
	return data, notes
}
