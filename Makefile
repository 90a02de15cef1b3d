# provider-egressproxy. Self-contained: everything the targets need is built
# from the Go module proxy (hack/tools.sh) or installed from Debian
# (hack/deps.sh), and cached, so only the first run pays.

GO        ?= go
VERSION   ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo v0.0.0-dev)
GOOS      ?= $(shell $(GO) env GOOS)
GOARCH    ?= $(shell $(GO) env GOARCH)
OUTPUT    := _output
LDFLAGS   := -s -w -X github.com/egressproxy/provider-egressproxy/internal/version.Version=$(VERSION)
TEST_TIMEOUT ?= 40m
# A count, not a duration: a duration races Go's fuzz coordinator at its
# deadline and fails with "context deadline exceeded" without an input
# (golang/go#75804, fixed in Go 1.27; seen here on go1.26.8 under load).
# 20000 runs take ~8 s on 2 cores.
FUZZTIME  ?= 20000x
# Every binary of this tree is static; go test too, so that its compile and
# the tests' package builds (hack/xpkg.sh, CGO_ENABLED=0) share Go's build
# cache instead of compiling the provider's dependencies twice.
export CGO_ENABLED ?= 0
# The real components the tests run against.
TOOLS     := etcd kube-apiserver kubectl kube-controller-manager kube-scheduler kube-proxy kubelet kwok coredns crossplane crossplane-core

.PHONY: all generate check-generate build vet fmt-check tidy-check deps tools \
        test unit-test e2e fuzz xpkg reviewable dev run clean help guest-image

all: build

help: ## Show the targets.
	@grep -E '^[a-z0-9-]+:.*##' $(MAKEFILE_LIST) | awk -F':.*## ' '{printf "  %-16s %s\n", $$1, $$2}'

generate: ## Regenerate deepcopy, managed methods and CRDs.
	$(GO) generate -tags generate .

check-generate: ## Fail if generated files are stale.
	hack/check-generate.sh

build: ## Build the provider, the composition function and the GCE fake.
	CGO_ENABLED=0 $(GO) build -trimpath -ldflags "$(LDFLAGS)" -o bin/$(GOOS)_$(GOARCH)/provider ./cmd/provider
	CGO_ENABLED=0 $(GO) build -trimpath -ldflags "$(LDFLAGS)" -o bin/$(GOOS)_$(GOARCH)/function ./cmd/function
	CGO_ENABLED=0 $(GO) build -trimpath -ldflags "$(LDFLAGS)" -o bin/$(GOOS)_$(GOARCH)/gcp-fake ./cmd/gcp-fake

vet: ## go vet every package.
	$(GO) vet ./...

fmt-check: ## Fail if gofmt would change a file.
	@out=$$(gofmt -l $$(git ls-files '*.go' 2>/dev/null || find . -name '*.go' -not -path './_output/*')); \
	if [ -n "$$out" ]; then echo "gofmt would change:"; echo "$$out"; exit 1; fi

tidy-check: ## Fail if go.mod or go.sum are not tidy.
	$(GO) mod tidy -diff

deps: ## Install the Debian packages the tests run for real (squid, cloud-init, libvirt, QEMU).
	hack/deps.sh

tools: ## Build the real test components into the tool cache (first run only).
	hack/tools.sh build $(TOOLS)

unit-test: ## Run the Go tests, with whatever components are installed.
	$(GO) test -timeout $(TEST_TIMEOUT) ./...

e2e: ## Run only the end-to-end suite on a local Crossplane, with phase timings.
	$(GO) test -v -timeout 40m ./test/e2e/

fuzz: ## Fuzz the squid renderer for a short, bounded time.
	$(GO) test -run='^$$' -fuzz=FuzzRender -fuzztime=$(FUZZTIME) ./internal/squid/

