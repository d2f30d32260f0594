# Two commands do everything on a fresh machine: `make demo` and `make test`.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
BASE := $(VENV)/.installed-base

.PHONY: demo test browser bench fidelity fidelity-gavel fidelity-sia docs docs-tables sia-table sia-held-out sia-bound sia-jitter lint clean

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip

# torch is pinned first so pip takes the CPU build this machine provides; an unpinned torch pulls GBs of CUDA.
TORCH ?= 2.13.0

# The demo needs the package alone (about 600 MB); the tests, benchmarks and real runs add Ray, torch, the test and
# docs tools.
$(BASE): pyproject.toml constraints.txt Makefile | $(BIN)/python
	$(BIN)/python -m pip install --quiet -c constraints.txt -e .
	touch $(BASE)

$(STAMP): $(BASE)
	$(BIN)/python -m pip install --quiet "torch==$(TORCH)"
	$(BIN)/python -m pip install --quiet -c constraints.txt -e ".[dev,docs,cluster,workloads]"
	touch $(STAMP)

demo: $(BASE)
	$(BIN)/shockwave demo

# The dashboard's browser test drives Debian's Chromium through its chromedriver (nothing is downloaded by hand).
# Without apt (not Debian) the test skips, and fails under CI=true.
browser:
	@command -v chromium >/dev/null && command -v chromedriver >/dev/null || { \
		if ! command -v apt-get >/dev/null; then echo "no apt-get: install chromium and its chromedriver yourself"; \
		else SUDO=$$([ "$$(id -u)" = 0 ] || echo sudo); \
			$$SUDO apt-get update -qq && \
			$$SUDO env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends \
				chromium chromium-driver; fi; }

# Two workers: the tests that run real jobs on the wall clock go to one of them, in turn (tests/conftest.py).
test: $(STAMP) browser
	$(BIN)/python -m pytest -q -n 2 --dist loadgroup

bench: $(STAMP)
	$(BIN)/python benchmarks/run.py
	$(BIN)/python benchmarks/types_pareto.py
	$(BIN)/python benchmarks/types_pareto.py --random 40
	$(BIN)/python benchmarks/sia_reference.py $(if $(SIA_ARTIFACT),--artifact $(SIA_ARTIFACT))
	$(BIN)/python benchmarks/packed_runtime.py
	$(BIN)/python benchmarks/gavel_policy_runtime.py --reference-policies $(or $(GAVEL_POLICIES),/tmp/gavel_ref)
	$(BIN)/python benchmarks/gavel_simulation_cpu.py $(if $(GAVEL_SCHEDULER),--reference-scheduler $(GAVEL_SCHEDULER) \
		--reference-python $(or $(GAVEL_PYTHON),python3) --reference-pythonpath $(GAVEL_PYTHONPATH))
	$(BIN)/python benchmarks/gavel_reference.py
	$(BIN)/python benchmarks/gavel_figure8.py
	$(BIN)/python benchmarks/service_latency.py
	$(BIN)/python benchmarks/service_latency.py --queued 1700 --readers 30
	$(BIN)/python benchmarks/lease_startup.py

fidelity: $(STAMP)
	$(BIN)/python benchmarks/fidelity.py --out results/fidelity/short --docs
	$(BIN)/python benchmarks/fidelity.py --out results/fidelity/long --regime long --docs

# Ours beside the reference Gavel simulator on random cells (REF: the scheduler/ folder of a copy of
# stanford-futuredata/gavel; REF_PYTHON: a Python with numpy, scipy, cvxpy 1.7 and ecos); resumable.
fidelity-gavel: $(STAMP)
	$(if $(REF),,$(error give REF=DIR, the scheduler/ folder of a copy of stanford-futuredata/gavel))
	$(BIN)/python benchmarks/gavel_diff.py --reference $(REF) --reference-python $(or $(REF_PYTHON),python3) \
		--cells $(or $(CELLS),220) --out results/gavel-diff --record --docs

# Sia's artifact cannot ship here (no licence): the targets below read a copy of it.
SIA_ARTIFACT_ARG = $(if $(SIA_ARTIFACT),,$(error give SIA_ARTIFACT=DIR, the sia-simulator/ folder of a copy of siasosp23/artifacts))--artifact $(SIA_ARTIFACT)
# Ours beside Sia's own simulator on every Saturn and Philly workload, running the artifact (SIA_PYTHON) where the
# record lacks a run.
fidelity-sia: $(STAMP)
	$(BIN)/python benchmarks/sia_reference.py $(SIA_ARTIFACT_ARG) --run-artifact --artifact-python $(or $(SIA_PYTHON),python3)

# Sia's Table 3/4 (docs/reproducing.md).
SIA_TABLE = $(BIN)/python benchmarks/sia_table.py $(SIA_ARTIFACT_ARG)

sia-table: $(STAMP)
	$(SIA_TABLE) --out results/sia-table --write --figure docs/figures/sia_rho_cdf.png

# The same on the artifact's workloads the docs' table leaves out (Saturn 4-10, Philly 4-8): printed, not written.
sia-held-out: $(STAMP)
	$(SIA_TABLE) --out results/sia-held-out --held-out

# The least worst rho any schedule can give each homogeneous Philly workload, beside what the policies got in the two above.
sia-bound: $(STAMP)
	$(BIN)/python benchmarks/sia_fairness_bound.py $(SIA_ARTIFACT_ARG)

# How far one run's makespan is from its mean: the bar workloads with every arrival moved by under a second.
sia-jitter: $(STAMP)
	$(BIN)/python benchmarks/sia_jitter.py $(SIA_ARTIFACT_ARG)

# The docs' results tables (one GPU type, several), regenerated from the simulations themselves (tests check its 120-job rows).
docs-tables: $(STAMP)
	$(BIN)/python benchmarks/docs_tables.py
	$(BIN)/python benchmarks/types_table.py
	$(BIN)/python benchmarks/http_api_doc.py

# The documentation site, built into site/ with warnings as errors (make test builds it too).
docs: $(STAMP)
	NO_MKDOCS_2_WARNING=1 $(BIN)/mkdocs build --strict

lint: $(STAMP)
	$(BIN)/ruff check .
	$(BIN)/ruff format --check src tests benchmarks

clean:
	rm -rf $(VENV) build dist site src/*.egg-info .pytest_cache .ruff_cache
