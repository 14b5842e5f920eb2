# The README's two commands: `make demo` and `make test`. Both create .venv when missing.
PYTHON ?= $(shell command -v python3.11 || command -v python3)
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

DEVICE_VENV := .venv-device
DEVICE_STAMP := $(DEVICE_VENV)/.installed

.PHONY: install demo test lint format bench clean device-install device-test wheel

install: $(STAMP)

$(STAMP): setup.cfg pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e ".[all]"
	touch $(STAMP)

# The device install (docs/devices.md): .tflite files only, no TensorFlow, plus Dask's
# worker, and pytest to run the gate plugin there.
device-install: $(DEVICE_STAMP)

$(DEVICE_STAMP): setup.cfg pyproject.toml
	$(PYTHON) -m venv $(DEVICE_VENV)
	$(DEVICE_VENV)/bin/python -m pip install --quiet --upgrade pip
	$(DEVICE_VENV)/bin/python -m pip install --quiet -e ".[device]" "pytest>=9.2,<10"
	touch $(DEVICE_STAMP)

# The tests marked `device`: the commands in that install (the .tflite files are built here
# first), and benchmark --on through a Dask worker started from it. CI runs it after `make test`.
device-test: install device-install
	$(BIN)/python -m pytest -m device --durations=10

# The wheel a device installs (tfcompress is not on the package index; docs/devices.md):
# dist/tfcompress-0.1.0-py3-none-any.whl, tfcompress/ only (py.typed included). build/ goes
# first: setuptools would carry a module deleted since the last build into the wheel.
wheel:
	rm -rf build
	$(PYTHON) -m pip wheel --no-deps --wheel-dir dist .

demo: install
	$(BIN)/python -m tfcompress demo --out-dir demo --force

# One worker process per core, at most two (each holds TensorFlow; several tests start
# processes of their own); a test file stays on one worker, so its module fixtures are
# built once. `pytest tests/test_x.py` alone runs in this process, as usual. The tests of
# the device install run in `make device-test`.
test: install lint
	$(BIN)/python -m pytest --numprocesses auto --maxprocesses 2 --dist loadfile --durations=25 -m "not device"

lint: install
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .

format: install
	$(BIN)/ruff format .
	$(BIN)/ruff check --fix .

bench: install device-install
	$(BIN)/python benchmarks/run_all.py
	$(BIN)/python benchmarks/ptq_accuracy.py
	$(BIN)/python benchmarks/tfmot_sizes.py
	$(BIN)/python benchmarks/selection.py
	$(BIN)/python benchmarks/edgetpu_zoo.py
	$(BIN)/python benchmarks/mcu.py
	$(BIN)/python benchmarks/compress_mnist.py --write
	$(BIN)/python benchmarks/doc_examples.py
	$(BIN)/python benchmarks/doc_selective.py
	$(BIN)/python benchmarks/isolation_cost.py
	$(BIN)/python benchmarks/warm_child.py
	$(BIN)/python benchmarks/gc_freeze.py
	$(BIN)/python benchmarks/export_lean.py
	$(BIN)/python benchmarks/child_cost.py
	$(BIN)/python benchmarks/cli_help.py
	$(BIN)/python benchmarks/remote_overhead.py

clean:
	rm -rf $(VENV) $(DEVICE_VENV) build dist *.egg-info .pytest_cache .ruff_cache
