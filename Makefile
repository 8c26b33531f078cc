# kube-fstack: every developer entry point. `make help` lists them.
SHELL := /usr/bin/env bash -o pipefail
.SHELLFLAGS := -ec
.DEFAULT_GOAL := help

# Tools are pinned and installed into ./bin from the Go module proxy.
LOCALBIN ?= $(CURDIR)/bin
CONTROLLER_GEN_VERSION ?= v0.20.1
GOLANGCI_LINT_VERSION ?= v2.15.0
HELM_VERSION ?= v3.22.0
# make release: cosign signs every artifact and image, syft writes the SBOMs.
COSIGN_VERSION ?= v2.6.5
SYFT_VERSION ?= v1.57.1
# make test-release: a real OCI registry on loopback that the release is pushed to and verified in.
REGISTRY_SERVER_VERSION ?= v3.1.2
CONTROLLER_GEN ?= $(LOCALBIN)/controller-gen-$(CONTROLLER_GEN_VERSION)
GOLANGCI_LINT ?= $(LOCALBIN)/golangci-lint-$(GOLANGCI_LINT_VERSION)
HELM ?= $(LOCALBIN)/helm-$(HELM_VERSION)
COSIGN ?= $(LOCALBIN)/cosign-$(COSIGN_VERSION)
SYFT ?= $(LOCALBIN)/syft-$(SYFT_VERSION)
REGISTRY_SERVER ?= $(LOCALBIN)/registry-$(REGISTRY_SERVER_VERSION)

GO ?= go
GOTEST_FLAGS ?= -count=1
FUZZTIME ?= 60s
# make run's dataplane image: standin (DPDK testpmd in F-Stack's place) or real (dataplane-image/Dockerfile).
DATAPLANE ?= standin
# NODES > 1: make run on the multi-node kind cluster (hack/kind/run.sh) instead of one node.
NODES ?= 1
FUZZTIME_SHORT ?= 10s
# The CNI plugin's own packages need no root either; test-node runs them again with the node tier.
PKGS_UNIT := ./api/... ./internal/... ./kubectl-fstack/internal/cli/... ./kubectl-fstack/cmd/... ./operator/internal/... ./dataplane-image/internal/... ./dataplane-image/cmd/... ./dataplane-image/build/... ./dataplane-image/probe-agent/... ./dataplane-image/standin/... ./cni/internal/... ./e2e/deviceplugin/... ./test/hack/... ./test/docs/... ./hack/tools/...

##@ General
.PHONY: help
help: ## Show every entry point.
	@awk 'BEGIN {FS = ":.*##"; printf "Usage: make <target>\nNew here? The developer guide, docs/developer/README.md: the map of the tree, the test tiers, recipes for changing a contract.\n"} /^[a-zA-Z0-9_.-]+:.*?##/ { printf "  \033[36m%-18s\033[0m %s\n", $$1, $$2 } /^##@/ { printf "\n\033[1m%s\033[0m\n", substr($$0, 5) }' $(MAKEFILE_LIST)

##@ Run
.PHONY: run
run: ## The main job: a local cluster, the chart, a sample StackInstance and an injected Nginx (root); DATAPLANE=real for F-Stack itself; NODES=3 on a multi-node kind cluster.
	DATAPLANE=$(DATAPLANE) NODES=$(NODES) hack/run.sh

.PHONY: render-samples
render-samples: build ## Render every sample StackInstance to config.ini and EAL argv, and inject the sample workload offline.
	hack/render-samples.sh

##@ Build
.PHONY: install-plugin
install-plugin: ## Install kubectl-fstack into GOBIN, so `kubectl fstack` finds it on PATH (and kubectl_complete-fstack, its shell completion).
	$(GO) install ./kubectl-fstack/cmd/kubectl-fstack
	@bin="$$($(GO) env GOBIN)"; bin="$${bin:-$$($(GO) env GOPATH)/bin}"; ln -sfn kubectl-fstack "$$bin/kubectl_complete-fstack"

