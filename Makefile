# grit: the commands a person types. See README.md.
#   make demo   install deps, build, run the demo job
#   make test   install deps, build (normal + ASan/UBSan), run every test
BUILD      ?= build
BUILD_SAN  ?= build-san
JOBS       ?= $(shell nproc)
CMAKE_FLAGS ?=
CTEST_FLAGS ?=

.PHONY: all deps build build-san test test-fast fuzz demo bench clean

all: build

deps:
	@bash scripts/install-deps.sh

build:
	@cmake -S . -B $(BUILD) -DCMAKE_BUILD_TYPE=Release $(if $(CI),-DGRIT_WERROR=ON) $(CMAKE_FLAGS) >/dev/null
	@cmake --build $(BUILD) -j $(JOBS)

build-san:
	@cmake -S . -B $(BUILD_SAN) -DCMAKE_BUILD_TYPE=Debug -DGRIT_SANITIZE=ON $(if $(CI),-DGRIT_WERROR=ON) $(CMAKE_FLAGS) >/dev/null
	@cmake --build $(BUILD_SAN) -j $(JOBS)

# Every test in its own process with a timeout (CTest). The sanitizer build
# runs the unit tests and the C paths of the parity and config tests.
test: deps build build-san
	@cd $(BUILD) && ctest --output-on-failure -j $(JOBS) $(CTEST_FLAGS)
	@cd $(BUILD_SAN) && ctest --output-on-failure -j $(JOBS) -L san $(CTEST_FLAGS)

test-fast: build
	@cd $(BUILD) && ctest --output-on-failure -j $(JOBS) -LE slow $(CTEST_FLAGS)

# A longer fuzz run on the sanitizer build (docs/testing.md): FUZZ_SECONDS over all targets.
FUZZ_SECONDS ?= 600
FUZZ_SEED    ?= 1
fuzz: build-san
	@ASAN_OPTIONS=detect_leaks=1 $(BUILD_SAN)/grit-fuzz --seconds $(FUZZ_SECONDS) --seed $(FUZZ_SEED) --timeout 30

demo: deps build
	@bash scripts/demo.sh

bench: deps build
	@bash bench/run_all.sh

clean:
	rm -rf $(BUILD) $(BUILD_SAN)
