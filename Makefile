# Quick start: `make demo` then `make test`. Both create .venv on first use.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
# Commands run with the venv first on PATH, so rules find `mlperf-wf`.
export PATH := $(CURDIR)/$(BIN):$(PATH)
CORES ?= 2
BENCH ?= llama2_70b_lora

.PHONY: demo test lint dryrun-full profiles clean

$(BIN)/activate: requirements.txt requirements-dev.txt pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet torch==2.13.0
	$(BIN)/pip install --quiet -r requirements-dev.txt
	$(BIN)/pip install --quiet --no-deps -e .
	touch $@

# The tiny chain for $(BENCH): generated data -> download -> verify -> preprocess -> runs -> compliance -> report.
demo: $(BIN)/activate
	$(BIN)/snakemake --cores $(CORES) --config 'benchmarks=[$(BENCH)]'
	@$(BIN)/python -c "import json; r = json.load(open('results/tiny/$(BENCH)/report.json')); print('report:', 'results/tiny/$(BENCH)/report.json', '| olympic score (min):', r['score']['time_to_train_minutes'], '| runs:', len(r['runs']), '| compliance:', sorted({x['compliance'] for x in r['runs']}))"

test: $(BIN)/activate
	$(BIN)/python -m pytest -q

lint: $(BIN)/activate
	$(BIN)/ruff check src tests bench
	$(BIN)/ruff format --check src tests bench
	$(BIN)/snakefmt --check workflow
	$(BIN)/snakemake --lint

# The full-scale plan: every job with its real URL and container command, nothing run.
dryrun-full: $(BIN)/activate
	$(BIN)/snakemake -n results/$(BENCH)/report.json --config scale=full

# Link the profiles where Snakemake looks for named ones, so `snakemake --profile slurm ...` works verbatim.
PROFILE_HOME ?= $(or $(XDG_CONFIG_HOME),$(HOME)/.config)/snakemake
profiles:
	mkdir -p $(PROFILE_HOME)
	ln -sfn $(CURDIR)/profiles/slurm $(PROFILE_HOME)/slurm
	ln -sfn $(CURDIR)/profiles/local $(PROFILE_HOME)/local
	@echo "profiles linked in $(PROFILE_HOME): snakemake --profile slurm|local ..."

clean:
	rm -rf results logs .snakemake
