# The README's two commands: `make demo` and `make test`. Both create .venv when missing.
PYTHON ?= $(shell command -v python3.11 || command -v python3)
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: install demo test lint format bench clean

install: $(STAMP)

$(STAMP): setup.cfg pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e ".[all]"
	touch $(STAMP)

demo: install
	$(BIN)/python -m tfcompress demo

# One worker process per core, at most two (each holds TensorFlow; several tests start
# processes of their own); a test file stays on one worker, so its module fixtures are
# built once. `pytest tests/test_x.py` alone runs in this process, as usual.
test: install lint
	$(BIN)/python -m pytest --numprocesses auto --maxprocesses 2 --dist loadfile --durations=25

lint: install
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .

format: install
	$(BIN)/ruff format .
	$(BIN)/ruff check --fix .

bench: install
	$(BIN)/python benchmarks/run_all.py
	$(BIN)/python benchmarks/ptq_accuracy.py
	$(BIN)/python benchmarks/tfmot_sizes.py
	$(BIN)/python benchmarks/selection.py
	$(BIN)/python benchmarks/edgetpu_zoo.py
	$(BIN)/python benchmarks/compress_mnist.py --write
	$(BIN)/python benchmarks/doc_examples.py
	$(BIN)/python benchmarks/doc_selective.py
	$(BIN)/python benchmarks/isolation_cost.py
	$(BIN)/python benchmarks/warm_child.py
	$(BIN)/python benchmarks/gc_freeze.py
	$(BIN)/python benchmarks/export_lean.py
	$(BIN)/python benchmarks/child_cost.py
	$(BIN)/python benchmarks/cli_help.py

clean:
	rm -rf $(VENV) build *.egg-info .pytest_cache .ruff_cache
