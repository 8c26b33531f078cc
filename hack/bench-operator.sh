#!/usr/bin/env bash
# Operator benchmarks with real components (kube-apiserver from source, etcd, the operator as its
# own process): the pure injection (go test -bench), pod create through the API server with the
# webhook vs without it and vs the floor any webhook costs (a do-nothing webhook server), and 1000
# StackInstances to Valid with the operator's peak RSS. Arguments go to the bench: -pods N,
# -http1 (HTTP/1.1 to the webhooks, as to a service reference), -audit (the API server's own time
# per create, from an audit log), -operator-env GOMAXPROCS=1,...
set -euo pipefail
cd "$(dirname "$0")/.."
export PATH="/usr/local/go/bin:$PATH"
assets="$(hack/envtest-assets.sh)"
mkdir -p bin
go build -o bin/ ./operator/cmd/fstack-operator
echo "== inject one pod (pure function; 'prepared' is the webhook's per-pod path)"
go test ./internal/inject -run '^$' -bench BenchmarkInject -benchmem -count 1 | grep -E '^Benchmark'
echo
KUBEBUILDER_ASSETS="$assets" go run ./operator/test/bench -root . -operator bin/fstack-operator "$@"
