# Attention NMT trainer. `make help` lists the targets.
PYTHON ?= .venv/bin/python
# Multi30k is read from $MULTI30K_DIR; when unset, from ../shared/data/multi30k if present,
# otherwise downloaded on first use.
MULTI30K_DIR ?= $(if $(wildcard ../shared/data/multi30k/train.de),$(abspath ../shared/data/multi30k))
export MULTI30K_DIR
ARGS ?=
CKPT ?=
SPLIT ?= test
BEAM ?= 5
# The torch that `make install` puts in first: the CPU build; e.g. TORCH="torch --index-url https://download.pytorch.org/whl/cu128" for CUDA.
TORCH ?= torch==2.13.0

.PHONY: help install data aligner train eval align tensorboard test test-all fuzz lint bench bench-peers

help: ## Show this help
	@grep -E '^[a-z-]+:.*## ' $(MAKEFILE_LIST) | awk 'BEGIN {FS = ":.*## "}; {printf "  make %-12s %s\n", $$1, $$2}'

install: ## Create .venv and install the package (CPU torch first; TORCH="..." for another build) with dev tools
	python3 -m venv .venv
	$(PYTHON) -m pip install --upgrade pip
	$(PYTHON) -m pip install $(TORCH)
	$(PYTHON) -m pip install -e '.[dev]'

data: ## Prepare the default corpus (sentencepiece + encoded splits); ARGS="data=..." for another
	$(PYTHON) -m nmt.data $(ARGS)

aligner: ## Reference word alignments of the corpus (eflomal, both directions, symmetrised); needs pip install -e '.[align]'
	$(PYTHON) -m nmt.reference_aligner $(ARGS)

train: ## Train one model (Multi30k de->en, 60 min budget); ARGS="key=value ..." overrides (+experiment=cpu_ensemble: two)
	$(PYTHON) -m nmt.train $(ARGS)

eval: ## BLEU/chrF of the best checkpoint of the newest run (CKPT=path, SPLIT=test|valid, BEAM=5; 1 = greedy)
	$(PYTHON) -m nmt.evaluate $(if $(CKPT),ckpt=$(CKPT)) split=$(SPLIT) decode.beam_size=$(BEAM) $(ARGS)

align: ## Export alignments (matrices, Pharaoh, heatmaps, report.html, explorer.html; AER with gold) of the newest run's best.pt
	$(PYTHON) -m nmt.align $(if $(CKPT),ckpt=$(CKPT)) split=$(SPLIT) $(ARGS)

tensorboard: ## Open TensorBoard on all runs
	$(PYTHON) -m tensorboard.main --logdir outputs

bench: ## Training throughput / FLOP utilisation, then decoding speed of the newest run (scripts/bench/bench_*.py)
	$(PYTHON) scripts/bench/bench_train.py $(ARGS)
	$(PYTHON) scripts/bench/bench_decode.py $(if $(CKPT),--ckpt $(CKPT))

bench-peers: ## Side by side with JoeyNMT 2.3.0 and OpenNMT-py 3.5.1 (each in its own venv), about 25 min on 2 cores
	bash scripts/bench/bench_peers.sh $(ARGS)

test: ## The fast suite (every module; slow end-to-end runs excluded), two workers: about 2 minutes on 2 cores (356 tests in 2:17, 2026-12-03)
	$(PYTHON) -m pytest -q -n 2

test-all: ## Every test, the slow end-to-end runs included, two workers (what CI runs)
	$(PYTHON) -m pytest -q -n 2 -m ''

fuzz: ## The command-line fuzz test at nightly size: 150 drawn inputs per kind (600 in all), fresh random draws
	NMT_FUZZ_EXAMPLES=150 $(PYTHON) -m pytest -q -m '' tests/test_fuzz.py

lint: ## ruff and mypy
	$(PYTHON) -m ruff check nmt tests scripts
	$(PYTHON) -m mypy
