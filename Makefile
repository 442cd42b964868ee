# The two commands: `make run` (build + main job) and `make test` (build + every test).
BUILD ?= build
JOBS ?= $(shell nproc)
CMAKE_ARGS ?=
CTEST_ARGS ?=
RUN_ARGS ?=
# The interpreter the Python package is installed into and tested with (e.g. a venv's).
PYTHON ?= python3
PIP_ARGS ?=
PYTEST_ARGS ?=

# nvcc is often installed outside PATH.
export PATH := $(PATH):/usr/local/cuda/bin

.PHONY: deps build run test ctest python pytest sanitize measurement-builds spills clean

deps:
	@PYTHON=$(PYTHON) bash scripts/install_deps.sh

build: deps
	cmake -S . -B $(BUILD) -G Ninja $(CMAKE_ARGS)
	cmake --build $(BUILD) -j $(JOBS)

run: build
	./$(BUILD)/tools/smla run $(RUN_ARGS)

test: ctest pytest

# GPU tests (label gpu) run only where a GPU answers; see scripts/gpu_check.sh.
ctest: build
	cd $(BUILD) && ctest --output-on-failure -j $(JOBS) $(if $(shell nvidia-smi -L 2>/dev/null),,-LE gpu) $(CTEST_ARGS)

# The Python package: pip builds it (scikit-build-core, its own CMake tree in build-python/,
# CUDA kernels when nvcc is found) and installs it into $(PYTHON)'s environment.
python: deps
	CMAKE_BUILD_PARALLEL_LEVEL=$(JOBS) $(PYTHON) -m pip install --disable-pip-version-check --no-build-isolation --no-deps $(PIP_ARGS) .

# pytest's exit code 5 (nothing collected) fails the target like any other failure.
pytest: python
	$(PYTHON) -m pytest tests/python -q -rs $(PYTEST_ARGS)

# The CPU path under AddressSanitizer + UndefinedBehaviorSanitizer (C++ CPU tests, Python suite).
sanitize: deps
	JOBS=$(JOBS) PYTHON=$(PYTHON) bash scripts/sanitize_cpu.sh

# The sparse-decode family's measurement builds (config.h switches) still compile: a few cubins.
measurement-builds:
	JOBS=$(JOBS) bash scripts/check_measurement_builds.sh

spills:
	JOBS=$(JOBS) bash scripts/check_spills.sh
	JOBS=$(JOBS) bash scripts/check_spills.sh -DSMLA_SD_NARROW_FAST_END=0

clean:
	rm -rf $(BUILD) build-python build-sanitize
