# sfclab: set-up, demo and tests on a Debian 12 machine (run as root).
#   make setup   install Debian packages, the virtualenv, the native tools and the container
#                images (a no-op when done)
#   make images  build the container images the demo and tests use (sfclab image build: each
#                only when its recipe's tag is not in podman's store)
#   make demo    set-up, then the main job (scripts/demo.sh)
#   make screenshots  after `make demo`: docs/web-*.png from the demo's results and a lab of
#                the demo, in headless chromium (scripts/screenshots.sh)
#   make test    set-up, then the whole test suite (scripts/test.sh: the tests not marked serial on
#                several workers, then the serial ones alone; SFCLAB_TEST_WORKERS=N)
#   make bench   set-up, then the benchmarks in bench/
#   make kube    the Kubernetes tests' API server and one-Node cluster (build/kube/: kube-apiserver;
#                kube-node: kubelet, kube-controller-manager, kube-scheduler), etcd and containerd
#                (part of setup)
.DELETE_ON_ERROR:
SHELL := /bin/bash

VENV      ?= .venv
PYTHON    ?= /usr/bin/python3
BIN       := $(VENV)/bin
STAMP     := $(VENV)/.stamp
DEB_STAMP := build/.debs
PYTEST_ARGS ?=

DEBS := iproute2 iperf3 openvswitch-switch ethtool nftables iptables \
        libndpi-dev libndpi-bin libnetfilter-queue-dev libnfnetlink-dev libmnl-dev iputils-ping \
        netsniff-ng openssl gcc make libc6-dev python3-venv procps \
        clang llvm libbpf-dev bpftool linux-libc-dev nodejs chromium conntrack openssh-server \
        podman runc mmdebstrap util-linux
#: the images `make setup` builds (images/<name>/); the demo and the tests use them
IMAGES := base haproxy frr squid

# --- Kubernetes (issue #29): etcd and containerd from Debian, kube-apiserver and kube-node ----
# (kubelet, kube-controller-manager and kube-scheduler in one binary) from the Go module proxy.
# The version is the one kube/apiserver/go.mod pins (kube/node/go.mod pins the same); each binary
# is built once per version (a clean clone reuses the Go caches of this machine's root: modules,
# build cache).
DEBS += etcd-server containerd
GO            ?= /usr/local/go/bin/go
KUBE_VERSION  := $(shell sed -n 's/^[[:space:]]*\(require \)\{0,1\}k8s.io\/kubernetes \(v[^ ]*\)$$/\2/p' kube/apiserver/go.mod)
KUBE_APISERVER := build/kube/kube-apiserver-$(KUBE_VERSION)
KUBE_GOENV    := GOTOOLCHAIN=local GOFLAGS="-mod=readonly -buildvcs=false" GOPROXY=https://proxy.golang.org \
                 GOPATH=$(HOME)/go GOMODCACHE=$(HOME)/go/pkg/mod GOCACHE=$(HOME)/.cache/go-build
# the one-Node cluster of the DaemonSet test (tests/integration/kube_node.py)
KUBE_NODE     := build/kube/kube-node-$(KUBE_VERSION)
.PHONY: kube
# the build is skipped when the pinned version's binary exists; the link (remade each time, so
# it follows a version bump) names the one the tests start
kube: $(DEB_STAMP) $(KUBE_APISERVER) $(KUBE_NODE)
	@ln -sfn $(notdir $(KUBE_APISERVER)) build/kube/kube-apiserver
	@for n in kube-node kubelet kube-controller-manager kube-scheduler; do \
	  ln -sfn $(notdir $(KUBE_NODE)) build/kube/$$n; done