.PHONY: build
build: ## Build every binary into ./bin.
	$(GO) build -o $(LOCALBIN)/ ./kubectl-fstack/cmd/kubectl-fstack ./operator/cmd/... ./dataplane-image/cmd/fstack-supervisor
	CGO_ENABLED=0 $(GO) build -o $(LOCALBIN)/ ./dataplane-image/cmd/fstack-launcher ./cni/cmd/...

##@ Generate and verify
.PHONY: generate
generate: $(CONTROLLER_GEN) $(HELM) ## Regenerate deepcopy, CRDs, RBAC, the chart's copies of them, the generated references and goldens.
	$(CONTROLLER_GEN) object:headerFile=hack/boilerplate.go.txt paths=./api/...
	$(CONTROLLER_GEN) crd:maxDescLen=400 paths=./api/... output:crd:artifacts:config=config/crd/bases
	$(CONTROLLER_GEN) rbac:roleName=kube-fstack-operator paths=./operator/... output:rbac:artifacts:config=config/rbac
	$(GO) run ./hack/tools/docgen crd-ref config/crd/bases/kubefstack.io_stackinstances.yaml docs/reference/stackinstance.md
	$(GO) run ./hack/tools/docgen chart-values charts/kube-fstack/values.schema.json charts/kube-fstack/values.yaml charts/kube-fstack/README.md
	$(GO) run ./hack/tools/docgen pod-contract docs/reference/pod-contract.md
	UPDATE_GOLDEN=1 $(GO) test ./internal/render/... ./internal/inject/... ./kubectl-fstack/internal/cli/... -run 'Golden' $(GOTEST_FLAGS) >/dev/null
	hack/chart-generated.sh
	UPDATE_GOLDEN=1 HELM=$(HELM) $(GO) test ./test/chart -run 'Golden' $(GOTEST_FLAGS) >/dev/null

.PHONY: verify
verify: generate ## Regenerate everything and fail if anything drifted from what is committed.
	@if [ -n "$$(git status --porcelain -- . ':!bin')" ]; then \
		echo "Generated files drifted from the commit; run 'make generate' and commit:"; \
		git status --porcelain -- . ':!bin'; git --no-pager diff --stat; exit 1; fi
	@echo "verify: generated files are up to date"

##@ Test
.PHONY: test
test: lint test-unit test-fuzz test-envtest test-chart test-release test-node test-dataplane e2e test-multinode ## Every test tier (what CI runs).

.PHONY: test-unit
test-unit: ## Unit, golden, property and fuzz-seed tests of the pure packages and the CLI.
	$(GO) test $(GOTEST_FLAGS) $(PKGS_UNIT)

.PHONY: envtest-assets
envtest-assets: ## Build kube-apiserver from source and find etcd for envtest (cached in .cache/envtest).
	@hack/envtest-assets.sh

.PHONY: test-envtest
test-envtest: ## The operator and the kubectl plugin against a real kube-apiserver and etcd: CRD schema/CEL, webhooks, controller, CLI; the admission policies docs/verifying-releases.md gives, against Kyverno's and the policy-controller's CRDs.
	KUBEBUILDER_ASSETS="$$(hack/envtest-assets.sh)" $(GO) test $(GOTEST_FLAGS) -timeout 10m ./operator/test/envtest/... ./kubectl-fstack/test/... ./test/policies/...

.PHONY: test-chart
test-chart: $(HELM) ## The Helm chart: helm lint --strict, goldens, values schema, RBAC/webhooks vs config/, every object accepted by a real kube-apiserver.
	KUBEBUILDER_ASSETS="$$(hack/envtest-assets.sh)" HELM=$(HELM) $(GO) test $(GOTEST_FLAGS) -timeout 10m ./test/chart/...

.PHONY: test-release
test-release: $(HELM) $(COSIGN) $(SYFT) $(REGISTRY_SERVER) ## make release pushed to a real registry on loopback (root, buildah): the CNI image for amd64+arm64, the chart by digest, the plugin archives, SBOMs, checksums, signatures and SBOM attestations with a throwaway key, verified there and in the files; tampered or unsigned images refused.
	HELM=$(HELM) COSIGN=$(COSIGN) SYFT=$(SYFT) REGISTRY_SERVER=$(REGISTRY_SERVER) $(GO) test $(GOTEST_FLAGS) -timeout 30m ./test/release/...

