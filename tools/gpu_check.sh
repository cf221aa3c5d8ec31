#!/usr/bin/env bash
# The GPU checks and benchmarks, run on a machine with an NVIDIA GPU, from the repo root:
#   tools/gpu_check.sh [quick|full]   (BRASA_SHARED: the fixtures, default ../shared)
#   AB="BRASA_X=0 BRASA_X=1,BRASA_Y=2" tools/gpu_check.sh ab   (tg128 of each setting, same call;
#                                     AB_P=512: pp512 too)
#   tools/gpu_check.sh profile        (ncu: each kernel of one decode step, one layer's table)
#   tools/gpu_check.sh timeline       (inside the captured graph: time per kernel name, and
#                                      one step launch by launch in $OUT/tl_*.txt)
#   tools/gpu_check.sh sass           (the decode products' machine code: each mvd variant a
#                                      decode step loads, its defines and the instructions of
#                                      its loops; sources and SASS in $OUT/kernels)
#   LLAMA_BENCH=path/to/llama-bench tools/gpu_check.sh vs
#                                     (llama.cpp's llama-bench on the same files and GPU, between
#                                      two brasa runs: pp512 and tg128, flash attention off and on;
#                                      FILES default "7b,q4_k_m 7b,q8_0 1.5b,q4_k_m 1.5b,q8_0")
#   tools/gpu_check.sh tp             (tensor parallelism: tg128/pp512 with --gpus N for N in
#                                      GPUS, default 1 2 4 8 up to the GPUs present, against
#                                      one GPU; FILES default "7b,q4_k_m 32b,q4_k_m")
# ab, profile, timeline, sass, vs and tp only build brasa and use FILES (default "7b,q4_k_m 1.5b,q4_k_m";
# a shape of Qwen2.5's, or "arch/shape" for another family's: FILES="qwen35/4b,q4_k_m").
# Builds brasa, runs the GPU tests (fixtures vs goldens and vs the CPU backend, graph == eager),
# compute-sanitizer memcheck/racecheck on a prefill and decode steps, the kernel benchmark
# (copy roofline, matvec bandwidth per format) and, in `full`, tg128/pp512 on synthetic
# Qwen2.5 files made here with `brasa synth` (and a Qwen3.5-4B-shaped one), with per-kernel
# profiles, load times and the prompt attention kernels' logits against the CPU backend
# (heads of 128, and 256 on a tiny qwen35). Logs go to $OUT
# (or /tmp/gpu_check); a short table is printed last.
set -u
mode=${1:-quick}
out=${OUT:-/tmp/gpu_check}
mkdir -p "$out"
export BRASA_CACHE=${BRASA_CACHE:-/tmp/brasa-kcache}
B=build-dev
J=$(nproc)
summary=()
note() { summary+=("$1"); echo "== $1"; }
step() { local t0=$SECONDS; "$@"; local rc=$?; echo "   ($((SECONDS - t0)) s, rc $rc)"; return $rc; }

nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.sm,clocks.mem --format=csv,noheader \
  | tee "$out/gpu.txt"
case $mode in ab | profile | timeline | sass | tp | vs) lean=1 ;; *) lean=0 ;; esac # brasa alone
[ $lean = 1 ] || step make -s BUILD=$B -j"$J" $B/tests/test_gpu $B/tests/test_gpu_compile $B/bench/bench_gpu \
  >"$out/build.log" 2>&1 || { tail -30 "$out/build.log"; note "build of tests FAILED"; }
step make -s BUILD=$B -j"$J" $B/brasa >>"$out/build.log" 2>&1 || note "build of brasa failed (see build.log)"

