#!/usr/bin/env python3
"""Per-kernel table of one decode step from an ncu CSV (tools/gpu_check.sh profile).

    ncu --csv --metrics "$(tools/ncu_layer.py --metrics)" brasa run ... > step.csv
    tools/ncu_layer.py step.csv [LAYER]

The step is the launches from the first embedding lookup after the last prompt kernel (fa /
matvec / mmt); LAYER (default 1) picks which layer's launches are listed one by one, from its
q/k/v products to its down product (by counting the attention kernels). Prints
each kernel's time, DRAM bytes and bandwidth, issue-slot use, occupancy and its top stall
reasons, then the step's totals per kernel name."""
import collections
import csv
import sys

STALLS = ("long_scoreboard", "no_instruction", "barrier", "wait", "short_scoreboard",
          "lg_throttle", "math_pipe_throttle", "not_selected", "selected", "membar",
          "dispatch_stall", "drain", "imc_miss", "branch_resolving", "mio_throttle", "sleeping")
STALL = "smsp__average_warps_issue_stalled_%s_per_issue_active.ratio"
METRICS = ["gpu__time_duration.sum", "dram__bytes_read.sum", "sm__inst_executed.sum",
           "smsp__issue_active.avg.pct_of_peak_sustained_active",
           "sm__warps_active.avg.pct_of_peak_sustained_active", "launch__grid_size",
           "launch__registers_per_thread"] + [STALL % s for s in STALLS]


def load(path):
    rows = list(csv.reader(open(path, newline="")))
    start = next(i for i, r in enumerate(rows) if r and r[0] == "ID")
    hdr = {h: j for j, h in enumerate(rows[start])}
    kernels = collections.OrderedDict()
    for r in rows[start + 1:]:
        if len(r) < len(hdr):
            continue
        key = (int(r[hdr["ID"]]), r[hdr["Kernel Name"]])
        kernels.setdefault(key, {})[r[hdr["Metric Name"]]] = r[hdr["Metric Value"]].replace(",", "")
    return list(kernels.items())


def num(d, m):
    try:
        return float(d.get(m, "nan"))
    except ValueError:
        return float("nan")


def main():
    if sys.argv[1] == "--metrics":  # what ncu is to measure for this table
        print(",".join(METRICS))
        return
    items = load(sys.argv[1])
    layer = int(sys.argv[2]) if len(sys.argv) > 2 else 1
    last = max((i for i, ((_, n), _) in enumerate(items) if n in ("fa", "matvec", "mmt")),
               default=-1)
    # the step starts at its embedding lookup (the prompt's last row and head come before it)
    first = next((i for i in range(last + 1, len(items)) if items[i][0][1] == "get_rows"), last + 1)
    step = items[first:]
    attn = [i for i, ((_, n), _) in enumerate(step) if n == "attn"]
    if len(attn) <= layer + 1:
        sys.exit("no layer %d in the step (%d attention launches)" % (layer, len(attn)))
    # a layer: from the launch after the previous layer's attention tail to this one's
    a, b = attn[layer] - 3, attn[layer + 1] - 3
    print("| kernel | µs | grid | regs | MB read | GB/s | issue | warps | top stalls per issue |")
    print("|---|---:|---:|---:|---:|---:|---:|---:|---|")
    for (_, n), d in step[a:b]:
        t = num(d, "gpu__time_duration.sum")
        by = num(d, "dram__bytes_read.sum")
        st = sorted(((num(d, STALL % s), s)
                     for s in STALLS), reverse=True)[:3]
        print("| %s | %.2f | %s | %s | %.2f | %.0f | %.0f%% | %.0f%% | %s |" % (
            n, t / 1e3, d.get("launch__grid_size", "?"), d.get("launch__registers_per_thread", "?"),
            by / 1e6, by / t if t else 0, num(d, "smsp__issue_active.avg.pct_of_peak_sustained_active"),
            num(d, "sm__warps_active.avg.pct_of_peak_sustained_active"),
            " ".join("%s %.1f" % (s, v) for v, s in st)))
    tot = collections.defaultdict(lambda: [0, 0.0, 0.0])
    for (_, n), d in step:
        t = tot[n]
        t[0] += 1
        t[1] += num(d, "gpu__time_duration.sum")
        t[2] += num(d, "dram__bytes_read.sum")
    total = sum(v[1] for v in tot.values())
    print("\nstep: %d launches, %.1f µs one after another (no overlap)" % (len(step), total / 1e3))
    for n, (c, t, by) in sorted(tot.items(), key=lambda x: -x[1][1]):
        print("  %-10s %4d launches %8.1f µs (%4.1f%%) %8.1f MB %6.0f GB/s" % (
            n, c, t / 1e3, 100 * t / total, by / 1e6, by / t if t else 0))


if __name__ == "__main__":
    main()
