# The two commands: `make run` (build + main job) and `make test` (build + every test).
BUILD ?= build
JOBS ?= $(shell nproc)
CMAKE_ARGS ?=
CTEST_ARGS ?=
RUN_ARGS ?=

# nvcc is often installed outside PATH.
export PATH := $(PATH):/usr/local/cuda/bin

.PHONY: deps build run test clean

deps:
	@bash scripts/install_deps.sh

build: deps
	cmake -S . -B $(BUILD) -G Ninja $(CMAKE_ARGS)
	cmake --build $(BUILD) -j $(JOBS)

run: build
	./$(BUILD)/tools/smla run $(RUN_ARGS)

# GPU tests (label gpu) run only where a GPU answers; see scripts/gpu_check.sh.
test: build
	cd $(BUILD) && ctest --output-on-failure -j $(JOBS) $(if $(shell nvidia-smi -L 2>/dev/null),,-LE gpu) $(CTEST_ARGS)

clean:
	rm -rf $(BUILD)