# a synthetic file of a shape and type ("7b q4_k_m": Qwen2.5's; "qwen35/4b q4_k_m": another
# family's), made once, into $f (run in this shell, not in $(...), so that a failure's note
# reaches the summary). FILES takes the same: "qwen35/4b,q4_k_m qwen3/8b,q4_k_m".
synth() {
  local arch=qwen2 shape=$1
  case $1 in */*) arch=${1%%/*} shape=${1#*/} ;; esac
  f=/tmp/synth/$arch-$shape-$2.gguf
  mkdir -p /tmp/synth
  [ -f "$f" ] || $B/brasa synth --arch "$arch" --shape "$shape" --type "$2" -o "$f" -t "$J" \
    >"$out/synth.log" 2>&1 || { note "synth $1 $2 failed: $(tail -2 "$out/synth.log")"; return 1; }
}

if [ "$mode" = tp ]; then
  export NCCL_NVLS_ENABLE=0 # (NVLink multicast stays off)
  ngpu=$(nvidia-smi -L | wc -l)
  for spec in ${FILES:-7b,q4_k_m 32b,q4_k_m}; do
    set -- ${spec/,/ }
    tag=${1//\//-}_$2 # (the file's part of the logs' names)
    synth "$1" "$2" || continue
    one=$($B/brasa bench -m "$f" -p 512 -n 128 -r 3 2>&1 | grep -E 'pp512|tg128' | awk -F'|' '{printf "%s ", $8}')
    read -r pp1 tg1 <<<"$(echo "$one" | awk '{print $1, $4}')"
    note "tp $1 $2, one GPU: pp512 $pp1, tg128 $tg1"
    for n in ${GPUS:-1 2 4 8}; do
      [ "$n" -le "$ngpu" ] || continue
      $B/brasa inspect "$f" --plan --gpus "$n" >"$out/plan_${tag}_$n.txt" 2>&1
      r=$($B/brasa bench --gpus "$n" -m "$f" -p 512 -n 128 -r 3 2>&1 | grep -E 'pp512|tg128|rror' | awk -F'|' '{printf "%s ", $8}')
      read -r ppn tgn <<<"$(echo "$r" | awk '{print $1, $4}')"
      eff=$(awk -v a="$tgn" -v b="$tg1" -v n="$n" 'BEGIN{if (b > 0) printf "%.2fx one GPU, %.0f%% of linear scaling", a / b, 100 * a / b / n}')
      note "tp $1 $2, --gpus $n: pp512 $ppn, tg128 $tgn ($eff) $(grep -m1 -i 'not split' "$out/plan_${tag}_$n.txt")"
    done
  done
  echo
  echo "================ summary ($mode)"
  for s in "${summary[@]}"; do echo "- $s"; done
  exit 0
fi

if [ $lean = 1 ]; then # (tp has returned above)
  [ "$mode" = vs ] && { [ -x "${LLAMA_BENCH:-}" ] || { echo "vs: set LLAMA_BENCH to llama.cpp's llama-bench"; exit 2; }; }
  [ "$mode" = vs ] && FILES=${FILES:-7b,q4_k_m 7b,q8_0 1.5b,q4_k_m 1.5b,q8_0}
  for spec in ${FILES:-7b,q4_k_m 1.5b,q4_k_m}; do
    set -- ${spec/,/ }
    tag=${1//\//-}_$2 # (the file's part of the logs' names)
    synth "$1" "$2" || continue
    if [ "$mode" = vs ]; then
      # t/s is the last column of both tables; brasa before and after llama.cpp
      col() { grep -E "$1" | awk -F'|' '{v = $(NF - 1); gsub(/^ +| +$/, "", v); printf "%s; ", v}'; }
      b1=$($B/brasa bench -m "$f" -p 512 -n 128 -r 3 2>&1)
      l=$("$LLAMA_BENCH" -m "$f" -p 512 -n 128 -r 3 -ngl 99 -fa 0,1 2>&1)
      b2=$($B/brasa bench -m "$f" -p 0 -n 128 -r 3 2>&1)
      echo "$b1"; echo "$l"; echo "$b2"
      note "vs $1 $2: pp512 brasa $(echo "$b1" | col pp512)| llama.cpp fa 0, 1: $(echo "$l" | col pp512)"
      note "vs $1 $2: tg128 brasa $(echo "$b1" | col tg128)$(echo "$b2" | col tg128)| llama.cpp fa 0, 1: $(echo "$l" | col tg128)"
    elif [ "$mode" = ab ]; then
      for cfg in ${AB:-BRASA_GPU_PDL=1}; do
        r=$(env ${cfg//,/ } $B/brasa bench -m "$f" -p "${AB_P:-0}" -n 128 -r 3 2>&1 |
          grep -E 'pp[0-9]|tg128' | awk -F'|' '{printf "%s %s; ", $7, $8}')
        note "$1 $2 [$cfg]: $r"
      done
    elif [ "$mode" = sass ]; then
      # each module the run loads, kept (BRASA_GPU_KEEP) with its rendered source; for mvd, the
      # defines, and per backward branch (a loop) the instructions from its target to it
      kd="$out/kernels/$tag"
      rm -rf "$kd"
      BRASA_GPU_KEEP="$kd" $B/brasa bench -m "$f" -p 0 -n 4 -r 1 >/dev/null 2>&1
      for c in "$kd"/mvd-*.cubin; do
        [ -f "$c" ] || continue
        cuobjdump -sass "$c" >"${c%.cubin}.sass" 2>&1
        defs=$(awk '/^#line/ {exit} /^#define/ {printf "%s=%s ", $2, $3}' "${c%.cubin}.cu")
        loops=$(awk 'function hex(h,  v, i) { v = 0; for (i = 1; i <= length(h); i++)
              v = v * 16 + index("0123456789abcdef", substr(h, i, 1)) - 1; return v }
          /\/\*[0-9a-f][0-9a-f][0-9a-f][0-9a-f]+\*\// { s = $0; sub(/^[^\/]*\/\*/, "", s); sub(/\*\/.*/, "", s);
            pc = hex(s); n++
            if ($0 ~ / BRA /) for (i = 1; i <= NF; i++) if ($i ~ /^0x[0-9a-f]+/) {
              t = $i; sub(/^0x/, "", t); sub(/[^0-9a-f].*/, "", t); t = hex(t)
              if (t < pc) printf "%d ", (pc - t) / 16 + 1 } }
          END { printf "(%d in all)", n }' "${c%.cubin}.sass")
        note "sass $1 $2 $(basename "${c%.cubin}"): $defs| loops: $loops"
      done
    elif [ "$mode" = timeline ]; then
      BRASA_GPU_TIMELINE=2 $B/brasa bench -m "$f" -p 0 -n 128 -r 3 >"$out/tl_$tag.txt" 2>&1
      grep -A16 "GPU timeline" "$out/tl_$tag.txt"
      # the listed step by launch (kernel and node name without its layer), over the layers
      grep "brasa: timeline" "$out/tl_$tag.txt" | awk '{n = $5; sub(/blk\.[0-9]+\./, "", n);
        k = $4 " " n; s[k] += $6; c[k]++; t += $6}
        END {for (k in s) printf "  %-34s %3d x %8.2f us = %8.1f us\n", k, c[k], s[k] / c[k], s[k];
             printf "  step %.1f us\n", t}' | sort -t= -k2 -n -r
      note "timeline $1 $2: $(grep -m1 'GPU timeline' "$out/tl_$tag.txt" | sed 's/.*: //')"
    else
      BRASA_GPU_GRAPH=0 step ncu --clock-control none --cache-control none --csv \
        --metrics "$(python3 tools/ncu_layer.py --metrics)" \
        $B/brasa run -m "$f" -p "word" -n 2 --temp 0 --ignore-eos >"$out/ncu_$tag.csv" 2>"$out/ncu_$tag.err"
      python3 tools/ncu_layer.py "$out/ncu_$tag.csv" 2 | tee "$out/ncu_$tag.txt"
      note "ncu $1 $2: $(grep -m1 '^step:' "$out/ncu_$tag.txt")"
    fi
  done
  echo
  echo "================ summary ($mode)"
  for s in "${summary[@]}"; do echo "- $s"; done
  exit 0
fi

if [ -x $B/bench/bench_gpu ]; then
  step $B/bench/bench_gpu $([ "$mode" = quick ] && echo --quick) 2>"$out/bench_gpu.err" \
    | tee "$out/bench_gpu.txt"
  grep "^|" "$out/bench_gpu.txt" >/dev/null && note "bench_gpu: see table above"
fi
if [ -x $B/tests/test_gpu ]; then
  step $B/tests/test_gpu >"$out/test_gpu.txt" 2>&1
  cat "$out/test_gpu.txt" | tail -60
  note "test_gpu: $(tail -1 "$out/test_gpu.txt")"
  while IFS= read -r l; do note "  $l"; done < <(grep -E "check failed|FAIL|worst|GPU vs golden|GPU vs CPU" "$out/test_gpu.txt" | head -40)
fi
if [ -x $B/tests/test_gpu_compile ]; then
  BRASA_TEST_THREADS=$J step $B/tests/test_gpu_compile >"$out/compile.txt" 2>&1
  note "test_gpu_compile: $(grep -m1 NVRTC "$out/compile.txt") $(tail -1 "$out/compile.txt")"
fi

shared=${BRASA_SHARED:-../shared}
# Q4_K_M: the prompt through the dequantized tensor-core tiles (BRASA_GPU_MMT_MIN, _DQ);
# Q8_0: decode products that convert their own activation (mvd.cu XC)
if [ -z "${SKIP_SAN:-}" ] && [ -x $B/brasa ] && command -v compute-sanitizer >/dev/null; then
  # (qwen3 and qwen35: the rope launch with the head norms, reading q's view in place;
  # qwen35's DeltaNet and the gated norm in quant_act)
  for fq in llama.Q4_K_M llama.Q8_0 qwen3.Q4_K_M qwen35.Q4_K_M; do
    fx=$shared/fixtures/$fq.gguf
    [ -f "$fx" ] || continue
    for tool in memcheck racecheck; do
      for g in ${SAN_GRAPH_MODES:-1 0}; do
        san="$out/san_${tool}_${fq}_$g.txt"
        BRASA_VERBOSE=1 BRASA_GPU_GRAPH=$g BRASA_GPU_MMT_MIN=2 BRASA_GPU_MMT_DQ=2 \
          step compute-sanitizer --tool $tool --error-exitcode 9 \
          $B/brasa run -m "$fx" -p "The quick brown fox jumps over the lazy dog" -n 4 --temp 0 \
          >"$san" 2>&1
        rc=$?
        note "compute-sanitizer $tool ($fq, graph=$g, prefill on the tensor cores + 4 decode steps): rc $rc, $(grep -c 'GPU plan' "$san") GPU plans, $(grep -m1 -E 'ERROR SUMMARY|RACECHECK SUMMARY' "$san")"
      done
    done
  done
  # the prompt tiles of 128 rows the fixtures' rows of 64 never reach (F16 / BF16 and the
  # dequantized ones; on sm_90 Hopper's warpgroup products): a synthesized qwen2 with heads of
  # 128, a 300-token prompt on them (three tiles of tokens, the last part-filled)
  for t in f16 q4_k_m q8_0; do
    synth tiny128 $t || continue
    for tool in memcheck racecheck; do
      san="$out/san_${tool}_tiny128_$t.txt"
      BRASA_GPU_MMT_MIN=2 step compute-sanitizer --tool $tool --error-exitcode 9 \
        $B/brasa run -m "$f" --ids "$(seq -s, 1000 1299)" -n 4 --temp 0 >"$san" 2>&1
      note "compute-sanitizer $tool (tiny128 $t, a 300-token prompt on the 128-row tiles + 4 decode steps): rc $?, $(grep -m1 -E 'ERROR SUMMARY|RACECHECK SUMMARY' "$san")"
    done
  done
  # the sampler's candidates at top-k 40 (topk_part and topk: the radix select and its sort;
  # greedy runs take the one max reduction)
  fx=$shared/fixtures/llama.Q4_K_M.gguf
  if [ -f "$fx" ]; then
    san="$out/san_racecheck_topk.txt"
    step compute-sanitizer --tool racecheck --error-exitcode 9 $B/brasa run -m "$fx" \
      -p "The quick brown fox" -n 4 --temp 0.8 --top-k 40 --seed 3 >"$san" 2>&1
    note "compute-sanitizer racecheck (Q4_K_M, sampler candidates at top-k 40): rc $?, $(grep -m1 'RACECHECK SUMMARY' "$san")"
  fi
fi

# prompt attention on the tensor cores (fa.cu) and the per-token kernel against the CPU
# backend: the logits of a 150-token prompt (every 7th row; token ids below $2) of file $1, as
# one line; the environment given after them applies to the GPU runs
fa_vs_cpu() {
  local file=$1 nv=$2 v ids
  shift 2
  ids=$(python3 -c "print(','.join(str((i*2654435761+7)%$nv) for i in range(150)))")
  for v in fa1 fa0 cpu; do
    env "$@" BRASA_GPU_FA=${v#fa} $([ $v = cpu ] && echo BRASA_GPU=none) timeout 300 \
      $B/brasa logits -m "$file" --ids "$ids" --kv-type f16 -t "$J" -o "/tmp/logits_$v.f32" \
      >/dev/null 2>&1
  done
  python3 - <<'PY'
from array import array
import os
def load(p):
    a = array('f')
    with open(p, 'rb') as f:
        a.fromfile(f, os.path.getsize(p) // 4)
    return a
a1, a0, c = load('/tmp/logits_fa1.f32'), load('/tmp/logits_fa0.f32'), load('/tmp/logits_cpu.f32')
T = 150
nv = len(c) // T
def rel(x, y):
    w = 0.0
    for t in range(0, T, 7):
        xs, ys = x[t * nv:(t + 1) * nv], y[t * nv:(t + 1) * nv]
        w = max(w, max(abs(p - q) for p, q in zip(xs, ys)) / max(abs(v) for v in ys))
    return w
print("fa.cu vs CPU %.2e, per-token kernel vs CPU %.2e, fa.cu vs per-token %.2e"
      % (rel(a1, c), rel(a0, c), rel(a1, a0)))
PY
}

if [ "$mode" = full ] && [ -x $B/brasa ]; then
  for spec in "qwen2 1.5b q4_k_m" "qwen2 7b q4_k_m" "qwen2 7b q8_0" "qwen2 1.5b q8_0" "qwen2 1.5b f16" \
    "qwen35 4b q4_k_m"; do
    set -- $spec
    [ $SECONDS -gt ${BUDGET_S:-420} ] && { note "skipped $spec (time)"; continue; }
    synth "$1/$2" "$3" || continue
    rm -rf "$BRASA_CACHE"  # cold kernel cache for the first load
    $B/brasa bench -m "$f" -p 512 -n 128 -r 3 --gen >"$out/bench_$2_$3.txt" 2>&1
    cat "$out/bench_$2_$3.txt"
    note "bench $spec: $(grep -E 'pp512|tg128|gen128' "$out/bench_$2_$3.txt" | awk -F'|' '{printf "%s %s; ", $7, $8}')$(grep -m1 'on the GPU' "$out/bench_$2_$3.txt")"
    # decode without programmatic dependent launch, for comparison
    BRASA_GPU_PDL=0 $B/brasa bench -m "$f" -p 0 -n 128 -r 2 >"$out/benchnopdl_$2_$3.txt" 2>&1
    note "bench $spec without PDL: $(grep -E 'tg128' "$out/benchnopdl_$2_$3.txt" | awk -F'|' '{printf "%s %s; ", $7, $8}')"
    if [ "$3" = q4_k_m ] && [ "$1" = qwen2 ] && command -v python3 >/dev/null; then
      # prompt attention on the tensor cores (fa.cu, heads of 128 here) and the per-token
      # kernel, each against the CPU backend
      note "attention, $spec, 150-token prompt, largest |a - b| / max |b| per row: $(fa_vs_cpu "$f" 150000)"
    fi
    if [ "$3" = q4_k_m ] && [ "$1" = qwen2 ]; then
      # the sampler's candidates chosen on the device (top-k kernel) against the whole row sent
      # to the host (BRASA_GPU_TOPK=0): the same text, and the generation speed of each
      for t in 0 0.8; do
        for k in 1 0; do
          BRASA_GPU_TOPK=$k $B/brasa run -m "$f" -p "word word word" -n 64 --temp $t --seed 7 \
            --ignore-eos >"/tmp/gen_$k.txt" 2>"/tmp/gen_$k.err"
        done
        note "device candidates, $spec, temp $t: $(cmp -s /tmp/gen_1.txt /tmp/gen_0.txt && echo same text || echo TEXT DIFFERS); generate tok/s on device / whole row: $(grep -m1 generate /tmp/gen_1.err | awk '{print $7}') / $(grep -m1 generate /tmp/gen_0.err | awk '{print $7}')"
      done
      # what the captured decode step costs without each kind of kernel (BRASA_GPU_OMIT: the
      # results are wrong, the time is what those launches cost with PDL, inside the graph)
      for k in quant_act rope attn; do
        BRASA_GPU_OMIT=$k $B/brasa bench -m "$f" -p 0 -n 128 -r 2 >"/tmp/omit_$k.txt" 2>&1
      done
      note "tg128 $spec without quant_act / rope / attn: $(for k in quant_act rope attn; do grep tg128 /tmp/omit_$k.txt | awk -F'|' '{printf "%s\n", $8}'; done | paste -sd/)"
      # where the time goes, kernel by kernel: decode, then a prompt
      BRASA_GPU_PROFILE=1 $B/brasa run -m "$f" -p "word" -n 64 --temp 0 --ignore-eos \
        >/dev/null 2>"$out/prof_$2_$3.txt"
      BRASA_GPU_PROFILE=1 $B/brasa run -m "$f" -p "$(printf 'word %.0s' $(seq 500))" -n 1 \
        --temp 0 >/dev/null 2>"$out/profp_$2_$3.txt"
      for w in prof profp; do
        grep -A14 "GPU profile" "$out/${w}_$2_$3.txt"
        while IFS= read -r l; do note "  $w $2 $3: $l"; done < <(grep -A$([ $w = prof ] && echo 12 || echo 8) "GPU profile" "$out/${w}_$2_$3.txt")
      done
    fi
    for c in cold warm; do
      [ $c = cold ] && rm -rf "$BRASA_CACHE"
      s0=$(date +%s%N)
      BRASA_VERBOSE=1 $B/brasa run -m "$f" -p "$(printf 'word %.0s' $(seq 16))" -n 1 --temp 0 \
        >"$out/run_$2_$3_$c.txt" 2>&1
      s1=$(date +%s%N)
      note "$spec $c kernel cache: run (load + prompt + 1 token) $(( (s1 - s0) / 1000000 )) ms wall; $(grep -m1 'kernels:' "$out/run_$2_$3_$c.txt" | cut -c8-240); $(grep -m1 -iE 'prompt' "$out/run_$2_$3_$c.txt" | tr -s ' ' | cut -c1-80)"
    done
  done
  # the same over heads of 256 (qwen35's; fa.cu there by default), on a
  # synthesized qwen35 whose second layer is gated attention with heads of 256
  if command -v python3 >/dev/null && synth qwen35/tiny256 q8_0; then
    note "attention, qwen35 tiny256 q8_0 (heads of 256), 150-token prompt: $(fa_vs_cpu "$f" 4000)"
  fi
fi

echo
echo "================ summary ($mode)"
for s in "${summary[@]}"; do echo "- $s"; done
