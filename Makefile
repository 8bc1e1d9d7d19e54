# The README's commands. Each installs what is missing first.
#   make test   install, build, run every test (lit + GoogleTest)
#   make demo   install, build, run the main job on the embedded default
#   make build  just the build (binaries in build/bin/)

BUILD_DIR ?= build
JOBS ?= 2
GENERATOR := Ninja

.PHONY: all deps configure build test demo docs examples clean

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
