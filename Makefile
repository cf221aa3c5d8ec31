# brasa — one Makefile. `make` builds build/brasa; `make test` runs the suite.
# The engine (src/) needs only a C11 compiler, libc, libm, pthreads and libdl.

CC      ?= cc
BUILD   ?= build
OPT     ?= -O2
ARCHFLAGS ?= -march=x86-64-v2
CFLAGS  ?=
# override: flags given on the command line (test-asan, fuzz) add to these, not replace them
override CFLAGS += -std=c11 $(OPT) -g -Wall -Wextra -Wpointer-arith -Werror -D_GNU_SOURCE -pthread \
           -Iinclude -Isrc -MMD -MP $(ARCHFLAGS)
LDLIBS  += -lm -lpthread -ldl

SRC      := $(sort $(wildcard src/*/*.c))
OBJ      := $(SRC:%.c=$(BUILD)/%.o)
CLI_SRC  := $(sort $(wildcard app/cli/*.c))
CLI_OBJ  := $(CLI_SRC:%.c=$(BUILD)/%.o)
TEST_SRC := $(sort $(wildcard tests/test_*.c))
# EXE: the executables' suffix (".exe" for `make windows`)
EXE      ?=
TESTS    := $(TEST_SRC:tests/%.c=$(BUILD)/tests/%$(EXE))
TEST_COMMON := $(filter-out $(TEST_SRC) tests/fuzz_%.c,$(sort $(wildcard tests/*.c)))
TEST_COMMON_OBJ := $(TEST_COMMON:%.c=$(BUILD)/%.o)
LIB      := $(BUILD)/libbrasa.a

# Kernel templates and web assets are embedded into the binary as C arrays.
EMBED_IN  := $(sort $(wildcard src/gpu/kernels/*.cu src/gpu/kernels/*.cuh))
EMBED_C   := $(BUILD)/gen/embedded.c
EMBED_OBJ := $(BUILD)/gen/embedded.o

.PHONY: all test test-asan bench fuzz clean format run
.SECONDARY:
all: $(BUILD)/brasa$(EXE)

$(BUILD)/%.o: %.c
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -c $< -o $@

$(EMBED_C): tools/embed.sh $(EMBED_IN)
	@mkdir -p $(dir $@)
	sh tools/embed.sh $(EMBED_IN) > $@

$(EMBED_OBJ): $(EMBED_C)
	$(CC) $(CFLAGS) -Wno-overlength-strings -c $< -o $@

$(LIB): $(OBJ) $(EMBED_OBJ)
	@rm -f $@
	ar rcs $@ $^

$(BUILD)/brasa$(EXE): $(CLI_OBJ) $(LIB)
	$(CC) $(CFLAGS) -o $@ $(CLI_OBJ) $(LIB) $(LDLIBS)

$(BUILD)/tests/%$(EXE): $(BUILD)/tests/%.o $(TEST_COMMON_OBJ) $(LIB)
	$(CC) $(CFLAGS) -o $@ $< $(TEST_COMMON_OBJ) $(LIB) $(LDLIBS)

# brasa-server (app/server/): the HTTP API and the dashboard, on libmicrohttpd and jansson.
# The engine library stays free of them. `make` builds the server when pkg-config finds both
# libraries; `make server` and `make test` always do. Its web files get their own embedded table.
SERVER_PKGS  := libmicrohttpd jansson
SERVER_FOUND := $(shell pkg-config --exists $(SERVER_PKGS) 2>/dev/null && echo yes)
SERVER_CFLAGS = $(shell pkg-config --cflags $(SERVER_PKGS))
SERVER_LIBS   = $(shell pkg-config --libs $(SERVER_PKGS))
SERVER_SRC   := $(sort $(wildcard app/server/*.c))
SERVER_OBJ   := $(SERVER_SRC:%.c=$(BUILD)/%.o)
WEB_IN       := $(sort $(wildcard app/server/web/*.html app/server/web/*.js app/server/web/*.css app/server/web/*.svg))
WEB_OBJ      := $(BUILD)/gen/web_assets.o
SERVER       := $(BUILD)/brasa-server
ifeq ($(SERVER_FOUND),yes)
all: $(SERVER)
endif
.PHONY: server
server: $(SERVER)

$(BUILD)/gen/web_assets.c: tools/embed.sh $(WEB_IN)
	@mkdir -p $(dir $@)
	sh tools/embed.sh $(WEB_IN) | sed 's/embedded_files\[\]/web_files[]/' > $@

$(WEB_OBJ): $(BUILD)/gen/web_assets.c
	$(CC) $(CFLAGS) -Wno-overlength-strings -c $< -o $@

$(BUILD)/app/server/%.o: app/server/%.c
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) $(SERVER_CFLAGS) -c $< -o $@

$(SERVER): $(SERVER_OBJ) $(WEB_OBJ) $(LIB)
	$(CC) $(CFLAGS) -o $@ $(SERVER_OBJ) $(WEB_OBJ) $(LIB) $(SERVER_LIBS) $(LDLIBS)

# The README's main job: `make run` generates with MODEL (any GGUF file) or, without one, with a
# small synthetic model it writes first (brasa synth, a few MB, a second).
MODEL  ?=
PROMPT ?= Once upon a time
N      ?= 64
.PHONY: run
run: $(BUILD)/brasa
	@if [ -z "$(MODEL)" ] && [ ! -f $(BUILD)/tiny.gguf ]; then \
	  $(BUILD)/brasa synth --arch qwen3 --shape tiny --type q8_0 -o $(BUILD)/tiny.gguf; fi
	$(BUILD)/brasa run -m "$(or $(MODEL),$(BUILD)/tiny.gguf)" -p "$(PROMPT)" -n $(N)

test: $(SERVER)
test: $(BUILD)/brasa $(TESTS)
	@sh tests/run.sh $(BUILD)

# Benchmarks: programs that print figures (bench/*.c, each linked with the library).
BENCH_SRC := $(sort $(wildcard bench/*.c))
BENCHES   := $(BENCH_SRC:bench/%.c=$(BUILD)/bench/%)
$(BUILD)/bench/%: $(BUILD)/bench/%.o $(LIB)
	$(CC) $(CFLAGS) -o $@ $< $(LIB) $(LDLIBS)

bench: $(BENCHES)
	@for b in $(BENCHES); do echo "== $$b"; $$b || exit 1; done

# The same suite under AddressSanitizer + UndefinedBehaviorSanitizer, in its own build folder.
test-asan:
	$(MAKE) BUILD=build-asan OPT=-O1 \
	  CFLAGS="-fsanitize=address,undefined -fno-omit-frame-pointer -fno-sanitize-recover=all" \
	  LDLIBS="-lm -lpthread -ldl -fsanitize=address,undefined" test

# Windows (x86-64): cross-compiled with mingw-w64 into build-win: brasa.exe and the test
# binaries, CPU only (the GPU drivers are loaded at run time; brasa-server stays Linux-only).
# POSIX calls mingw lacks come from src/core/win32 (see posix_compat.h); threads are mingw's
# winpthreads, linked statically like the C runtime, so the .exe files need no DLLs.
# `make test-windows` runs the suite under wine (WINEPREFIX inside build-win).
WIN_CC    ?= x86_64-w64-mingw32-gcc
WIN_BUILD ?= build-win
WIN_FLAGS  = BUILD=$(WIN_BUILD) CC=$(WIN_CC) EXE=.exe SERVER_FOUND= \
  CFLAGS="-D__USE_MINGW_ANSI_STDIO=1 -Isrc/core/win32 -include core/win32/posix_compat.h" \
  LDLIBS="-static -lm -lpthread -lshell32"
WIN_TESTS := $(filter-out %/test_server.exe,$(TEST_SRC:tests/%.c=$(WIN_BUILD)/tests/%.exe))
.PHONY: windows test-windows
windows:
	$(MAKE) $(WIN_FLAGS) $(WIN_BUILD)/brasa.exe $(WIN_TESTS)

test-windows: windows
	@sh tools/wine-test.sh $(WIN_BUILD)

# Two libFuzzer harnesses (clang, ASan + UBSan, the whole engine instrumented), in their own
# build folder. fuzz_gguf: the GGUF parser, from seeds that are the shared .gguf files under 3 MB
# and copies of them with every tensor cut to one row (small files that pass every check), for
# FUZZ_SECONDS. fuzz_model: edits to valid models (keys, arrays, tensor shapes, types, names and
# data) loaded and run as a user's file would be, for FUZZ_MODEL_SECONDS.
FUZZ_SECONDS ?= 60
FUZZ_MODEL_SECONDS ?= 60
FUZZ_DIR := build-fuzz
SHARED   ?= $(or $(BRASA_SHARED),../shared)
FUZZ_FLAGS := BUILD=$(FUZZ_DIR) CC=clang OPT=-O1 \
  CFLAGS="-fsanitize=fuzzer-no-link,address,undefined -fno-omit-frame-pointer -fno-sanitize-recover=all" \
  LDLIBS="-lm -lpthread -ldl -fsanitize=address,undefined"

$(BUILD)/fuzz_%: $(BUILD)/tests/fuzz_%.o $(LIB)
	$(CC) $(CFLAGS) -fsanitize=fuzzer -o $@ $< $(LIB) $(LDLIBS)

fuzz:
	$(MAKE) $(FUZZ_FLAGS) $(FUZZ_DIR)/fuzz_gguf $(FUZZ_DIR)/fuzz_model
	rm -rf $(FUZZ_DIR)/seeds $(FUZZ_DIR)/corpus $(FUZZ_DIR)/corpus-model && \
	  mkdir -p $(FUZZ_DIR)/seeds $(FUZZ_DIR)/corpus $(FUZZ_DIR)/corpus-model
	-find $(SHARED)/fixtures $(SHARED)/models $(SHARED)/vocab -name '*.gguf' -size -3000k \
	  -exec cp {} $(FUZZ_DIR)/seeds/ \; 2>/dev/null
	BRASA_FUZZ_SHRINK_TO=$(FUZZ_DIR)/corpus $(FUZZ_DIR)/fuzz_gguf -runs=0 -max_len=4000000 \
	  $(FUZZ_DIR)/seeds 2>&1 | tail -n 2
	-cp $(FUZZ_DIR)/seeds/* $(FUZZ_DIR)/corpus/ 2>/dev/null
	$(FUZZ_DIR)/fuzz_gguf -max_len=65536 -max_total_time=$(FUZZ_SECONDS) -print_final_stats=1 \
	  -artifact_prefix=$(FUZZ_DIR)/ $(FUZZ_DIR)/corpus
	BRASA_SHARED=$(SHARED) $(FUZZ_DIR)/fuzz_model -max_len=256 -max_total_time=$(FUZZ_MODEL_SECONDS) \
	  -print_final_stats=1 -artifact_prefix=$(FUZZ_DIR)/model- $(FUZZ_DIR)/corpus-model

clean:
	rm -rf build build-asan build-fuzz build-win

format:
	clang-format -i $(SRC) $(CLI_SRC) $(TEST_SRC) $(wildcard src/*/*.h)

-include $(SERVER_OBJ:.o=.d) $(OBJ:.o=.d) $(CLI_OBJ:.o=.d) $(TESTS:=.d) $(TEST_COMMON_OBJ:.o=.d) $(BENCHES:=.d)
