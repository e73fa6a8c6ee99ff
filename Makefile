# Quick start: `make demo` then `make test`. Both create .venv on first use.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
# The reference implementation's own packages (its pins conflict with ours), for the reference-in-the-loop tests.
REFERENCE_VENV := .venv-reference
# Commands run with the venv first on PATH, so rules find `mlperf-wf`.
export PATH := $(CURDIR)/$(BIN):$(PATH)
CORES ?= 2
BENCH ?= llama2_70b_lora
# Several benchmarks in one DAG: BENCH="llama31_8b bert" (spaces or commas).
empty :=
space := $(empty) $(empty)
comma := ,
BENCH_LIST := $(subst $(space),$(comma),$(strip $(subst $(comma),$(space),$(BENCH))))
# The reference's own convergence logs drawn beside a single benchmark's runs (config reference_logs), e.g.
# REFERENCE_LOGS=../shared/fixtures/reference_logs_aa344c7/llm_moe_pretraining/nemo/rcp_logs/16384
REFERENCE_LOGS ?=
REFERENCE_LOGS_CONFIG := $(if $(REFERENCE_LOGS),'reference_logs={$(BENCH_LIST): $(abspath $(REFERENCE_LOGS))}')
# Another preparation a single benchmark offers (config preparation), e.g. BENCH=dlrm_dcnv2 PREPARATION=from_raw.
PREPARATION ?=
PREPARATION_CONFIG := $(if $(PREPARATION),'preparation={$(BENCH_LIST): $(PREPARATION)}')

.PHONY: demo report test lint dryrun-full profiles clean gpu-smoke

# The first run installs: each stage says what it installs and the time so far, and pip names every package it fetches.
INSTALL_SECONDS = $$(( $$(date +%s) - $$(cat $(VENV)/.install-started) ))
install_stage = @echo "make: install, step $(1) of 3 ($(INSTALL_SECONDS) s so far): $(2)"

$(BIN)/activate: requirements.txt requirements-dev.txt pyproject.toml
	@echo "make: installing into $(VENV) (the first run only: about 1.5 minutes on a 2-vCPU VM, more on a slow network)"
	$(PYTHON) -m venv $(VENV)
	@date +%s > $(VENV)/.install-started
	$(call install_stage,1,torch 2.13.0 (the largest download))
	$(BIN)/pip install torch==2.13.0
	$(call install_stage,2,the pinned packages of requirements-dev.txt)
	$(BIN)/pip install -r requirements-dev.txt
	$(call install_stage,3,the mlperf_wf package itself (editable))
	$(BIN)/pip install --no-deps -e .
	@touch $@
	@echo "make: installed in $(INSTALL_SECONDS) s"

# NeMo-Run at the llama31 references' pin, where ../shared holds its source (it is not on PyPI): built from a copy, since
# hatch-vcs writes a version file into the tree and the tree has no git history to tell the version.
NEMO_RUN_SOURCE ?= ../shared/reference-src/nemo-run-34259bd

$(REFERENCE_VENV)/bin/activate: tests/reference-requirements.txt
	$(PYTHON) -m venv $(REFERENCE_VENV)
	$(REFERENCE_VENV)/bin/pip install --quiet torch==2.13.0
	$(REFERENCE_VENV)/bin/pip install --quiet -r tests/reference-requirements.txt
	if [ -d $(NEMO_RUN_SOURCE) ]; then copy=$$(mktemp -d) && cp -r $(NEMO_RUN_SOURCE)/. $$copy && chmod -R u+w $$copy \
	  && SETUPTOOLS_SCM_PRETEND_VERSION=0.0.0+34259bd $(REFERENCE_VENV)/bin/pip install --quiet --no-deps $$copy && rm -rf $$copy; fi
	touch $@

# TensorFlow with its Estimator API, for the contract test of the rehearsal hook's TensorFlow path (bert's reference
# trains with tf.estimator): tests/run/test_rehearsal_hook_tensorflow.py. Its own venv: TensorFlow 2.15 needs numpy<2.
# tensorflow-cpu 2.15 publishes wheels for CPython 3.9 to 3.11.
TENSORFLOW_VENV := .venv-tensorflow

$(TENSORFLOW_VENV)/bin/activate: tests/tensorflow-requirements.txt
	$(PYTHON) -m venv $(TENSORFLOW_VENV)
	$(TENSORFLOW_VENV)/bin/pip install --quiet -r tests/tensorflow-requirements.txt
	touch $@

