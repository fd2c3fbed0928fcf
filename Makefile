# xcompile: `make test` and `make demo` each set up a fresh machine and then run.
PYTHON ?= python3
PIP := $(PYTHON) -m pip
PIP_FLAGS ?= -q --disable-pip-version-check
TORCH_VERSION ?= 2.13.0
# tests/models and benchmarks/models.py build real models from these (neither depends on torch).
TRANSFORMERS_VERSION ?= 5.23.0
# `make lint`'s tools (none of them touches torch)
RUFF_VERSION ?= 0.17.6
MYPY_VERSION ?= 2.4.1
CLANG_FORMAT_VERSION ?= 21.1.0
DIFFUSERS_VERSION ?= 0.42.1
# torch.testing._internal (OpInfo's op_db, tests/opinfo) imports it
EXPECTTEST_VERSION ?= 0.3.0
BUILD_STAMP := build/.installed

.PHONY: setup deps build test demo bench fuzz clean wheel check-wheel lint test-matrix

setup: deps build

deps:
	@$(PYTHON) -c "import torch" 2>/dev/null || $(PIP) install $(PIP_FLAGS) torch==$(TORCH_VERSION)
	@$(PYTHON) -c "import pybind11, scikit_build_core as s, ninja, pytest, networkx, triton, sys; \
	  sys.exit(int(s.__version__.split('.')[0]) < 1)" 2>/dev/null || \
	  $(PIP) install $(PIP_FLAGS) pybind11 'scikit-build-core>=1.0' ninja pytest networkx triton
	@$(PYTHON) -c "import expecttest" 2>/dev/null || $(PIP) install $(PIP_FLAGS) expecttest==$(EXPECTTEST_VERSION)
	@$(PYTHON) -c "import transformers, diffusers" 2>/dev/null || \
	  $(PIP) install $(PIP_FLAGS) transformers==$(TRANSFORMERS_VERSION) diffusers==$(DIFFUSERS_VERSION)

# Rebuilds (incrementally) whenever csrc/ or the build files change.
build: $(BUILD_STAMP)
$(BUILD_STAMP): $(wildcard csrc/*) CMakeLists.txt pyproject.toml
	$(PIP) install $(PIP_FLAGS) --no-build-isolation --no-deps -e .
	@mkdir -p build && touch $(BUILD_STAMP)

test: setup lint
	$(PYTHON) -m pytest tests -x -p no:cacheprovider
	$(MAKE) --no-print-directory check-wheel

# dist/: the wheel, repaired to a manylinux tag (torch's own libraries are not grafted in: the
# wheel requires torch, as torch extensions do; tools/wheel/build_wheel.sh), and an sdist that
# builds wherever a supported torch is installed (pip install --no-build-isolation
# dist/xcompile-*.tar.gz). A wheel, like the sdist, requires the supported torch range: its _C
# runs on every torch of it (tools/wheel/torch_requirement.py; ARCHITECTURE.md, issue #30).
# PYTHONS="3.11 3.12 3.13": one wheel per Python instead, each built in that Python's matrix
# virtualenv with torch $(WHEEL_TORCH) (tools/matrix/venv.sh: made when missing, kept under
# ~/.cache/xcompile-matrix), each in a build folder of its own; the sdist from the first.
PYTHONS ?=
WHEEL_TORCH ?= 2.14.1
ifeq ($(strip $(PYTHONS)),)
wheel: setup
	rm -rf dist
	PYTHON=$(PYTHON) tools/wheel/build_wheel.sh dist
	$(PYTHON) -m build --sdist --no-isolation -o dist . >/dev/null
	@ls -l dist
else
wheel:
	rm -rf dist
	@set -e; first=; for v in $(PYTHONS); do \
	  py="$$(tools/matrix/venv.sh $$v:$(WHEEL_TORCH))"; first="$${first:-$$py}"; \
	  echo "[wheel] Python $$v, torch $(WHEEL_TORCH): $$py"; \
	  PYTHON="$$py" BUILD_DIR="$(CURDIR)/build/wheel-py$$v-torch$(WHEEL_TORCH)" tools/wheel/build_wheel.sh dist; \
	done; "$$first" -m build --sdist --no-isolation -o dist . >/dev/null
	@ls -l dist
endif

# The wheel installed into a fresh virtualenv, used from outside the tree, uninstalled.
check-wheel: wheel
	PYTHON=$(PYTHON) tools/wheel/check_wheel.sh dist

# ruff (rules in pyproject.toml), mypy on python/xcompile, clang-format on the C++ (.clang-format).
lint:
	@$(PYTHON) -m ruff --version 2>/dev/null | grep -q "$(RUFF_VERSION)" || $(PIP) install $(PIP_FLAGS) ruff==$(RUFF_VERSION)
	@$(PYTHON) -m mypy --version 2>/dev/null | grep -q "$(MYPY_VERSION)" || $(PIP) install $(PIP_FLAGS) mypy==$(MYPY_VERSION)
	@$(PYTHON) -c "import clang_format" 2>/dev/null || $(PIP) install $(PIP_FLAGS) clang-format==$(CLANG_FORMAT_VERSION)
	$(PYTHON) -m ruff check python tests benchmarks tools
	$(PYTHON) -m mypy
	$(PYTHON) -c "import clang_format; clang_format.clang_format()" --dry-run -Werror csrc/*.cpp csrc/*.h csrc/graphs/*.cpp csrc/graphs/*.h tests/runtime/*.cpp
	$(PYTHON) tools/house_counts.py --check

demo: setup
	$(PYTHON) benchmarks/demo.py

# The wide random-program search (tests/programs/): N programs per backend, each compared with
# eager; prints every failure and a summary per backend. `make fuzz N=5000 START=0 BACKENDS=eager`
N ?= 1000
START ?= 0
BACKENDS ?= eager,aot_eager,inductor
fuzz: setup
	$(PYTHON) tests/programs/fuzz.py -n $(N) --start $(START) --backends $(BACKENDS) $(FUZZ_FLAGS)

bench: setup
	$(PYTHON) benchmarks/overhead.py
	@for b in benchmarks/training.py benchmarks/kernels.py; do [ ! -f $$b ] || $(PYTHON) $$b; done

clean:
	rm -rf build

# Other Pythons and torches (tools/matrix/test_matrix.sh): a kept virtualenv per pair under
# ~/.cache/xcompile-matrix, one wheel per Python installed with each torch of the run, the layer
# subset run through the installed wheel, one line per pair. `make test-matrix PAIRS="3.12:2.14.1 3.12:2.11.0"`
PAIRS ?= 3.12:2.14.1 3.11:2.14.1
test-matrix:
	tools/matrix/test_matrix.sh "$(PAIRS)"
