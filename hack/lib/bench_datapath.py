#!/usr/bin/env python3
"""Helpers of hack/bench-datapath.sh (standard library only, so it runs wherever the script does).

  bench_datapath.py cpu-limit < pod.json                  total CPU limit of the pod, millicores
  bench_datapath.py kernel-pod CPU NAME APP < pod.json    the kernel arm's Pod (JSON)
  bench_datapath.py wrk < wrk-output                      "rps p50_ms p99_ms"
  bench_datapath.py summary RESULTS                       the per-arm medians, spreads and ratios
"""
import json
import re
import statistics
import sys

# Labels that bind a pod to a stack or mark it as injected: the kernel arm must have none.
STACK_KEYS = ("kubefstack.io/",)


def milli(v):
    v = str(v)
    if v.endswith("m"):
        return int(v[:-1])
    return int(round(float(v) * 1000))


def sidecars(spec):
    return [c for c in spec.get("initContainers", []) if c.get("restartPolicy") == "Always"]


def cpu_limit(pod):
    spec = pod["spec"]
    return sum(milli(c.get("resources", {}).get("limits", {}).get("cpu", "0"))
               for c in spec.get("containers", []) + sidecars(spec))


# The injected dataplane's name; a pod running F-Stack's own program (spec.program) has no other
# container: its program container was renamed so.
DATAPLANE = "fstack-dataplane"


def kernel_pod(pod, cpu, name, app):
    spec = pod["spec"]
    src = next((c for c in spec["containers"] if c["name"] == app), None)
    if src is None:
        sys.exit(f"the stack pod has no container {app}")
    if app == DATAPLANE:
        sys.exit(f"pod {pod['metadata'].get('name', '?')} runs F-Stack's own program (spec.program): "
                 "its container is F-Stack's, which cannot serve on the kernel, so it cannot be the "
                 "kernel arm's model. Point STACK_SELECTOR at a shim stack (a stock Nginx, which the "
                 "kernel arm copies) and measure F-Stack's program as PROGRAM_SELECTOR beside it")
    # Only what the app reads: its ConfigMaps and Secrets (the injected volumes stay behind).
    vols = {v["name"]: v for v in spec.get("volumes", []) if "configMap" in v or "secret" in v}
    c = {k: src[k] for k in ("name", "image", "imagePullPolicy", "command", "args", "ports", "workingDir") if k in src}
    # The injector runs the app's command through the shim's launcher (fstack-launcher [flags] --
    # COMMAND...): the kernel arm runs the command itself.
    cmd = c.get("command", [])
    if cmd and cmd[0].endswith("/fstack-launcher"):
        if "--" not in cmd:
            sys.exit(f"container {app}: the launcher's command line has no -- before the app's command: {cmd}")
        c["command"] = cmd[cmd.index("--") + 1:]
    # Under the shim the launcher adds `-g "daemon off;"` for Nginx (docs/nginx.md); on the kernel
    # the container would exit as soon as Nginx forks into the background.
    argv = c.get("command", []) + c.get("args", [])
    if argv and argv[0].rsplit("/", 1)[-1] == "nginx" and not any("daemon" in a for a in argv):
        c["args"] = c.get("args", []) + ["-g", "daemon off;"]
    c["volumeMounts"] = [m for m in src.get("volumeMounts", []) if m["name"] in vols]
    limits = {"memory": src.get("resources", {}).get("limits", {}).get("memory", "256Mi")}
    # A stack pod without a CPU limit (the lab's cpuPolicy Shared leaves the app unthrottled)
    # gives the kernel arm none either: a limit of 0 is no limit to the kubelet but an invalid one
    # to the API server.
    if int(cpu) > 0:
        limits["cpu"] = f"{cpu}m"
    c["resources"] = {"requests": {"cpu": "100m", "memory": "64Mi"}, "limits": limits}
    labels = {k: v for k, v in pod["metadata"].get("labels", {}).items()
              if not k.startswith(STACK_KEYS) and k not in ("app", "pod-template-hash")}
    labels["app.kubernetes.io/name"] = name
    return {"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": name, "namespace": pod["metadata"]["namespace"], "labels": labels},
            "spec": {"containers": [c], "volumes": list(vols.values()),
                     "nodeName": spec.get("nodeName"), "terminationGracePeriodSeconds": 5}}


UNITS = {"us": 0.001, "ms": 1.0, "s": 1000.0}