# megatron-core as the llama31 references' images hold it, for their rehearsals' real data stage (tests/benchmarks/
# llama31_*/rehearsal.py put it first on the image's PYTHONPATH): llama31_8b's Dockerfile.h200 builds core_r0.11.0 (PyPI 0.11.0);
# llama31_405b's base image nvcr.io/nvidia/nemo:24.12-rc0 holds the release its mcore.patch was made on (the patch's
# `index` lines name megatron-core 0.10.0's gpt_dataset.py and moe_utils.py), and its Dockerfile applies that patch,
# as this rule does from ../shared (without the patch the folder is not made and the rehearsal's check skips).
# Both releases publish wheels (with the compiled C++ dataset helpers) for CPython 3.10 and 3.11 only: no build from source.
MCORE_PATCH ?= ../shared/reference-src/mlcommons-training-aa344c7/large_language_model_pretraining/nemo/mcore.patch
MCORE_FOLDERS := $(REFERENCE_VENV)/megatron-core-0.11.0/.installed $(REFERENCE_VENV)/megatron-core-0.10.0/.installed

$(REFERENCE_VENV)/megatron-core-0.11.0/.installed: $(BIN)/activate
	rm -rf $(@D)
	$(BIN)/pip install --quiet --no-deps --only-binary=:all: --target $(@D) megatron-core==0.11.0
	touch $@

$(REFERENCE_VENV)/megatron-core-0.10.0/.installed: $(BIN)/activate
	if [ -f $(MCORE_PATCH) ]; then rm -rf $(@D) \
	  && $(BIN)/pip install --quiet --no-deps --only-binary=:all: --target $(@D) megatron-core==0.10.0 \
	  && patch --quiet --forward --directory=$(@D) -p1 < $(MCORE_PATCH) \
	  && touch $@ || { rm -rf $(@D); exit 1; }; \
	else echo "$(MCORE_PATCH) absent: llama31_405b's megatron-core is not made"; fi

# The tiny chain for $(BENCH): generated data -> download -> verify -> preprocess -> runs -> compliance -> report.
demo: $(BIN)/activate
	$(BIN)/snakemake --cores $(CORES) --rerun-incomplete --config 'benchmarks=[$(BENCH_LIST)]' $(REFERENCE_LOGS_CONFIG) $(PREPARATION_CONFIG)
	@for name in $(subst $(comma),$(space),$(BENCH_LIST)); do $(BIN)/python -c "import json, sys; name = sys.argv[1]; r = json.load(open(f'results/tiny/{name}/report.json')); from mlperf_wf.results.units import duration; print('report:', f'results/tiny/{name}/report.json', '| olympic score:', duration(r['score']['time_to_train_minutes']), '| runs:', len(r['runs']), '| compliance:', sorted({x['compliance'] for x in r['runs']}))" $$name; done

# The browsable report of the demo's campaign: Snakemake's report needs the same config as the run it reports on.
report: $(BIN)/activate
	$(BIN)/snakemake --report report.html --report-stylesheet workflow/report/style.css --config 'benchmarks=[$(BENCH_LIST)]' $(REFERENCE_LOGS_CONFIG) $(PREPARATION_CONFIG)
	@echo "report.html: the figures, captions and results of results/tiny/ for $(BENCH_LIST)"

# MLPERF_WF_REQUIRE_REFERENCE: the reference-in-the-loop tests fail, rather than skip, without their venv.
# TEST_WORKERS xdist workers (tests/conftest.py keeps a module's tests together and each engine's tests on one worker):
# three on two cores, as the cluster in a box's worker mostly waits; TEST_WORKERS=0 runs them in this process.
TEST_WORKERS ?= 3
test: $(BIN)/activate $(REFERENCE_VENV)/bin/activate $(TENSORFLOW_VENV)/bin/activate $(MCORE_FOLDERS)
	MLPERF_WF_REQUIRE_REFERENCE=1 $(BIN)/python -m pytest -q --durations=25 -n $(TEST_WORKERS)

lint: $(BIN)/activate
	$(BIN)/ruff check src tests bench containers
	$(BIN)/ruff format --check src tests bench containers
	$(BIN)/snakefmt --check workflow
	$(BIN)/snakemake --lint
	$(BIN)/lint-imports

# The full-scale plan: every job with its real URL and container command, nothing run.
dryrun-full: $(BIN)/activate
	$(BIN)/snakemake -n results/$(BENCH)/report.json --config scale=full

# On a machine with one NVIDIA GPU: the tiny tier of several benchmarks on CUDA, the llama2_70b_lora reference at toy
# size through the full-scale path and the power sampler against nvidia-smi, in at most 10 minutes; report in
# gpu-smoke/report.md. Without a GPU it says why and skips (bench/gpu_smoke.py).
gpu-smoke: $(BIN)/activate
	$(BIN)/python bench/gpu_smoke.py --out gpu-smoke

# Link the profiles where Snakemake looks for named ones, so `snakemake --profile slurm ...` works verbatim.
PROFILE_HOME ?= $(or $(XDG_CONFIG_HOME),$(HOME)/.config)/snakemake
profiles:
	mkdir -p $(PROFILE_HOME)
	ln -sfn $(CURDIR)/profiles/slurm $(PROFILE_HOME)/slurm
	ln -sfn $(CURDIR)/profiles/local $(PROFILE_HOME)/local
	@echo "profiles linked in $(PROFILE_HOME): snakemake --profile slurm|local ..."

clean:
	rm -rf results logs .snakemake
