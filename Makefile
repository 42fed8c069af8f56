# The README's two commands -- `make reproduce` and `make test` -- and a few helpers.
# Each installs missing Debian packages (scripts/setup), configures, builds and runs. This file only
# wraps cmake/ctest; the build itself is described in CMakeLists.txt.
JOBS ?= $(shell nproc)
LADDER := build/bin/ladder

.PHONY: all setup configure build test test-unit test-unit-run test-tsan test-labs test-labs-run lab reproduce golden clean figures notebooks notebook bench

all: build

setup:
	@scripts/setup

configure: setup
	@cmake --preset ci >/dev/null

build: configure
	@cmake --build build -j $(JOBS)

# Every test: unit + golden + SIMT (three schedules) + nvcc compile (part of the build) + notebooks
# (ctest label "notebook") + labs both ways + one TSan pass of the SIMT/CUDA tests.
# The last line counts the tests of each label that ran (scripts/test-summary): a kind that silently
# did not run (0 notebooks, say) fails `make test`.
# Once the main build is done, its tests, the labs (two stages' jobs at a time: mostly configure steps,
# links and short runs, their objects from ccache) and the TSan build and tests run side by side: none of
# them needs another's result, and on two cores no one of them keeps both busy for long (measured: one
# after the other they left a core idle half the time). Each prints its whole output when it ends.
test: build
	@$(MAKE) --no-print-directory --output-sync=target -j3 test-unit-run test-labs-run test-tsan
	@scripts/test-summary build build-tsan --labs $(words $(wildcard chapters/*/lab/lab.json))
	@echo "make test: all passed"

test-unit: build
	@$(MAKE) --no-print-directory test-unit-run

test-unit-run:
	@cd build && ctest --output-on-failure -j $(JOBS) --output-junit ctest-results.xml

test-tsan: setup
	@cmake --preset tsan >/dev/null
	@cmake --build build-tsan -j $(JOBS)
	@cd build-tsan && ctest --output-on-failure -j $(JOBS) --output-junit ctest-results.xml

# CI: every lab's untouched starter FAILS its tests, the reference solution PASSES them; each planted
# mistake (tests/labs/) fails naming its rung and output, with its own hint and no false one.
test-labs: build
	@$(MAKE) --no-print-directory test-labs-run

test-labs-run:
	@scripts/lab ci -P 2

# A student's lab: make lab LAB=01-softmax
lab: setup
	@test -n "$(LAB)" || (echo "usage: make lab LAB=01-softmax" >&2; exit 2)
	@scripts/lab build $(LAB)

# The chapters' figures, drawn by the project from its committed goldens and its own code
# (scripts/figures/chNN_*.py, one per chapter; PNGs committed in chapters/NN-*/figures/).
figures: build
	@for f in scripts/figures/ch*.py; do echo "$$f"; /usr/bin/python3 $$f || exit 1; done

# The notebooks executed, their outputs stored in the .ipynb files (scripts/run-notebook --write).
notebooks: build
	@scripts/run-notebook --write notebooks/*.ipynb

# One stage's notebook: make notebook NB=04-moe (on the reference, build/), or with LAB=1 on the student's
# code of that stage's lab (the lab build's libladder.so, the starter's headers first: scripts/lab notebook).
notebook: setup
	@test -n "$(NB)" || (echo "usage: make notebook NB=04-moe [LAB=1]" >&2; exit 2)
	@scripts/lab notebook $(NB) $(if $(filter 1,$(LAB)),,--solution)

# Every stage's benchmark (bench/*.cpp) in one run, beside the machine's FMA peak and copy bandwidth
# measured by the same run: bench-report/REPORT.md, results.json and a PNG per stage (scripts/bench-report).
# BENCH_RUNS=2 repeats every program and reports medians with each figure's min-max.
BENCH_OUT ?= bench-report
BENCH_RUNS ?= 1
bench: configure
	@cmake --build build -j $(JOBS) --target $(patsubst bench/%.cpp,bench_%,$(wildcard bench/*.cpp))
	@/usr/bin/python3 scripts/bench-report --build build --out $(BENCH_OUT) --runs $(BENCH_RUNS)

# The tables go to reproduce/REPORT.md (and, as printed, reproduce/stdout.txt); the terminal gets one line
# per stage: its time and the peak memory so far (the whole run stays under 1 GB).
reproduce: build
	@mkdir -p reproduce
	@$(LADDER) reproduce --out reproduce > reproduce/stdout.txt
	@echo "report: reproduce/REPORT.md (the printed tables: reproduce/stdout.txt)"

golden: build
	@$(LADDER) golden --regenerate

clean:
	rm -rf build build-tsan build-asan build-lab-* build-gpu build-template
