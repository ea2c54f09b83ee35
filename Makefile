# Two commands on a fresh machine (Python 3.11, Java 17, make): `make run` and `make test`.
PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed-stamp
LOCK   := constraints.txt
OUT    ?= out
SEED   ?= 2020
PERSONS ?= 200000

.PHONY: install lock lock-check run test test-fast lint docs layout bench bench-quick bench-docs bench-design bench-areas bench-design-budget bench-design-sensitivity bench-e2e bench-read bench-noise bench-sparse-nmf bench-optimize bench-cluster bench-coverage bench-accuracy bench-h1 bench-dhc bench-national clean cluster-up cluster-down dist

## make install: .venv with das (editable) and every dependency at the version constraints.txt
## pins, so that the same seed gives the same output on every fresh install (HiGHS and numba
## releases change results) and a new linter release cannot break `make test`.
$(STAMP): pyproject.toml $(LOCK)
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet -c $(LOCK) --upgrade pip setuptools
	$(BIN)/pip install --quiet -c $(LOCK) -e '.[dev,bench]'
	$(MAKE) --no-print-directory lock-check VENV=$(VENV)
	touch $(STAMP)

install: $(STAMP)

## make lock-check: fails, listing them, if .venv holds a package version constraints.txt does
## not pin (a dependency added to pyproject.toml without `make lock`, or one installed by hand).
lock-check:
	@if $(BIN)/pip freeze --all --exclude-editable | grep -vxF -f $(LOCK); then \
	  echo "make: the packages above are not pinned in $(LOCK): run 'make lock' after changing" \
	    "pyproject.toml's dependencies, or 'rm -rf $(VENV) && make install' for exactly the lock" >&2; \
	  exit 1; fi

## make lock: rewrite constraints.txt from pyproject.toml's ranges: a clean venv installs the
## newest versions they allow and `pip freeze` records every package (transitive included).
## Run it on Linux with Python 3.11 (the Docker image's); commit the file with the change.
LOCK_VENV ?= $(OUT)/lock-venv
lock:
	rm -rf $(LOCK_VENV)
	$(PYTHON) -m venv $(LOCK_VENV)
	$(LOCK_VENV)/bin/pip install --quiet --upgrade pip setuptools
	$(LOCK_VENV)/bin/pip install --quiet -e '.[dev,bench]'
	{ echo "# Exact versions of every package das installs: pyproject.toml's ranges resolved by"; \
	  echo "# 'make lock' with $$($(LOCK_VENV)/bin/python -V) on $$(uname -sm); make install and"; \
	  echo "# docker/Dockerfile install with 'pip install -c constraints.txt'. Do not edit by hand."; \
	  $(LOCK_VENV)/bin/pip freeze --all --exclude-editable; \
	} > $(LOCK).tmp
	mv $(LOCK).tmp $(LOCK)
	rm -rf $(LOCK_VENV)

## make run: build a synthetic fixture state and run the full TopDown job on it locally.
run: install
	$(BIN)/das fixture synthetic --persons $(PERSONS) --seed $(SEED) --out $(OUT)/input
	rm -rf $(OUT)/run $(OUT)/run-confidential
	$(BIN)/das run configs/demo.toml --input $(OUT)/input --output $(OUT)/run --seed $(SEED)
	@echo "das is installed in $(VENV)/, not on your PATH: 'source $(VENV)/bin/activate' (or call $(BIN)/das) to run the README's commands"

## make test: lint and type check, then the whole test suite (unit, Spark system, cluster) in
## TEST_WORKERS processes (pytest-xdist), each test file whole in one of them: Spark's tiny
## jobs leave a core mostly waiting, and the files' shared fixtures (one Spark session, one
## demo run) are made once per process. TEST_WORKERS=0: one process, as plain pytest.
TEST_WORKERS ?= 2
test: install lint
	$(BIN)/pytest -n $(TEST_WORKERS) --dist loadfile

## make test-fast: lint, type check and the tests that need no Spark and are not marked slow
## (under 3 minutes on 2 cores): the loop for iterating on pure code.
test-fast: install lint
	$(BIN)/pytest -n $(TEST_WORKERS) --dist loadfile -m "not spark and not slow"

lint: install
	$(BIN)/ruff check das tests jobs bench
	$(BIN)/mypy

## make docs: docs/input.md and docs/output.md, rendered from the code (a test holds them equal).
docs: install
	$(BIN)/python -m das.input.describe > docs/input.md
	$(BIN)/python -m das.output.describe > docs/output.md

