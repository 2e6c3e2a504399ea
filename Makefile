# Targets for developers and CI. Run them through ./dev on a fresh machine (it becomes root and
# installs make/python3); `make help` lists them.
SHELL := /bin/bash
.SHELLFLAGS := -euo pipefail -c
VENV := $(CURDIR)/.venv
export PATH := $(VENV)/bin:$(PATH)
export ANSIBLE_COLLECTIONS_PATH := $(CURDIR)/.cache/collections
HARNESS := python3 tests/harness/harness.py
NATIVE_IMAGE := debian12-$(shell dpkg --print-architecture 2>/dev/null || echo amd64)
# Debian 13 arm64 is built and tested where its systemd boots; on cgroup v1 hosts it does not (README).
MOLECULE_SCENARIOS ?= default

.PHONY: help setup images site lint sanity unit integration molecule build test clean

help:
	@echo "make site         provision the local default target (native container) with playbooks/site.yml"
	@echo "make test         lint, sanity, unit, integration and molecule tests (what CI runs)"
	@echo "make setup        host packages, binfmt, podman settings, .venv, collection link"
	@echo "make images       build/refresh the local test images"
	@echo "make lint|sanity|unit|integration|molecule|build   one stage"

setup:
	$(HARNESS) setup-host
	$(HARNESS) venv
	$(HARNESS) link

images: setup
	$(HARNESS) images

site: setup
	$(HARNESS) images $(NATIVE_IMAGE)
	ansible-playbook -i inventories/local/hosts.yml playbooks/local_target.yml
	ansible-playbook -i inventories/local/hosts.yml playbooks/site.yml

lint: setup
	ansible-lint --profile production
	antsibull-changelog lint

sanity: setup
	python3 tests/sanity/run_sanity.py

unit: setup
	pytest -q tests/unit

build: setup
	rm -rf build && mkdir -p build
	ansible-galaxy collection build --output-path build .

integration: setup images build
	pytest -q -p no:cacheprovider tests/integration

molecule: setup images
	$(HARNESS) binfmt
	for scenario in $(MOLECULE_SCENARIOS); do molecule test -s $$scenario; done

# Stages in order, each timed, stopping at the first failure.
test:
	for stage in setup images lint sanity unit integration molecule; do \
		start=$$(date +%s); \
		$(MAKE) --no-print-directory $$stage; \
		echo "[timing] $$stage: $$(( $$(date +%s) - start )) s"; \
	done

clean:
	-podman rm -f arm-inference-local
	rm -rf build .cache