def wrk(text):
    rps = re.search(r"^Requests/sec:\s+([\d.]+)", text, re.M)
    pct = dict(re.findall(r"^\s+(50|99)(?:\.0+)?%\s+([\d.]+(?:us|ms|s))", text, re.M))
    errors = re.search(r"Non-2xx or 3xx responses:\s+(\d+)", text)
    sock = re.search(r"Socket errors: connect (\d+), read (\d+), write (\d+), timeout (\d+)", text)
    if not rps or "50" not in pct or "99" not in pct:
        sys.exit("no Requests/sec or latency distribution in wrk's output (wrk --latency)")
    if errors and int(errors.group(1)) > 0:
        sys.exit(f"{errors.group(1)} responses were not 2xx/3xx")

    def ms(v):
        m = re.match(r"([\d.]+)(us|ms|s)$", v)
        return float(m.group(1)) * UNITS[m.group(2)]
    note = ""
    if sock:
        note = " socket-errors=" + "/".join(sock.groups())
    print(f"{float(rps.group(1)):.0f} {ms(pct['50']):.3f} {ms(pct['99']):.3f}{note}")


# kube-fstack against F-Stack started by hand on the same node (hack/bench-byhand.sh): what the
# product adds, with the goal it is held to (issue 40: >= 0.97x the requests/s, p99 <= 1.1x).
OVERHEAD = (("stack", "byhand-shim"), ("fstack-nginx", "byhand-nginx"))
GOAL_RPS, GOAL_P99 = 0.97, 1.10


def summary(path):
    arms = {}
    for line in open(path):
        f = line.split()
        arms.setdefault(f[0], []).append([float(x) for x in f[1:5]])
    names = ("requests/s", "p50 ms", "p99 ms", "CPUs used")
    med = {}
    width = 26
    print(f"\n{'':{width}}" + "".join(f"{n:>28}" for n in names))
    for arm, rows in arms.items():
        cols = list(zip(*rows))
        med[arm] = [statistics.median(c) for c in cols]
        cells = [f"{statistics.median(c):.2f} [{min(c):.2f}-{max(c):.2f}]" for c in cols]
        print(f"{arm + ' (' + str(len(rows)) + ')':{width}}" + "".join(f"{c:>28}" for c in cells))

    def ratio(a, b):
        r = [x / y if y else float("nan") for x, y in zip(med[a], med[b])]
        print(f"{a + '/' + b:{width}}" + "".join(f"{v:>27.2f}x" for v in r))
        return r

    if "kernel" in med:
        for arm in med:
            if arm != "kernel":
                ratio(arm, "kernel")
    for ours, theirs in OVERHEAD:
        if ours in med and theirs in med:
            r = ratio(ours, theirs)
            met = r[0] >= GOAL_RPS and r[2] <= GOAL_P99
            print(f"{'':{width}}{ours} against F-Stack by hand: {'goal met' if met else 'GOAL NOT MET'} "
                  f"(requests/s {r[0]:.2f}x, want >= {GOAL_RPS}x; p99 {r[2]:.2f}x, want <= {GOAL_P99}x)")
    print("(median [min-max] of the runs; ratios of the medians)")


def served_url(pod):
    """The URL of the first IPv4 address the pod serves (its kubefstack.io/addresses annotation:
    <port>[:<name>]=<address>,...), which the admission webhook gave it from the stack's pool or
    its static address."""
    value = pod.get("metadata", {}).get("annotations", {}).get("kubefstack.io/addresses", "")
    for entry in value.split(","):
        _, _, addr = entry.strip().partition("=")
        if addr.count(".") == 3:
            return f"http://{addr}/"
    name = pod.get("metadata", {}).get("name", "?")
    sys.exit(f"pod {name} serves no IPv4 address (its kubefstack.io/addresses annotation is {value!r}): "
             "set STACK_URL to the address the stack serves")


def main():
    cmd = sys.argv[1]
    if cmd == "cpu-limit":
        print(cpu_limit(json.load(sys.stdin)))
    elif cmd == "kernel-pod":
        json.dump(kernel_pod(json.load(sys.stdin), int(sys.argv[2]), sys.argv[3], sys.argv[4]), sys.stdout)
    elif cmd == "served-url":
        print(served_url(json.load(sys.stdin)))
    elif cmd == "wrk":
        wrk(sys.stdin.read())
    elif cmd == "summary":
        summary(sys.argv[2])
    else:
        sys.exit(f"unknown command {cmd}")


if __name__ == "__main__":
    main()
