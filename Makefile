# The two commands a fresh machine needs (README): `make setup` installs, `make test` runs the tests.
PY ?= python3
VENV ?= .venv
BIN := $(VENV)/bin

.PHONY: setup test test-fast demo clean
setup:
	$(PY) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip
	# the CPU build of torch from this machine's disk; on a GPU host use its own torch instead
	$(BIN)/pip install -q torch==2.13.0
	$(BIN)/pip install -q -e '.[test,fidelity]'
	# the pinned FA4 sources, for the patcher's tests only (no CUDA dependencies pulled in)
	$(BIN)/pip install -q --no-deps flash-attn-4==4.0.0b36
	# the Triton backend's tests run its kernel through the CPU interpreter; the GPU host has this version
	$(BIN)/pip install -q triton==3.6.0

test:
	$(BIN)/python -m pytest -q -p no:cacheprovider

# the tier to run before every commit (under 3 minutes on 2 cores): no end-to-end runs marked slow, and none of the
# Triton/Gluon kernels through the CPU interpreter (their name checks run here: tests/test_catalog.py)
test-fast:
	$(BIN)/python -m pytest -q -p no:cacheprovider -m "not slow" --ignore=tests/test_triton_attn.py \
		--ignore=tests/test_gluon_attn.py

demo:
	$(BIN)/softbench latency --backend sim --seq 256 --rounds 3 --windows 2 --calls 5 --warmup 2

clean:
	rm -rf $(VENV) build *.egg-info
