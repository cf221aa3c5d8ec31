#!/bin/bash
# A kernel template's machine code on a machine with no GPU: registers, spills and the
# instructions of each loop, for one set of template parameters, as a cheap look before a
# device call (tools/gpu_check.sh sass shows the device's own build of what a run loads).
#   tools/sass_local.sh TEMPLATE "NAME=VALUE ..." [ARCH]
#   e.g. tools/sass_local.sh mvd.cu "QT=12 NR=2 U=1 GLU=1 AL=1 KP=64" 90
# The PTX comes from the local nvcc (the CUDA toolkit's, as NVRTC would make it); the SASS
# from an older ptxas and nvdisasm (CUDA 11.8, the newest that Debian packages), because the
# toolkit's own cuobjdump and nvdisasm are not installed here and 11.8's tools cannot read
# newer cubins. So the counts are those of an older register allocator on the same PTX: close,
# not exact. The 11.8 tools come from Debian's non-free nvidia-cuda-toolkit package, fetched
# once with apt-get download (no install, no change to the system's sources) into
# $BRASA_SASS_TOOLS (default ~/.cache/brasa/cuda-11.8). Files go to $OUT (default
# /tmp/sass_local): NAME.cu (the rendered source), .ptx, .cubin, .sass.
set -eu
[ $# -ge 2 ] || { sed -n '5,6p' "$0"; exit 2; }
tmpl=$1 defs=$2 arch=${3:-90}
here=$(cd "$(dirname "$0")/.." && pwd)
kdir=$here/src/gpu/kernels
[ -f "$kdir/$tmpl" ] || { echo "no template $kdir/$tmpl" >&2; exit 2; }
command -v nvcc >/dev/null || { echo "nvcc not found (the CUDA toolkit's compiler)" >&2; exit 2; }
tools=${BRASA_SASS_TOOLS:-$HOME/.cache/brasa/cuda-11.8}
if [ ! -x "$tools/usr/bin/nvdisasm" ]; then
  mkdir -p "$tools/apt/lists/partial" "$tools/apt/cache/archives/partial"
  printf 'deb http://deb.debian.org/debian bookworm non-free\n' >"$tools/apt/sources.list"
  ao=(-o "Dir::Etc::sourcelist=$tools/apt/sources.list" -o Dir::Etc::sourceparts=-
    -o "Dir::State::Lists=$tools/apt/lists" -o "Dir::Cache=$tools/apt/cache"
    -o APT::Sandbox::User=root)
  apt-get "${ao[@]}" update >/dev/null
  (cd "$tools" && apt-get "${ao[@]}" download nvidia-cuda-toolkit >/dev/null)
  dpkg -x "$tools"/nvidia-cuda-toolkit_*.deb "$tools"
  rm -f "$tools"/nvidia-cuda-toolkit_*.deb
fi
out=${OUT:-/tmp/sass_local}
mkdir -p "$out"
name=$(basename "$tmpl" .cu)-$(printf '%s' "$defs" | md5sum | cut -c1-8)
# the defines first, as jit_render writes them; nvcc includes its runtime header before the
# file, so template parameter names do not clash with it
{
  for d in $defs; do echo "#define ${d%%=*} ${d#*=}"; done
  echo "#include \"$tmpl\""
} >"$out/$name.cu"
nvcc -ptx -arch=sm_"$arch" -I"$kdir" -o "$out/$name.ptx" "$out/$name.cu" 2>"$out/$name.log" ||
  { cat "$out/$name.log" >&2; exit 1; }
sed -i 's/^\.version .*/.version 7.8/' "$out/$name.ptx" # (what ptxas 11.8 reads)
"$tools/usr/bin/ptxas" -arch=sm_"$arch" -v -o "$out/$name.cubin" "$out/$name.ptx" 2>&1 |
  grep -E 'Compiling entry|registers|spill'
"$tools/usr/bin/nvdisasm" -c "$out/$name.cubin" >"$out/$name.sass"
# per backward branch to a label (a loop): the instructions from the label to the branch
awk 'function hex(h,  v, i) { v = 0; h = tolower(h)
       for (i = 1; i <= length(h); i++) v = v * 16 + index("0123456789abcdef", substr(h, i, 1)) - 1
       return v }
  /^\.L_x_[0-9]+:/ { l = $1; sub(/:$/, "", l); want[l] = 1; next }
  /\/\*[0-9a-f]+\*\// { s = $0; sub(/^[^\/]*\/\*/, "", s); sub(/\*\/.*/, "", s); pc = hex(s); n++
    for (l in want) { at[l] = pc; delete want[l] }
    if ($0 ~ / BRA /) { t = $0; sub(/.*`\(/, "", t); sub(/\).*/, "", t)
      if ((t in at) && at[t] < pc) printf "loop %s: %d instructions\n", t, (pc - at[t]) / 16 + 1 } }
  END { printf "%d instructions in all (%s)\n", n, FILENAME }' "$out/$name.sass"