## make layout: import cycles, backward stage imports and module/function sizes of das/.
layout: install
	$(BIN)/python -m tests.layout

## make bench: every benchmark below at its full size and repeats (hours on 2 cores), each in
## its own process, writing bench/results/; then docs/performance.md from those files.
## QUICK=1: as make bench-quick.
bench: install
	$(BIN)/python -m bench.run_all --out $(OUT) $(if $(QUICK),--quick)

## make bench-quick: every benchmark on small inputs with one repeat, to check that each still
## runs; inputs, runs and results in $(OUT)/bench-quick, never over bench/results.
bench-quick: install
	$(BIN)/python -m bench.run_all --out $(OUT) --quick

## make bench-docs: docs/performance.md, docs/accuracy.md and docs/design.md's measured section
## from the committed results files and bench/goals.py, nothing rerun (tests hold the pages
## equal to what this makes).
bench-docs: install
	$(BIN)/python -m bench.performance_page
	$(BIN)/python -m bench.accuracy_results
	$(BIN)/python -m bench.design_page

## make bench-design-budget: `das design budget` on RI's hierarchy for the 2020 workload
## (configs/workloads/pl94_2020.toml); writes bench/results/design_budget.json.
bench-design-budget: install
	$(BIN)/python -m bench.bench_design_budget --work $(OUT)/design_budget $(if $(RI),--ri $(RI))

## make bench-design-sensitivity: what moves the 2020 workload's block-group total: the design
## converged on RI's whole tree, and designs with that entry's weight changed (WEIGHTS, default
## 1 1.1 1.3 1.5); about 3 minutes; writes bench/results/design_sensitivity.json.
bench-design-sensitivity: install
	$(BIN)/python -m bench.design_sensitivity --work $(OUT)/design_budget $(if $(RI),--ri $(RI)) $(if $(WEIGHTS),--weights $(WEIGHTS))

## make bench-e2e: the production job on the RI fixture and 1M/2M/4M synthetic states
## (local[2]), each beside the reader alone; writes bench/results/e2e.json.
bench-e2e: install
	$(BIN)/python -m bench.bench_e2e

## make bench-read: the reader alone on 1M and 4M synthetic states; writes read.json.
bench-read: install
	$(BIN)/python -m bench.bench_read

## make bench-noise: the exact sampler, with OpenDP's in the same process; writes noise.json.
bench-noise: install
	$(BIN)/python -m bench.bench_noise

## make bench-sparse-nmf: bytes per noisy value of a sparse DHC-P block level beside the
## discrete Gaussian's entropy (the floor); writes sparse_nmf.json.
bench-sparse-nmf: install
	$(BIN)/python -m bench.bench_sparse_nmf

## make bench-optimize: the per-parent solver against the cvxpy reference; writes optimize.json.
bench-optimize: install
	$(BIN)/python -m bench.bench_optimize

## make bench-cluster: the RI job on a loopback standalone cluster and on local[2]: task-time
## spread per phase; writes cluster.json.
bench-cluster: install
	$(BIN)/python -m bench.bench_cluster

## make bench-coverage: coverage of the estimator's 90% intervals over 5 seeds on the RI
## fixture (built into $(OUT)/coverage; RI=DIR reads another), 25 on a synthetic state of 100
## counties, and of the occupancy product's (H1) over 5 on the RI fixture's units; writes
## bench/results/coverage.json.
bench-coverage: install
	$(BIN)/python -m bench.bench_coverage --work $(OUT)/coverage $(if $(RI),--ri $(RI))

## make bench-design: the measurement design on the RI fixture in one command: `das design
## budget` for the 2020 workload, synthetic places and the optimised spine for them, and the
## production job per seed (SEEDS, default 1-5) with the 2020 shares, the designed shares and
## on the optimised spine (three runs of 10-25 minutes each per seed, kept in $(OUT)/design, so
## an interrupted bench resumes); prints the tables and writes bench/results/design.json
## (then `make bench-docs` for docs/design.md); RI=DIR: an RI input already built. QUICK mode:
## make bench-quick.
SEEDS ?= 1 2 3 4 5
bench-design: install
	$(BIN)/python -m bench.bench_design --work $(OUT)/design --seeds $(SEEDS) $(if $(RI),--input $(RI))

