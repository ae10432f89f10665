# tfm_cls — every target depends on the environment, so on a fresh machine
# `make train-cls` or `make test` alone sets everything up.
SHELL := /bin/bash
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
TORCH_VERSION := 2.13.0
CONFIG ?= configs/cls/bbc.yaml
ARGS ?=
NPROC ?= 1
RUN ?= runs/bbc
DATA ?=
INPUT ?= -
OUTPUT ?= -
MODEL ?= $(RUN)/model.onnx
PRETRAIN_CONFIG ?= configs/pretrain/bbc.yaml
DISTILL_CONFIG ?= configs/distill/trec.yaml
DATA_ROOT ?= ../shared/data
export HF_HOME ?= $(CURDIR)/.cache/huggingface

.PHONY: install web-install wheel test test-slow lint train-cls eval predict export verify-onnx infer quantize \
        pretrain distill bench bench-model bench-accuracy bench-infer bench-serve bench-front serve check-gpu clean

$(VENV)/.installed: pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	# The CPU wheel of torch lies on this disk: install it first so the range in pyproject
	# is already satisfied and pip does not pull a multi-GB CUDA build.
	# --no-compile: pip byte-compiles every installed module (transformers, ray, torch...), most never imported;
	# measured 234 s -> 88 s for this install (2 busy cores). Python compiles what is imported on first use and keeps it.
	$(PY) -m pip install -q --no-compile "torch==$(TORCH_VERSION)" || $(PY) -m pip install -q --no-compile "torch>=2.5,<2.15"
	$(PY) -m pip install -q --no-compile -e ".[dev]"
	touch $@

install: $(VENV)/.installed

# Two workers (every machine here has 2 cores and the suite is mostly one-threaded), each taking a whole
# test folder at a time (tests/conftest.py) so a folder's session fixtures are built once; TEST_WORKERS=0: one process.
TEST_WORKERS ?= 2
test: install
	@if command -v npm >/dev/null 2>&1; then $(MAKE) --no-print-directory web-install; \
	else echo "make test: no npm here, so the browser runtime's tests (tests/integration/web) will skip"; fi
	$(PY) -m pytest -q -x --durations=10 -n $(TEST_WORKERS) --dist loadgroup

test-slow: install
	$(PY) -m pytest -q -m slow

lint: install
	$(VENV)/bin/ruff check tfm_cls export tests benchmarks

clean:
	rm -rf $(VENV) .pytest_cache .ruff_cache build *.egg-info

