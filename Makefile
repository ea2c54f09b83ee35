# Two commands on a fresh machine (Python 3.11, Java 17, make): `make run` and `make test`.
PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed-stamp
OUT    ?= out
SEED   ?= 2020
PERSONS ?= 200000

.PHONY: install run test lint bench bench-e2e clean

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet -e '.[dev,bench]'
	touch $(STAMP)

install: $(STAMP)

## make run: build a synthetic fixture state and run the full TopDown job on it locally.
run: install
	$(BIN)/das fixture synthetic --persons $(PERSONS) --seed $(SEED) --out $(OUT)/input
	rm -rf $(OUT)/run
	$(BIN)/das run configs/demo.toml --input $(OUT)/input --output $(OUT)/run --seed $(SEED)

## make test: lint, then the whole test suite (unit and Spark system tests).
test: install lint
	$(BIN)/pytest

lint: install
	$(BIN)/ruff check das tests jobs bench

## make bench: speed and memory figures, printed and written to bench/results/.
bench: install
	$(BIN)/python -m bench.run_all

## make bench-e2e: the production job on the RI fixture and 1M/2M/4M synthetic states
## (local[2]); prints the table, writes bench/results/e2e.json. Takes ~30 min on 2 cores.
bench-e2e: install
	$(BIN)/python -m bench.bench_e2e

clean:
	rm -rf $(OUT) spark-warehouse metastore_db derby.log
