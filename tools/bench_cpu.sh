#!/bin/sh
# CPU speed on synthetic models of real shapes: writes Qwen2.5-0.5B and 1.5B shapes in Q4_K_M
# and Q8_0 with `brasa synth` (into $TMPDIR, removed afterwards), measures the read bandwidth
# with bench_quant (or takes BW=GB/s), and runs `brasa bench` on each file with the decode
# roofline (weight bytes per token / bandwidth).
#   usage: sh tools/bench_cpu.sh [BUILD]     env: BW, PP (64), TG (32), REPS (3), THREADS
set -e
build=${1:-build}
pp=${PP:-64}; tg=${TG:-32}; reps=${REPS:-3}
make -s BUILD="$build" "$build/brasa" "$build/bench/bench_quant" >/dev/null
dir=$(mktemp -d "${TMPDIR:-/tmp}/brasa-bench-XXXXXX")
trap 'rm -rf "$dir"' EXIT INT TERM
if [ -z "$BW" ]; then
  # the first line of bench_quant is the read bandwidth; stop it there
  BW=$("$build/bench/bench_quant" 2>/dev/null | sed -n '/^read bandwidth/{s/.* threads \([0-9.]*\) GB\/s.*/\1/p;q}')
fi
echo "commit $(git rev-parse --short HEAD 2>/dev/null), $(nproc) cores, read bandwidth ${BW} GB/s"
t=${THREADS:+-t $THREADS}
for shape in 0.5b 1.5b; do
  for type in q4_k_m q8_0; do
    f="$dir/qwen2-$shape-$type.gguf"
    "$build/brasa" synth --arch qwen2 --shape "$shape" --type "$type" -o "$f" 2>/dev/null
    echo
    echo "== Qwen2.5-$shape shape, $type"
    "$build/brasa" bench -m "$f" -p "$pp" -n "$tg" -r "$reps" $t --bw "$BW"
    rm -f "$f"
  done
done
