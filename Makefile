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

test: install lint
	$(BIN)/python -m pytest --durations=25

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

clean:
	rm -rf $(VENV) build *.egg-info .pytest_cache .ruff_cache
