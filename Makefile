# Dispatcher Lab: `make lab` opens the notebooks, `make test` runs every test.
# Both create a virtual environment in .venv and install the lab into it on first use.

PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed

.PHONY: lab test venv torch lint notebooks bench clean

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --disable-pip-version-check -e ".[dev]"
	@touch $@

venv: $(STAMP)

## make lab: set up, then open JupyterLab on the notebooks
lab: $(STAMP)
	$(BIN)/python -m jupyterlab notebooks/00_start_here.ipynb --notebook-dir=. $(LAB_ARGS)

## make test: set up, then run the whole test suite (style, engine, codegen, graders, notebooks)
test: $(STAMP)
	$(BIN)/python -m ruff check .
	$(BIN)/python -m pytest -n auto --dist loadscope $(PYTEST_ARGS)

## make torch: add the optional PyTorch reference (tests comparing with it stop skipping)
torch: $(STAMP)
	$(BIN)/python -m pip install --quiet "torch==2.13.0"

lint: $(STAMP)
	$(BIN)/python -m ruff check .

## make notebooks: re-execute every notebook and store fresh outputs
notebooks: $(STAMP)
	$(BIN)/python tools/refresh_notebooks.py

bench: $(STAMP)
	$(BIN)/python benchmarks/dispatch_overhead.py

clean:
	rm -rf build .pytest_cache .ruff_cache
