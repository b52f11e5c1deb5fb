# protocall: the two commands a user needs are `make run` and `make test`.
# Everything builds with CMake into build/<kind>/.
#   make run      install the missing packages the build needs (no test
#                 tools, no npm), build the `protocall` command (build/release,
#                 no C tests), run examples/quickstart.lua
#   make test     the same set-up, then every test on the release build and
#                 on the sanitizer build, and the busted suite under LuaJIT
#                 (build/luajit); the last line is "N passed, N failed"
#   make bench    every benchmark in bench/ (not part of make test)
#   make fuzz     every libFuzzer target in core/*/fuzz for FUZZ_SECONDS each
#                 (make test runs a FUZZ_SLICE-second slice of each);
#                 BENCH_ARGS=--callgrind adds exact instruction counts
#   make memcheck the spec suite under valgrind
#   make lint     doc/reference.md up to date, the layout rules of the C and
#                 the Lua (.ci/check-layout), luacheck over lua/ spec/ bench/
#                 examples/, then cppcheck and clang-tidy over core/ and
#                 bindings/
#   make doc      doc/reference.md from the --- doc comments of lua/protocall/
#                 (doc/gen_reference.lua; spec/doc_spec.lua fails when it is
#                 not what the generator writes)
#   make lua-graph  the require graph of lua/protocall (module, its group,
#                 the modules it requires)
#   make format   clang-format over all C

JOBS    ?= $(shell nproc)
RELEASE := build/release
ASAN    := build/asan
LUAJIT  := build/luajit
FUZZ    := build/fuzz
FUZZ_SECONDS ?= 600
FUZZ_SLICE   ?= 20
CMAKE_FLAGS ?= -DPROTOCALL_WERROR=ON
C_SOURCES = $(shell git ls-files '*.c' '*.h' 2>/dev/null || find core bindings -name '*.[ch]')

.PHONY: all deps deps-build build build-asan build-luajit build-fuzz run test fuzz bench memcheck lint lua-graph format doc \
  clean

all: build

# deps: every package (the build's, the tests' and the npm packages);
# deps-build: the build's alone (make run; configuring build/release).
deps:
	@./.ci/install-deps

deps-build:
	@./.ci/install-deps --build

$(RELEASE)/CMakeCache.txt: | deps-build
	@cmake -S . -B $(RELEASE) -DCMAKE_BUILD_TYPE=RelWithDebInfo $(CMAKE_FLAGS) >/dev/null

$(ASAN)/CMakeCache.txt: | deps
	@cmake -S . -B $(ASAN) -DCMAKE_BUILD_TYPE=Debug -DPROTOCALL_SANITIZE=ON $(CMAKE_FLAGS) >/dev/null

build: deps $(RELEASE)/CMakeCache.txt
	@cmake --build $(RELEASE) -j $(JOBS) -- --no-print-directory -s

build-asan: deps $(ASAN)/CMakeCache.txt
	@cmake --build $(ASAN) -j $(JOBS) -- --no-print-directory -s

# protocall.so for LuaJIT 2.1 (PROTOCALL_LUAJIT): the module alone.
$(LUAJIT)/CMakeCache.txt: | deps
	@cmake -S . -B $(LUAJIT) -DCMAKE_BUILD_TYPE=RelWithDebInfo -DPROTOCALL_LUAJIT=ON $(CMAKE_FLAGS) >/dev/null

build-luajit: deps $(LUAJIT)/CMakeCache.txt
	@cmake --build $(LUAJIT) -j $(JOBS) -- --no-print-directory -s

# The fuzz build dir is configured on every use so FUZZ_SECONDS / FUZZ_SLICE
# take effect (a no-op for CMake when nothing changed).
build-fuzz: deps
	@cmake -S . -B $(FUZZ) -DCMAKE_C_COMPILER=clang -DCMAKE_CXX_COMPILER=clang++ -DCMAKE_BUILD_TYPE=Debug -DBUILD_TESTING=OFF \
	  -DPROTOCALL_FUZZ=ON -DPROTOCALL_FUZZ_SECONDS=$(FUZZ_SECONDS) $(CMAKE_FLAGS) >/dev/null
	@cmake --build $(FUZZ) --target protocall_fuzz -j $(JOBS) -- --no-print-directory -s

fuzz: build-fuzz
	@cd $(FUZZ) && ctest --output-on-failure --timeout 0 -V

# The command and the sibling modules it loads on first use (TLS, RE2).
run: deps-build $(RELEASE)/CMakeCache.txt
	@cmake --build $(RELEASE) --target protocall protocall_tls protocall_re2 -j $(JOBS) -- --no-print-directory -s
	$(RELEASE)/protocall examples/quickstart.lua