.PHONY: test-node
test-node: ## CNI plugin against real OVS-DPDK, DPDK testpmd, hugepages and netns (root; hack/install-deps.sh).
	$(GO) test $(GOTEST_FLAGS) -p 1 -timeout 15m ./cni/...

.PHONY: test-dataplane
test-dataplane: ## The dataplane supervisor driving real DPDK (testpmd, proc-info) behind a private OVS-DPDK (root).
	$(GO) test $(GOTEST_FLAGS) -p 1 -timeout 10m ./dataplane-image/test/...

.PHONY: bench-dataplane
bench-dataplane: ## Stand-in dataplane: time from container start to ready (1 and 2 processes) and supervisor RSS (root).
	hack/bench-dataplane.sh

.PHONY: bench-operator
bench-operator: ## Injection per pod, pod create with/without the webhook and with a do-nothing one (the floor), 1000 StackInstances to Valid and peak RSS.
	hack/bench-operator.sh

.PHONY: bench-cni
bench-cni: ## CNI ADD+DEL latency vs the bridge plugin and ovs-vsctl, and a 1000-cycle fault run (prints ratios).
	hack/bench-cni.sh

.PHONY: bench-render
bench-render: ## Render, StackInstance admission, inject.Prepare and the supervisor's spec-to-config vs BASE (default the merge base with main), interleaved (prints ratios).
	hack/bench-render.sh

.PHONY: bench-supervisor-size
bench-supervisor-size: ## fstack-supervisor's size as built (CRD walker) vs linking kube-apiserver's validation, with and without CEL (prints ratios; BENCH_SIZE_BASE=<rev> adds a revision).
	hack/bench-supervisor-size.sh

.PHONY: fuzz
fuzz: ## Run every fuzz target of the repo (discovered) for FUZZTIME each (default 60s); prints each one's exec count.
	GO=$(GO) FUZZTIME=$(FUZZTIME) hack/fuzz.sh

.PHONY: test-fuzz
test-fuzz: ## Every fuzz target for FUZZTIME_SHORT each (default 10s), so CI covers each one (part of test).
	GO=$(GO) FUZZTIME=$(FUZZTIME_SHORT) hack/fuzz.sh

.PHONY: bench
bench: ## Benchmarks of the pure packages.
	$(GO) test ./internal/... -run '^$$' -bench . -benchmem

.PHONY: stats
stats: ## Size figures for an architecture review: product and test Go lines, the longest functions (hack/tools/codestats).
	$(GO) run ./hack/tools/codestats -top 10

##@ Release
.PHONY: release
release: $(HELM) $(COSIGN) $(SYFT) ## The release VERSION=v0.1.0 COSIGN_KEY=cosign.key (root): operator+CNI images (amd64, arm64), dataplane (amd64; needs F-Stack's source), the chart by digest, plugin archives, SBOMs, checksums, signatures, verified; pushed only with REGISTRY=oci://HOST/PATH.
	@test -n "$(VERSION)" -a -n "$(COSIGN_KEY)" || { echo "usage: make release VERSION=v0.1.0 COSIGN_KEY=<cosign private key; password in COSIGN_PASSWORD> [IMAGE_REPO=<registry>/<path>] [REGISTRY=oci://<registry>/<path>] [RELEASE_IMAGES='operator cni dataplane'] [IMAGE_PLATFORMS='linux/amd64 linux/arm64'] [RELEASE_URL=<where the plugin archives are downloaded from>]"; exit 2; }
	HELM=$(HELM) COSIGN=$(COSIGN) SYFT=$(SYFT) COSIGN_KEY="$(COSIGN_KEY)" IMAGE_REPO="$(IMAGE_REPO)" REGISTRY="$(REGISTRY)" RELEASE_IMAGES="$(RELEASE_IMAGES)" IMAGE_PLATFORMS="$(IMAGE_PLATFORMS)" RELEASE_URL="$(RELEASE_URL)" hack/release.sh all "$(VERSION)"

