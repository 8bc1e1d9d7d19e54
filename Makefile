# The README's commands. Each installs what is missing first.
#   make test   install, build, run every test (lit + GoogleTest)
#   make demo   install, build, run the main job on the embedded default
#   make build  just the build (binaries in build/bin/)

BUILD_DIR ?= build
JOBS ?= 2
GENERATOR := Ninja

.PHONY: all deps configure build test test-sanitize fuzz demo docs examples clean

all: build

deps:
	@scripts/install-deps.sh

$(BUILD_DIR)/build.ninja: CMakeLists.txt
	cmake -S . -B $(BUILD_DIR) -G $(GENERATOR) -DCMAKE_BUILD_TYPE=Release

configure: deps $(BUILD_DIR)/build.ninja

build: configure
	cmake --build $(BUILD_DIR) -j $(JOBS)

test: build
	cd $(BUILD_DIR) && ctest --output-on-failure -j $(JOBS) -LE gpu

# The whole suite under AddressSanitizer + UndefinedBehaviorSanitizer (GCC,
# its own build directory; LLVM/MLIR and the step.so files stay plain).
SANITIZE_DIR ?= build-sanitize
test-sanitize: deps
	cmake -S . -B $(SANITIZE_DIR) -G $(GENERATOR) -DCMAKE_BUILD_TYPE=Release -DSTEPC_SANITIZE=ON
	cmake --build $(SANITIZE_DIR) -j $(JOBS)
	cd $(SANITIZE_DIR) && ASAN_OPTIONS=detect_leaks=0:verify_asan_link_order=0:allow_user_poisoning=0:handle_segv=0 \
	  UBSAN_OPTIONS=print_stacktrace=1 ctest --output-on-failure -j $(JOBS) -LE gpu

# The libFuzzer targets, 1M inputs each (scripts/fuzz.sh RUNS for fewer).
fuzz: deps
	scripts/fuzz.sh

demo: build
	@scripts/demo.sh $(BUILD_DIR)

# Copies the regenerated dialect and pass references into docs/.
docs: build
	cp $(BUILD_DIR)/docs/Dialects/StepDialect.md docs/dialect/StepDialect.md
	cp $(BUILD_DIR)/docs/Passes/StepcPasses.md docs/passes/StepcPasses.md
	cp $(BUILD_DIR)/docs/Dialects/StepKDialect.md docs/dialect/StepKDialect.md
	cp $(BUILD_DIR)/docs/Passes/StepcCompilerPasses.md docs/passes/StepcCompilerPasses.md

# Regenerates every shipped model from examples/gen_model.py.
examples:
	python3 examples/gen_model.py --all-presets examples

clean:
	rm -rf $(BUILD_DIR)
