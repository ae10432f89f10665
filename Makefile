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
DATA_ROOT ?= ../shared/data
export HF_HOME ?= $(CURDIR)/.cache/huggingface

.PHONY: install test test-slow lint train-cls eval predict export verify-onnx infer quantize \
        pretrain bench-model bench-accuracy bench-infer check-gpu clean

$(VENV)/.installed: pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	# The CPU wheel of torch lies on this disk: install it first so the range in pyproject
	# is already satisfied and pip does not pull a multi-GB CUDA build.
	$(PY) -m pip install -q "torch==$(TORCH_VERSION)" || $(PY) -m pip install -q "torch>=2.5,<2.15"
	$(PY) -m pip install -q -e ".[dev]"
	touch $@

install: $(VENV)/.installed

test: install
	$(PY) -m pytest -q -x --durations=10

test-slow: install
	$(PY) -m pytest -q -m slow

lint: install
	$(VENV)/bin/ruff check tfm_cls export tests benchmarks

train-cls: install
	@if [ "$(NPROC)" -gt 1 ]; then \
	  $(VENV)/bin/torchrun --standalone --nproc_per_node=$(NPROC) -m tfm_cls.cli train --config $(CONFIG) $(ARGS); \
	else \
	  $(PY) -m tfm_cls.cli train --config $(CONFIG) $(ARGS); \
	fi

clean:
	rm -rf $(VENV) .pytest_cache .ruff_cache build *.egg-info