# The browser runtime (web/; docs/export.md "In the browser"): the npm packages pinned by
# web/package-lock.json, and web/dist/, the bundle `tfm-cls export --web DIR` copies beside the model.
WEB_BUILT := web/dist/.built
$(WEB_BUILT): web/package-lock.json web/build.mjs $(wildcard web/src/*.js web/page/*)
	npm ci --no-audit --no-fund --prefix web
	npm run build --prefix web
	touch $@

web-install: $(WEB_BUILT)

# `make wheel`: wheels/tfm_cls-*.whl, carrying the browser page (setup.py copies web/dist, built from the
# lockfile, into tfm_cls/web_dist), so that `pip install` of it writes pages with no Node and no checkout.
wheel: install web-install
	$(PY) -m pip wheel -q --no-deps --no-build-isolation -w wheels .

# ---- jobs -------------------------------------------------------------------------------------
# `make train-cls DATA=folder/`: the recipe chooses the config for the folder (tfm-cls train --data).
TRAIN_SOURCE = $(if $(DATA),--data $(DATA),--config $(CONFIG))
train-cls: install
	@if [ "$(NPROC)" -gt 1 ]; then \
	  $(VENV)/bin/torchrun --standalone --nproc_per_node=$(NPROC) -m tfm_cls.cli train $(TRAIN_SOURCE) $(ARGS); \
	else \
	  $(PY) -m tfm_cls.cli train $(TRAIN_SOURCE) $(ARGS); \
	fi

eval: install
	$(PY) -m tfm_cls.cli eval --run $(RUN) --data $(DATA) $(ARGS)

predict: install
	$(PY) -m tfm_cls.cli predict --run $(RUN) --input $(INPUT) --output $(OUTPUT)

# `make pretrain CONFIG=configs/pretrain/trec.yaml`: a CONFIG given on the command line (or in the
# environment) wins; otherwise PRETRAIN_CONFIG, since CONFIG's default is a classification config.
pretrain: install
	@cfg="$(if $(filter command line environment,$(origin CONFIG)),$(CONFIG),$(PRETRAIN_CONFIG))"; \
	if [ "$(NPROC)" -gt 1 ]; then \
	  $(VENV)/bin/torchrun --standalone --nproc_per_node=$(NPROC) -m tfm_cls.cli pretrain --config "$$cfg" $(ARGS); \
	else \
	  $(PY) -m tfm_cls.cli pretrain --config "$$cfg" $(ARGS); \
	fi

# `make distill [CONFIG=configs/distill/trec.yaml] [ARGS="teacher.path=runs/trec-minilm/model.int8.onnx"]`:
# as for pretrain, a CONFIG given on the command line wins, else DISTILL_CONFIG.
distill: install
	@cfg="$(if $(filter command line environment,$(origin CONFIG)),$(CONFIG),$(DISTILL_CONFIG))"; \
	$(PY) -m tfm_cls.cli distill --config "$$cfg" $(ARGS)

export: install
	$(PY) -m tfm_cls.cli export --run $(RUN)

verify-onnx: install
	$(PY) -m tfm_cls.cli verify-onnx --run $(RUN)

# Torch-free deployment path: only onnxruntime, tokenizers and numpy are imported.
infer: install
	$(PY) export/infer.py --model $(MODEL) --input $(INPUT) --output $(OUTPUT) $(ARGS)

quantize: install
	$(PY) -m tfm_cls.cli quantize --run $(RUN) --data $(DATA) $(ARGS)

# ---- benchmarks (print tables, save JSON under bench_results/; `make bench` lists every one) ----
bench: install
	@$(PY) -m benchmarks

bench-model: install
	$(PY) -m benchmarks.model_speed $(ARGS)

bench-accuracy: install
	$(PY) -m benchmarks.accuracy --data-root $(DATA_ROOT) $(ARGS)

# Three tables on one ARGS: engines (torch vs onnxruntime), batching and long documents, the runtime
# against a hand-written loop.
bench-infer: install
	$(PY) -m benchmarks.inference --data-root $(DATA_ROOT) $(ARGS)
	$(PY) -m benchmarks.batching --data-root $(DATA_ROOT) $(ARGS)
	$(PY) -m benchmarks.hand_loop --data-root $(DATA_ROOT) $(ARGS)

# `make bench-front [FRONT_DATASETS="trec sst2"] [RUNS=runs] [ARGS=...]`: the accuracy-speed front of each
# dataset from the runs found under RUNS by name (D-minilm, D, D-distill, D-minilm-cut*, -seedN; the
# commands that make them: docs/distillation.md), tables under bench_results/, figures in docs/img/.
FRONT_DATASETS ?= sst2 trec mr_polarity ag_news sms_spam
RUNS ?= runs
bench-front: install
	@for d in $(FRONT_DATASETS); do \
	  $(PY) -m benchmarks.front --dataset $$d --data-root $(DATA_ROOT) --runs $(RUNS) $(ARGS) || exit 1; \
	done

# Loopback only, bounded: closed-loop clients at concurrency 1 / 8 / 32 / 128 against `tfm-cls serve`,
# batching on vs off, the FastAPI peer (the bench extra), beside offline inference on the same texts; then the
# open-loop overload run at 2x the saturation rate for 30 s (docs/serving.md).
bench-serve: install
	$(PY) -m benchmarks.serving --texts $(DATA_ROOT)/trec/test.jsonl $(ARGS)
	$(PY) -m benchmarks.serving --texts $(DATA_ROOT)/trec/test.jsonl --overload $(ARGS)

# `make serve MODEL=runs/x/model.onnx [ARGS="--port 8080 --workers 2"]`: the HTTP service (127.0.0.1).
serve: install
	$(PY) -m tfm_cls.cli serve $(MODEL) $(ARGS)

check-gpu: install
	$(PY) tests/integration/device/check_gpu.py --data-root $(DATA_ROOT) $(ARGS)