.PHONY: release-verify
release-verify: $(COSIGN) ## Verify a release's checksums and signatures again: VERSION=v0.1.0 COSIGN_KEY=cosign.key [OUT=_output/release/VERSION] [REGISTRY=oci://HOST/PATH: and its images' signatures and SBOM attestations and the chart's signature there] [IMAGE_REPO=<a mirror of the images>].
	@test -n "$(VERSION)" -a -n "$(COSIGN_KEY)" || { echo "usage: make release-verify VERSION=v0.1.0 COSIGN_KEY=cosign.key [REGISTRY=oci://<registry>/<path>] [IMAGE_REPO=<registry>/<path>]"; exit 2; }
	COSIGN=$(COSIGN) COSIGN_KEY="$(COSIGN_KEY)" OUT="$(OUT)" REGISTRY="$(REGISTRY)" IMAGE_REPO="$(IMAGE_REPO)" hack/release.sh verify "$(VERSION)"

.PHONY: krew-release
krew-release: ## The kubectl plugin's release archives alone (linux, darwin x amd64, arm64; with LICENSE and notices) and its krew manifest with URLs and sums: VERSION=v0.1.0 RELEASE_URL=https://.../download/v0.1.0.
	@test -n "$(VERSION)" -a -n "$(RELEASE_URL)" || { echo "usage: make krew-release VERSION=v0.1.0 RELEASE_URL=<where the archives will be downloaded from>"; exit 2; }
	GO=$(GO) hack/krew-release.sh "$(VERSION)" "$(RELEASE_URL)"

##@ Images
.PHONY: image-operator
image-operator: ## Build the operator image from ./Dockerfile with buildah (no daemon, no registry, no network; root), as an OCI archive.
	hack/image-operator.sh

.PHONY: image-cni
image-cni: ## Build the CNI installer image from cni/Dockerfile with buildah (no daemon, no registry, no network; root), as an OCI archive.
	hack/image-cni.sh

.PHONY: image-dataplane
image-dataplane: ## Build the real dataplane image from dataplane-image/Dockerfile with buildah, cached (root; F-Stack's source must be reachable; ~30 min first).
	hack/image-dataplane.sh

.PHONY: image-fstack-nginx
image-fstack-nginx: ## Build F-Stack's Nginx image (the dataplane image + F-Stack's Nginx 1.28, HTTP/3 unless NGINX_HTTP3=off; root, cached).
	IMAGE_TARGET=fstack-nginx hack/image-dataplane.sh

.PHONY: image-fstack-examples
image-fstack-examples: ## Build the image of F-Stack's example programs (helloworld) as native programs (root, cached).
	IMAGE_TARGET=fstack-examples hack/image-dataplane.sh

.PHONY: image-dataplane-standin
image-dataplane-standin: ## Build the stand-in dataplane image (Debian DPDK + supervisor), packed with buildah as an OCI archive, no daemon (root).
	hack/image-dataplane-standin.sh

##@ Cluster
.PHONY: cluster-up
cluster-up: ## A real single-node cluster on this machine (root; hack/install-deps.sh --cluster first).
	hack/cluster/up.sh

.PHONY: cluster-down
cluster-down: ## Remove every process, mount, rule, bridge, OVS port and cgroup cluster-up created.
	hack/cluster/down.sh

.PHONY: cluster-status
cluster-status: ## Component PIDs, node Ready, allocatable CPU and hugepages.
	hack/cluster/status.sh

.PHONY: cluster-install
cluster-install: $(HELM) ## Install or upgrade the chart from this tree into the running local cluster.
	hack/cluster/install.sh

.PHONY: cluster-smoke
cluster-smoke: ## Up, a Guaranteed hugepages pod with fstack-cni chained, down, nothing left, warm up, down.
	hack/cluster/smoke.sh

