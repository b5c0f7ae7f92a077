# Dispatcher Lab: `make lab` opens the notebooks, `make test` runs every test.
# Both create a virtual environment in .venv and install the lab into it on first use.

PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed
# JupyterLab refuses to start as root unless told --allow-root (containers, cloud VMs): pass it only then.
LAB_UID ?= $(shell id -u)
ROOT_ARGS := $(if $(filter 0,$(LAB_UID)),--allow-root)
# JupyterLab settings the lab ships (app-wide, inside .venv): save widget state with the notebook, so
# a saved and reopened notebook shows the key-set explorer instead of "model not found".
LAB_OVERRIDES := $(VENV)/share/jupyter/lab/settings/overrides.json

.PHONY: lab test venv torch lint notebooks bench clean

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --disable-pip-version-check -e ".[dev]"
	@touch $@

venv: $(STAMP)

$(LAB_OVERRIDES): $(STAMP) tools/lab_settings.py
	@$(BIN)/python tools/lab_settings.py $@ >/dev/null  # saveState: see tools/lab_settings.py

## make lab: set up, then open JupyterLab on the notebooks. JupyterLab options go in LAB_ARGS, e.g.
## make lab LAB_ARGS="--no-browser --port=8899 --ip=0.0.0.0"
lab: $(STAMP) $(LAB_OVERRIDES)
ifneq ($(ROOT_ARGS),)
	@echo "make lab: running as root, so JupyterLab gets --allow-root (it refuses to start as root otherwise)"
endif
	$(BIN)/python -m jupyterlab notebooks/00_start_here.ipynb --ServerApp.root_dir=. $(ROOT_ARGS) $(LAB_ARGS)

## make test: set up, then run the whole test suite (style, engine, codegen, graders, notebooks)
test: $(STAMP)
	$(BIN)/python -m ruff check .
	$(BIN)/python -m pytest -n auto --dist loadscope $(PYTEST_ARGS)

## make torch: add the optional PyTorch reference (tests comparing with it stop skipping)
torch: $(STAMP)
	$(BIN)/python -m pip install --quiet "torch==2.13.0"

## make grade [EX=ex04] [SEED=N]: grade your exercises with the lab's venv (GRADE_ARGS=--help for more)
.PHONY: grade student-edition gradescope
grade: $(STAMP)
	$(BIN)/python -m labsupport.grade $(EX) $(if $(SEED),--seed $(SEED)) $(GRADE_ARGS)

## make student-edition [OUT=dir]: the course without solutions/ and grader secrets (nbgrader's release step)
student-edition: $(STAMP)
	$(BIN)/python -m labsupport.grade.release --out $(or $(OUT),dist/student)

## make gradescope [OUT=file.zip]: the Gradescope autograder bundle (setup.sh + run_autograder)
gradescope: $(STAMP)
	$(BIN)/python -m labsupport.grade.gradescope --out $(or $(OUT),dist/gradescope_autograder.zip)

lint: $(STAMP)
	$(BIN)/python -m ruff check .

## make notebooks: re-execute every notebook and store fresh outputs
notebooks: $(STAMP)
	$(BIN)/python tools/refresh_notebooks.py

BENCH ?= dispatch_overhead
bench: $(STAMP)
	$(BIN)/python benchmarks/$(BENCH).py

clean:
	rm -rf build .pytest_cache .ruff_cache
