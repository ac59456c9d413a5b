# InferCrane for Kubernetes. `make demo` runs the main job; `make test` runs every test tier.
SHELL := /bin/bash
PY := .venv/bin/python
REQ_HASH := $(shell cat requirements.txt requirements-dev.txt | sha256sum | cut -c1-12)
VENV_STAMP := .venv/.installed-$(REQ_HASH)

.PHONY: venv tools demo-tools demo test test-fast check-rollout check-fields ssa-schema test-kill-sweep test-kubernetes-manifests test-kubernetes-kind test-matrix lint golden bench bench-fleet bench-rollout bench-estimate bench-warm bench-events local-start local-stop clean-local

$(VENV_STAMP): requirements.txt requirements-dev.txt
	python3 -m venv .venv
	.venv/bin/pip install --quiet --disable-pip-version-check -r requirements-dev.txt
	.venv/bin/pip install --quiet --disable-pip-version-check --no-deps -e .
	rm -f .venv/.installed-*
	touch $@

venv: $(VENV_STAMP)

## tools: build the pinned Pulumi CLI, provider, control plane and kwok (cached outside the repo)
tools:
	tools/build.sh

## demo-tools: only what the demo runs (not Prometheus nor actionlint, which only tests use)
DEMO_TOOLS := pulumi kubernetes-provider kube etcd kwok kserve gateway-api node node-images registry
demo-tools:
	tools/build.sh $(DEMO_TOOLS)

## demo: the main job -- local control plane, pulumi preview + up on stack "local", evidence
##       (`make demo STACK=local-kserve`: the same in KServe mode, on the KServe manager of the plane)
STACK ?= local
demo:
	@$(MAKE) --no-print-directory -j2 venv demo-tools  # the virtualenv installs while the tools build
	$(PY) -m infercrane demo --stack $(STACK)

## lint: layering contracts, ruff, mypy --strict
lint: venv
	.venv/bin/lint-imports
	.venv/bin/ruff check infercrane tests
	.venv/bin/ruff format --check infercrane tests
	.venv/bin/mypy

## test: every tier (unit, golden, program, cli, integration on the real engine + local plane), on
##       WORKERS pytest sessions side by side, each with its own plane (tests/workers.py)
WORKERS ?= 3
test:
	@$(MAKE) --no-print-directory -j2 venv tools
	@$(MAKE) --no-print-directory lint
	@set +e; $(PY) -m pytest -n $(WORKERS) --dist loadscope --durations=25; rc=$$?; \
	if [ $$rc -eq 5 ]; then echo "error: pytest collected no tests" >&2; exit 1; fi; exit $$rc

## test-fast: the tiers that need no tools, the exhaustive check at its fast bound (>= 10^5 states
##            within a minute; `make test` adds its larger worlds, marked `exhaustive`)
test-fast: venv
	$(PY) -m pytest -m "not exhaustive" tests/unit tests/golden tests/program tests/cli

## check-rollout: the exhaustive check of the real rollout planner at its larger bound (every state of
##                worlds of 2-4 replicas per endpoint and two endpoints sharing a pool; `make test` runs
##                the fast bound); `make check-rollout SIZES=2,3`: fewer sizes
SIZES ?= 2,3,4
check-rollout: venv
	$(PY) -m tests.rollout_model $(SIZES)

## check-fields: the read-only plan's comparison against Kubernetes' own server-side apply field
##               manager (tools/go/ssa-oracle) over 10^5 generated cases (`make test`: 10^4)
check-fields: venv
	tools/build.sh ssa-oracle kserve
	INFERCRANE_FIELDS_CASES=100000 $(PY) -m pytest -q tests/integration/test_fields_oracle.py

## ssa-schema: write infercrane/core/plan/ssa_schema.py from the field manager's schema (after a pin change)
ssa-schema: venv
	tools/build.sh ssa-oracle kserve
	$(PY) tools/ssa_schema.py "$$(tools/build.sh --print-path | grep /ssa-oracle-)/ssa-oracle"
	.venv/bin/ruff format infercrane/core/plan/ssa_schema.py