.PHONY: e2e
e2e: $(HELM) ## End-to-end suite on the local cluster through the installed chart (root; brings the cluster up and down if not up).
	hack/e2e.sh

.PHONY: test-multinode
test-multinode: $(HELM) ## The multi-node tier: a kind cluster (control plane + 2 workers, each its own OVS-DPDK, podman provider, node image built here), spread, Services from every node, drain, DaemonSet upgrade, lost worker (root; brings the cluster up and down if not up).
	hack/e2e-multinode.sh

.PHONY: multinode-down
multinode-down: ## Delete the multi-node kind cluster and undo what hack/kind/up.sh changed on the host (root).
	hack/kind/down.sh

.PHONY: e2e-kind
e2e-kind: ## The same suite on a kind cluster with Multus (needs internet, Docker, host OVS-DPDK: see docs/developer/README.md).
	hack/e2e-kind.sh

.PHONY: bench-cluster
bench-cluster: $(HELM) ## Pod create -> Ready on the local cluster, injected, not injected and two native-sidecar floors, in one run (prints ratios).
	hack/bench-cluster.sh

.PHONY: bench-datapath
bench-datapath: ## HTTP load (wrk) at a stack's Nginx through F-Stack, the same Nginx on the kernel, and optionally F-Stack's own Nginx (PROGRAM_SELECTOR) and F-Stack started by hand (BYHAND=shim,nginx), interleaved: req/s, p50/p99, CPU, ratios (docs/benchmarks.md).
	hack/bench-datapath.sh

##@ Lint
.PHONY: lint
lint: $(GOLANGCI_LINT) ## gofmt, go vet (the kubectl plugin for macOS too), golangci-lint, shellcheck of every shell script, and every docs/ citation resolving.
	@test -z "$$(gofmt -l $$(git ls-files '*.go'))" || { echo "gofmt needed:"; gofmt -l $$(git ls-files '*.go'); exit 1; }
	$(GO) vet ./...
	GOOS=darwin GOARCH=arm64 $(GO) vet ./kubectl-fstack/cmd/kubectl-fstack/
	$(GOLANGCI_LINT) run ./...
	hack/shellcheck.sh
	hack/check-doc-refs.sh

##@ Tools
.PHONY: tools
tools: $(CONTROLLER_GEN) $(GOLANGCI_LINT) $(HELM) $(COSIGN) $(SYFT) $(REGISTRY_SERVER) ## Install the pinned tools into ./bin.

.PHONY: tools-run
tools-run: $(HELM) ## Install the one pinned tool `make run` uses (helm) into ./bin.

$(CONTROLLER_GEN):
	GOBIN=$(LOCALBIN) $(GO) install sigs.k8s.io/controller-tools/cmd/controller-gen@$(CONTROLLER_GEN_VERSION)
	mv $(LOCALBIN)/controller-gen $@

$(GOLANGCI_LINT):
	GOBIN=$(LOCALBIN) $(GO) install github.com/golangci/golangci-lint/v2/cmd/golangci-lint@$(GOLANGCI_LINT_VERSION)
	mv $(LOCALBIN)/golangci-lint $@

$(HELM):
	GOBIN=$(LOCALBIN) $(GO) install helm.sh/helm/v3/cmd/helm@$(HELM_VERSION)
	mv $(LOCALBIN)/helm $@

$(COSIGN):
	GOBIN=$(LOCALBIN) $(GO) install github.com/sigstore/cosign/v2/cmd/cosign@$(COSIGN_VERSION)
	mv $(LOCALBIN)/cosign $@

$(SYFT):
	GOBIN=$(LOCALBIN) $(GO) install github.com/anchore/syft/cmd/syft@$(SYFT_VERSION)
	mv $(LOCALBIN)/syft $@

$(REGISTRY_SERVER):
	GOBIN=$(LOCALBIN) $(GO) install github.com/distribution/distribution/v3/cmd/registry@$(REGISTRY_SERVER_VERSION)
	mv $(LOCALBIN)/registry $@