test: build build-asan build-luajit
	@$(MAKE) --no-print-directory build-fuzz FUZZ_SECONDS=$(FUZZ_SLICE)
	@rm -f $(RELEASE)/ctest.xml $(RELEASE)/busted.tap $(ASAN)/ctest.xml $(ASAN)/busted.tap $(FUZZ)/ctest.xml \
	  $(LUAJIT)/ctest.xml $(LUAJIT)/busted.tap
	@echo "== release build"
	-@cd $(RELEASE) && ctest --output-on-failure --output-junit ctest.xml -j $(JOBS)
	@echo "== sanitizer build (AddressSanitizer with leak detection, UndefinedBehaviorSanitizer)"
	-@cd $(ASAN) && ASAN_OPTIONS=detect_leaks=1:abort_on_error=0 UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
	  ctest --output-on-failure --output-junit ctest.xml -j $(JOBS)
	@echo "== fuzz slice ($(FUZZ_SLICE) s per libFuzzer target)"
	-@cd $(FUZZ) && ctest --output-on-failure --output-junit ctest.xml -j $(JOBS)
	@echo "== LuaJIT build (the busted suite under luajit; the C tests ran above)"
	-@cd $(LUAJIT) && ctest --output-on-failure --output-junit ctest.xml -j $(JOBS)
	@lua5.4 .ci/summary.lua $(RELEASE) $(ASAN) $(FUZZ) $(LUAJIT)

# The benches record the figures of the goal table (bench/goals.lua) in
# BENCH_GOALS as they run; the table is printed last.
BENCH_GOALS = build/bench-goals.txt
bench: build build-luajit
	@rm -f $(BENCH_GOALS)
	@for b in bench/*_bench.lua; do PROTOCALL_BENCH_GOALS=$(BENCH_GOALS) $(RELEASE)/protocall $$b $(BENCH_ARGS) || exit 1; done
	@for b in bench/luajit/*_bench.lua; do PROTOCALL_BENCH_GOALS=$(BENCH_GOALS) LUA_CPATH='$(LUAJIT)/?.so;;' luajit $$b $(BENCH_ARGS) || exit 1; done
	@$(RELEASE)/protocall bench/goals.lua $(BENCH_GOALS)

# The test servers spec/grpc_server.py starts end themselves after
# PC_SERVER_LIFETIME seconds (120 by default): under valgrind the suite takes
# about ten minutes, so they get an hour.
# Then the FFI specs under LuaJIT (the C that only LuaJIT's FFI calls:
# bindings/luajit/, bindings/lua/lpc_ffi.c). .ci/valgrind.supp silences RE2's
# deliberate reads of uninitialized memory (the file says why), nothing of ours.
memcheck: build build-luajit
	PC_MEMCHECK=1 PC_SERVER_LIFETIME=3600 valgrind --error-exitcode=1 --leak-check=full --errors-for-leak-kinds=definite,indirect \
	  --suppressions=.ci/valgrind.supp \
	  $(RELEASE)/protocall $$(command -v busted) -o TAP
	valgrind --error-exitcode=1 --leak-check=full --errors-for-leak-kinds=definite,indirect \
	  luajit $$(command -v busted) --cpath='$(LUAJIT)/?.so' -o TAP spec/ffi_struct_spec.lua spec/ffi_spec.lua

lint: build
	@lua5.4 doc/gen_reference.lua --check doc/reference.md
	@/usr/bin/python3 .ci/check-layout --self-test
	@/usr/bin/python3 .ci/check-layout --objects $(RELEASE)
	@luacheck --formatter plain lua spec bench examples
	cppcheck --quiet --error-exitcode=1 --enable=warning,performance,portability \
	  --suppress=missingIncludeSystem --std=c11 -I core -I bindings/lua core bindings
	@echo "clang-tidy over core/ and bindings/ (compile_commands.json of $(RELEASE))"
	@out=$$(find core bindings -name '*.c' -not -name '*_test.c' -not -name proto_dump.c | \
	  xargs -P $(JOBS) -n 4 clang-tidy -p $(RELEASE) --quiet --warnings-as-errors='*' 2>&1); \
	  status=$$?; printf '%s\n' "$$out" | grep -v -e '^[0-9]* warnings\{0,1\} generated\.$$' -e '^$$'; \
	  exit $$status

lua-graph:
	@/usr/bin/python3 .ci/check-layout --lua-graph

format:
	clang-format -i $(filter %.c %.h,$(C_SOURCES))

doc:
	@lua5.4 doc/gen_reference.lua doc/reference.md

clean:
	rm -rf build