## test-kubernetes-manifests: the seed's target -- the shipped manifests' checks (deploy/kubernetes: no
##                  wildcard, Secret, Pod or cluster-wide right; every rule commented; bindings; optional reads)
test-kubernetes-manifests: venv
	$(PY) -m pytest tests/unit/test_deploy_manifests.py

## test-kubernetes-kind: the seed's Kind lifecycle qualification -- strict apply, restart observation,
##                  lost-state repair, foreign field ownership refused, idempotent deletion, zero owned
##                  objects left -- on the embedded local plane, which replaces Kind here (no Docker)
test-kubernetes-kind: venv tools
	$(PY) -m pytest -m qualification tests/integration

## test-matrix: the qualification scenarios on every pinned Kubernetes (1.34-1.37: tools/versions.env),
##              one table of version x scenario; builds a missing version first (minutes each)
##              (`make test-matrix VERSIONS="1.34 1.36"`: a subset)
VERSIONS ?=
test-matrix: venv tools
	$(PY) -m tests.matrix $(VERSIONS)

## test-kill-sweep: the kill sweep of deploy and destroy (file + PostgreSQL backends) at 0.25 s steps
##                  (`make test` runs it at 1 s steps)
test-kill-sweep: venv tools
	INFERCRANE_KILL_SWEEP_STEP=0.25 $(PY) -m pytest -s tests/integration/test_kill_sweep.py

## golden: rewrite tests/golden/expected from the current renderer (review the diff!)
golden: venv
	$(PY) -m tests.golden.update

## bench: doctor vs one `kubectl auth can-i` per check, side by side on the local plane
bench: venv tools
	$(PY) bench/doctor_vs_kubectl.py

## bench-fleet: kubectl SSA vs plain pulumi-kubernetes vs infercrane at fleet size (N replicas;
##             N=100,300,500,1000 adds a growth table; TOOLS=kubectl,infercrane leaves plain Pulumi
##             out; BACKENDS=file,postgres runs infercrane on both state backends)
N ?= 100
TOOLS ?= kubectl,plain,infercrane
BACKENDS ?= file
bench-fleet: venv tools
	$(PY) bench/fleet.py --replicas $(N) --tools $(TOOLS) --backends $(BACKENDS)

## bench-events: what one progress report's Events LIST costs with a 1,000-replica deploy's Events
bench-events: venv tools
	$(PY) bench/events_list.py

## bench-estimate: plan's predicted rollout time against the measured deploy, 2 replicas on the real
##                 node loading LOAD_S seconds, in place and under a surge (docs/benchmarks.md)
LOAD_S ?= 20
bench-estimate: venv tools
	INFERCRANE_BENCH_LOAD=$(LOAD_S) $(PY) -m pytest -s -p no:cacheprovider -p no:hypothesispytest -n 0 tests/integration/bench_estimate.py

## bench-warm: warm-first waves against cold ones and the Deployment controller's rolling update, 2 replicas
##             in place, one on each of the plane's two real nodes, each node pulling at MIBPS MiB/s
##             (docs/model-images.md)
MIBPS ?= 32
bench-warm: venv tools
	INFERCRANE_BENCH_MIBPS=$(MIBPS) $(PY) -m pytest -s -p no:cacheprovider -p no:hypothesispytest -n 0 tests/integration/bench_warm.py

## bench-rollout: a fleet rolled to a new digest by the Deployment controller and by infercrane deploy,
##               side by side (E endpoints of 4 replicas, each pod Ready LOAD s after it starts)
E ?= 20,100
LOAD ?= 10
bench-rollout: venv tools
	$(PY) bench/rollout.py --endpoints $(E) --load $(LOAD)

local-start: venv tools
	$(PY) -m infercrane local start
local-stop: venv
	$(PY) -m infercrane local stop
clean-local: venv
	$(PY) -m infercrane local reset
