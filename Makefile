# Setup and checks. Every target creates .venv/ first if it is missing.
PYTHON := .venv/bin/python
VENV_STAMP := .venv/.installed

.PHONY: setup test benchmark

setup: $(VENV_STAMP)

$(VENV_STAMP): requirements.txt
	python3 -m venv .venv
	$(PYTHON) -m pip install --quiet --upgrade pip
	$(PYTHON) -m pip install --quiet -r requirements.txt
	touch $(VENV_STAMP)

test: $(VENV_STAMP)
	$(PYTHON) -m pytest

benchmark: $(VENV_STAMP)
	$(PYTHON) benchmarks/bench_encoder.py