## make bench-areas: `das estimate --areas` on bench-design's standard runs (SEEDS; one made
## in $(OUT)/design if missing) for 10,000 areas of contiguous blocks across tract lines: how
## often the 90% interval of an area's total holds the true count, by size class (issue 55's
## goal pools 10-9,999 persons), and the command's wall time; writes bench/results/areas.json.
bench-areas: install
	$(BIN)/python -m bench.bench_areas --work $(OUT)/design --seeds $(SEEDS) $(if $(RI),--input $(RI))

## make bench-national: the production job on the largest county family (10M persons, 2,500
## tracts), the largest state family (5M, 254 counties) and a nation of 52 states (5M),
## inputs cached in $(OUT)/national (SCALE=0.05 for a small check); writes
## bench/results/national.json, from which docs/performance.md estimates the U.S. run.
SCALE ?= 1
bench-national: install
	$(BIN)/python -m bench.bench_national --work $(OUT)/national --scale $(SCALE)

## make bench-accuracy: error of each post-processing variant (default, measurements, own
## totals, the 2020 rule), of the BLUE and of the noisy measurements over 5 seeds on the RI
## fixture (built into $(OUT)/accuracy from ../shared/data/real; runs cached there); writes
## bench/results/accuracy.json, then docs/accuracy.md and docs/img/accuracy_*.png from it.
bench-accuracy: install
	$(BIN)/python -m bench.bench_accuracy --work $(OUT)/accuracy --seeds 1 2 3 4 5

## make bench-h1: the occupancy product (configs/h1_2020_production.toml) with its target, the
## BLUE above the blocks, and with the noisy answers only, over 5 seeds on the RI fixture (runs
## cached in $(OUT)/h1); writes bench/results/h1.json.
bench-h1: install
	$(BIN)/python -m bench.bench_h1 --work $(OUT)/h1

## make bench-dhc: the DHC persons product (configs/dhcp_production.toml) end to end, issue 56's
## figures in one command: per seed (SEEDS, default 1) its wall, phases, peak memory of every
## process, validity, the NMF's size and noise values per block against the dense count, and
## the MAE per cell by level beside the Census's published figures; with AGREE=1 (the default)
## a P.L. 94-171 run of the same input first, which the DHC run agrees with, and the block x
## P.L. 94-171 cells that differ (goal: none). DHC_INPUT=ri (default: the RI blocks fixture with
## DHC attributes, 1.05M persons) or synthetic (one county of PERSONS, default 100000). Inputs
## and runs kept in $(OUT)/dhc (a finished run is reused); writes bench/results/dhc.json.
## Cost on 2 cores with AGREE=1: RI about 23 minutes a seed (up to 9 GiB), the 100,000-person
## county 3 minutes.
DHC_INPUT ?= ri
AGREE ?= 1
DHC_PERSONS = $(if $(filter file,$(origin PERSONS)),100000,$(PERSONS))
DHC_SEEDS = $(if $(filter file,$(origin SEEDS)),1,$(SEEDS))
bench-dhc: install
	$(BIN)/python -m bench.bench_dhc --work $(OUT)/dhc --input $(DHC_INPUT) \
	  --persons $(DHC_PERSONS) --seeds $(DHC_SEEDS) $(if $(filter 1,$(AGREE)),--agree)

## make cluster-up WORKERS=2: a Spark standalone master and workers on 127.0.0.1 (state,
## logs and work dirs in $(CLUSTER)); ports: MASTER_PORT, WEBUI_PORT (workers: +1, +2, ...).
WORKERS     ?= 2
CLUSTER     ?= $(OUT)/cluster
MASTER_PORT ?= 7077
WEBUI_PORT  ?= 8080
cluster-up: install
	$(BIN)/das cluster up --workers $(WORKERS) --state $(CLUSTER) \
	  --master-port $(MASTER_PORT) --webui-port $(WEBUI_PORT)

## make cluster-down: stop exactly the processes cluster-up started.
cluster-down: install
	$(BIN)/das cluster down --state $(CLUSTER)

## make dist: dist/das.zip, the package for spark-submit --py-files (dependencies not included).
dist:
	mkdir -p dist
	rm -f dist/das.zip
	$(PYTHON) -c "import pathlib, zipfile; z = zipfile.ZipFile('dist/das.zip', 'w', zipfile.ZIP_DEFLATED); [z.write(p) for p in sorted(pathlib.Path('das').rglob('*')) if p.is_file() and '__pycache__' not in p.parts]; z.close()"

clean:
	rm -rf $(OUT) spark-warehouse metastore_db derby.log