# A built binary is also kept in this machine's cache under the digest of the module's files
# (go.mod, go.sum, main.go): a clean clone of the same sources copies it instead of linking it
# again from the Go caches (40 s here); any change to those files builds afresh.
KUBE_CACHE    ?= $(HOME)/.cache/sfclab/kube
KUBE_DIGEST   := $(shell cat kube/apiserver/go.mod kube/apiserver/go.sum kube/apiserver/main.go 2>/dev/null | sha256sum | cut -c1-16)
KUBE_CACHED   := $(KUBE_CACHE)/kube-apiserver-$(KUBE_VERSION)-$(KUBE_DIGEST)
KUBE_NODE_DIGEST := $(shell cat kube/node/go.mod kube/node/go.sum kube/node/main.go 2>/dev/null | sha256sum | cut -c1-16)
KUBE_NODE_CACHED := $(KUBE_CACHE)/kube-node-$(KUBE_VERSION)-$(KUBE_NODE_DIGEST)

# kube_build(module folder, binary, cached copy, how long once): the binary from the cache, or
# built and then cached
define kube_build
	@mkdir -p build/kube
	@if [ -x $(3) ]; then cp $(3) $(2).tmp; else \
	  echo "setup: building $(notdir $(2)) from the Go module proxy ($(4) once)"; \
	  (cd $(1) && $(KUBE_GOENV) $(GO) build -trimpath -o $(CURDIR)/$(2).tmp \
	    -ldflags='-s -w -X k8s.io/component-base/version.gitVersion=$(KUBE_VERSION)' .) && \
	  mkdir -p $(KUBE_CACHE) && cp $(2).tmp $(3).tmp && mv $(3).tmp $(3); fi
	@mv $(2).tmp $(2)
endef

$(KUBE_APISERVER):
	$(call kube_build,kube/apiserver,$@,$(KUBE_CACHED),about 4 minutes)

$(KUBE_NODE):
	$(call kube_build,kube/node,$@,$(KUBE_NODE_CACHED),about 3 more minutes)
# ---------------------------------------------------------------------------------------------

.PHONY: setup demo screenshots test unit integration bench native images clean
setup: $(DEB_STAMP) $(STAMP) native /usr/local/bin/sfclab node_modules/.package-lock.json images kube

$(DEB_STAMP): Makefile
	@mkdir -p build
	@missing=$$(for p in $(DEBS); do dpkg-query -W -f='$${Status}\n' $$p 2>/dev/null | grep -q '^install ok installed' || echo $$p; done); \
	if [ -n "$$missing" ]; then \
	  echo "setup: installing Debian packages:" $$missing; \
	  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends $$missing >/dev/null; \
	fi
	@touch $@

$(STAMP): pyproject.toml $(DEB_STAMP)
	@test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	@# --no-compile: the packages' bytecode is written as each module is first imported (only
	@# what runs, once), not all of it at install time (14 s of a clean clone's set-up here)
	@$(BIN)/pip install -q --disable-pip-version-check --no-compile -e '.[test]'
	@touch $@

/usr/local/bin/sfclab: $(STAMP)
	@ln -sf $(CURDIR)/$(BIN)/sfclab $@

# the web view's JavaScript libraries (pinned in package-lock.json), from npm; Debian's npm
# only where no npm came with nodejs (NodeSource's nodejs ships its own and conflicts with it)
node_modules/.package-lock.json: package.json package-lock.json $(DEB_STAMP)
	@command -v npm >/dev/null || DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends npm >/dev/null
	@npm ci --no-audit --no-fund --loglevel=error >/dev/null

native: $(DEB_STAMP)
	@$(MAKE) -s -C native

# cached: one `podman image exists` per image when all are built (progress on stderr otherwise)
images: $(STAMP)
	@$(BIN)/sfclab image build $(IMAGES) >/dev/null

demo: setup
	@scripts/demo.sh

screenshots: setup
	@scripts/screenshots.sh

test: setup
	@scripts/test.sh $(PYTEST_ARGS)

unit: setup
	@$(BIN)/pytest -q tests/unit

integration: setup
	@$(BIN)/pytest -q tests/integration

bench: setup
	@$(BIN)/python bench/run.py

clean:
	@$(MAKE) -s -C native clean
	rm -rf build $(VENV) node_modules