# make bench [N=1000] [BACKENDS=kubernetes,gcp] [BENCH_ARGS="-poll 20s"] [PEER=0]: see docs/bench.md.
# N=0 measures only the proxy overhead. PEER=0 leaves out the side-by-side
# against provider-kubernetes and its build (~2.5 min on 2 cores, first run
# only).
N        ?= 200
# BACKENDS empty: every backend of internal/backend/registry.
BACKENDS ?=
PEER     ?= 1
PEER_FLAG = -peer=$(if $(filter 1,$(PEER)),true,false)
.PHONY: bench bench-smoke
bench: deps tools ## Measure the provider at N MRs per backend against a raw-client baseline and provider-kubernetes (docs/bench.md).
	$(if $(filter 1,$(PEER)),$(if $(filter-out 0,$(N)),hack/tools.sh build provider-kubernetes))
	$(GO) run ./hack/bench -n $(N) $(if $(BACKENDS),-backends $(BACKENDS)) $(PEER_FLAG) $(BENCH_ARGS)

# Without the peer: its build would add minutes to a cold CI for figures
# that mean nothing at N=5.
bench-smoke: ## Run the bench at N=5 only to prove it works; its figures mean nothing.
	$(GO) run ./hack/bench -n 5 -poll 20s -peer=false -overhead-for 500ms $(if $(BACKENDS),-backends $(BACKENDS))

guest-image: deps ## Build the KVM guest image (Debian, cloud-init, squid) into the cache (first run only).
	hack/guest-image.sh

.PHONY: squid-image
squid-image: deps ## Build the real node's squid and pause images (Debian's squid, no registry) into the cache (first run only).
	hack/squid-image.sh

.PHONY: coredns-image
coredns-image: tools ## Build the test cluster's CoreDNS image (CoreDNS from source on an empty base) into the cache (first run only).
	hack/coredns-image.sh

# make xpkg REGISTRY=host:port/egressproxy VERSION=v0.1.0 [REGISTRY_CA=ca.crt]
# also points the Configuration's dependsOn at REGISTRY and pushes the three.
xpkg: ## Build the Provider, Function and Configuration packages (no Docker); push them with REGISTRY=.
	VERSION=$(VERSION) REGISTRY=$(REGISTRY) REGISTRY_CA=$(REGISTRY_CA) hack/xpkg.sh

# The tests build the packages (hack/xpkg.sh) in three packages at once; on
# a cold Go build cache each compiled the provider on its own, under the
# load of the other tests, for more than the 8 minutes a build may take.
# With the tests' environment (cluster.HarnessEnv: this host's
# architecture, no -trimpath) and CGO_ENABLED=0, the compile is also the one
# go test needs for the same packages.
.PHONY: xpkg-binaries
xpkg-binaries: ## Build only the binaries the packages embed, into Go's build cache for the tests' package builds.
	ARCHES=$(GOARCH) XPKG_TRIMPATH=0 OUTPUT_DIR=$(OUTPUT) hack/xpkg.sh binaries

# prepare runs its parts two at a time: on a first run the images build from
# the Debian mirror (mostly waiting on downloads) while the tools compile.
.PHONY: prepare
prepare: ## Install and build what the tests need (first run only; later runs find it cached).
	$(MAKE) -j2 deps tools guest-image squid-image coredns-image check-generate xpkg-binaries

# The package builds (hack/xpkg.sh) run inside go test, in test/render.
# The kill -9 suite runs on its own, verbose, so its counts are printed.
test: prepare ## Install what the tests need, then run every test against the real components.
	$(GO) test -timeout $(TEST_TIMEOUT) $$($(GO) list ./... | grep -v /test/crash)
	@mkdir -p $(OUTPUT)
	@$(GO) test -count=1 -v -timeout 15m ./test/crash/ >$(OUTPUT)/crash.log 2>&1 || { tail -n 150 $(OUTPUT)/crash.log; exit 1; }
	@grep -E '^(crash:|--- |ok)' $(OUTPUT)/crash.log
	$(MAKE) bench-smoke
	$(MAKE) fuzz
	@echo "make test: all tests passed"

reviewable: generate fmt-check vet tidy-check ## What to run before a commit.

run: dev
dev: guest-image ## Run the product locally: a control plane with the provider and example resources.
	hack/dev.sh

clean: ## Remove build output.
	rm -rf bin $(OUTPUT)
