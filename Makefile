# Kerf: build, test and the repository gates. `.ci/run` runs the same gates.

CARGO ?= cargo
CRDS  := config/crds/kerf.getkerf.dev.yaml

.PHONY: build test lint fmt-check clippy crds crds-check

## build: compile every crate of the workspace
build:
	$(CARGO) build --workspace

## test: run the whole test suite
test:
	$(CARGO) test --workspace

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

## crds-check: fail when the committed CRD YAML differs from the Rust types
crds-check:
	@tmp=$$(mktemp); trap 'rm -f "$$tmp"' EXIT; \
	$(CARGO) run -q -p kerf-agent -- crds > "$$tmp" || exit 1; \
	if ! diff -u $(CRDS) "$$tmp"; then \
		echo "$(CRDS) is out of date: run 'make crds'" >&2; exit 1; \
	fi
