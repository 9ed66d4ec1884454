#!/usr/bin/env python3
"""Turn bench/guest.sh results into a Markdown table and an SVG plot.

Input lines: "<round> <scheduler> <workload> <metric> <value>".
Output: OUTDIR/latest.md and OUTDIR/latest.svg.
"""
import argparse
import os
import statistics
import sys
from collections import defaultdict

ORDER = ["eevdf", "gmp", "gmp-user", "bpfland", "rustland"]
NAMES = {
    "eevdf": "EEVDF (default)",
    "gmp": "scx_gmp",
    "gmp-user": "scx_gmp --mode user",
    "bpfland": "scx_bpfland",
    "rustland": "scx_rustland",
    "base": "scx_gmp (--base-dir)",
    "base-user": "scx_gmp --mode user (--base-dir)",
}


def for_variant(s):
    """A variant "gmp+go-handoff+slice-us=5000": scx_gmp --go-handoff --slice-us=5000;
    "gmp-user+go-handoff": scx_gmp --mode user --go-handoff."""
    base, *opts = s.split("+")
    return NAMES.get(base, base) + " " + " ".join("--" + o for o in opts)


def label(s):
    """How the report names scheduler s: its name, or its variant's options."""
    return NAMES[s] if s in NAMES else for_variant(s)

# Metrics where more is better; every other one is better when lower.
HIGHER_BETTER = {"bogo_ops_per_s", "req_per_s", "sent_per_s", "ops_per_s"}
# The headline metric of each workload, for the plot.
HEADLINE = {
    "stress-cpu": "bogo_ops_per_s",
    "stress-idle": "bogo_ops_per_s",
    "stress-sock": "bogo_ops_per_s",
    "hackbench-pipe": "time_s",
    "hackbench-sock": "time_s",
    "perf-pipe": "usecs_per_op",
    "perf-messaging": "time_s",
    "fanout": "makespan_ms",
    "forkjoin": "makespan_ms",
    "pingpong": "rtt_p50_us",
    "pingpong-idle": "rtt_p99_us",
    "perf-pipe-idle": "usecs_per_op",
    "request-light": "wake_p99_us",
    "request-over": "req_p99_us",
    "cyclictest": "lat_p99_us",
    "cyclictest-idle": "lat_p99_us",
    "maplock": "ops_per_s",
}
COLORS = ["#888888", "#1f77b4", "#17becf", "#ff7f0e", "#2ca02c"]


def load(path):
    data = defaultdict(list)  # (workload, metric, sched) -> [values]
    for line in open(path):
        parts = line.split()
        if len(parts) != 5:
            continue
        _, sched, workload, metric, value = parts
        try:
            data[(workload, metric, sched)].append(float(value))
        except ValueError:
            pass
    return data


def fmt(x):
    if x >= 1000:
        return f"{x:,.0f}"
    if x >= 10:
        return f"{x:.1f}"
    return f"{x:.3g}"


def load_died(path):
    """bench/guest.sh's died.txt beside the results: "<round> <scheduler>
    <why>" for each peer that did not survive a round (and sat out the
    rest)."""
    try:
        lines = open(path).read().splitlines()
    except FileNotFoundError:
        return []
    fields = (l.split(" ", 2) for l in lines)
    return [tuple(f) for f in fields if len(f) == 3]


def died_notes(died, reps):
    def kept(r):
        return "it has no numbers" if r == 1 else f"its numbers are from rounds 1 to {r - 1}"
    return [f"**{NAMES.get(s, s)} did not survive round {r} of {reps}** ({why}): {kept(int(r))}, "
            "and it sat out the rounds after.\n" for r, s, why in died]


def table(data, scheds, vm, quick, died=()):
    rows = sorted({(w, m) for (w, m, _) in data}, key=lambda k: (list(HEADLINE).index(k[0]) if k[0] in HEADLINE else 99, k[1]))
    out = []
    out.append(f"VM: {vm}. Emulated timings compare only within one run.\n")
    if quick:
        out.append("**Quick smoke run (one short round): not a result.**\n")
    rounds = max((len(v) for v in data.values()), default=0)
    out.append(f"Median of {rounds} round(s), min-max in brackets; the ratio is to EEVDF's median "
               "(above 1 is better for bogo-ops/s, req/s and ops/s, below 1 is better for everything else).\n")
    out.extend(died_notes(died, rounds))
    out.append("| workload | metric | " + " | ".join(label(s) for s in scheds) + " |")
    out.append("|---|---|" + "---|" * len(scheds))
    for w, m in rows:
        base = data.get((w, m, "eevdf"))
        base_med = statistics.median(base) if base else None
        cells = []
        for s in scheds:
            v = data.get((w, m, s))
            if not v:
                cells.append("-")
                continue
            med = statistics.median(v)
            cell = f"{fmt(med)} [{fmt(min(v))}-{fmt(max(v))}]"
            if base_med and s != "eevdf":
                cell += f" ×{med / base_med:.2f}"
            cells.append(cell)
        out.append(f"| {w} | {m} | " + " | ".join(cells) + " |")
    out.extend(few_wakes(data, scheds))
    out.append(overhead(data, scheds))
    return "\n".join(out) + "\n"


# Fewer wakeups a run than this, and a workload's wakeup percentiles are the
# worst few of a handful: the overloaded request load wakes its workers only
# as the backlog fills and drains, some 20 times a run (EEVDF once counted 0).
FEW_WAKES = 100


def few_wakes(data, scheds):
    """A note under the table for each workload whose wakeup latencies come
    from fewer than FEW_WAKES wakeups a run under some scheduler."""
    notes = []
    for w in sorted({w for (w, m, _) in data if m == "wakes"}):
        meds = {s: statistics.median(v) for s in scheds if (v := data.get((w, "wakes", s)))}
        if meds and min(meds.values()) < FEW_WAKES:
            counts = ", ".join(f"{label(s)} {n:,.0f}" for s, n in meds.items())
            notes.append(f"\n{w}: its wakeup latencies come from few wakeups a run (median: {counts}); "
                         f"under {FEW_WAKES} a p99 is the worst one or two, not a tail.")
    return notes


def overhead(data, scheds):
    """Each sched_ext scheduler's own CPU per workload (ms per second: its
    agent process plus its BPF programs), with the user mode's against the
    BPF mode's where both ran."""
    cols = [s for s in scheds if s != "eevdf"]
    both = "gmp" in cols and "gmp-user" in cols
    head = " | ".join(label(s) for s in cols)
    lines = ["", "Scheduler overhead (CPU ms per second: the agent process and its BPF programs):", "",
             f"| workload | {head} |" + (" user / BPF |" if both else ""),
             "|---|" + "---|" * (len(cols) + both)]
    for w in ["idle", *HEADLINE]:
        meds = {s: statistics.median(v) for s in cols if (v := data.get((w, "sched_cpu_ms_per_s", s)))}
        if not meds:
            continue
        cells = [fmt(meds[s]) if s in meds else "-" for s in cols]
        if both:
            b, u = meds.get("gmp"), meds.get("gmp-user")
            cells.append(f"×{u / b:.1f}" if b and u is not None else "-")
        lines.append(f"| {w} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def svg(data, scheds, vm):
    """Grouped bars: each workload's headline metric, as speed relative to
    EEVDF (EEVDF = 1; above 1 is better, whichever way the metric goes)."""
    groups = []
    for w, m in HEADLINE.items():
        base = data.get((w, m, "eevdf"))
        if not base:
            continue
        bm = statistics.median(base)
        bars = []
        for s in scheds:
            v = data.get((w, m, s))
            if not v or not bm:
                bars.append(None)
                continue
            med = statistics.median(v)
            rel = med / bm if m in HIGHER_BETTER else (bm / med if med else None)
            bars.append(rel)
        groups.append((f"{w}", m, bars))
    W, H, left, top, bottom = 900, 420, 60, 50, 90
    plot_w, plot_h = W - left - 20, H - top - bottom
    vmax = max([b for _, _, bs in groups for b in bs if b] + [1.0]) * 1.1
    bw = plot_w / max(len(groups), 1)
    barw = bw * 0.8 / max(len(scheds), 1)
    y = lambda v: top + plot_h - v / vmax * plot_h
    e = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{W}" height="{H}" font-family="sans-serif" font-size="12">',
         f'<rect width="{W}" height="{H}" fill="white"/>',
         f'<text x="{W/2}" y="20" text-anchor="middle" font-size="15">Speed relative to EEVDF (higher is better)</text>',
         f'<text x="{W/2}" y="36" text-anchor="middle" font-size="10" fill="#555">{vm}</text>']
    for t in [0.5 * i for i in range(int(vmax / 0.5) + 1)]:
        e.append(f'<line x1="{left}" x2="{W-20}" y1="{y(t):.1f}" y2="{y(t):.1f}" stroke="#ddd"/>')
        e.append(f'<text x="{left-6}" y="{y(t)+4:.1f}" text-anchor="end">{t:.1f}</text>')
    e.append(f'<line x1="{left}" x2="{W-20}" y1="{y(1):.1f}" y2="{y(1):.1f}" stroke="#444" stroke-dasharray="4"/>')
    for gi, (w, m, bars) in enumerate(groups):
        x0 = left + gi * bw + bw * 0.1
        for si, b in enumerate(bars):
            if b is None:
                continue
            x = x0 + si * barw
            e.append(f'<rect x="{x:.1f}" y="{y(b):.1f}" width="{barw*0.9:.1f}" height="{top+plot_h-y(b):.1f}" fill="{COLORS[si % len(COLORS)]}"><title>{label(scheds[si])}: {b:.2f}</title></rect>')
        e.append(f'<text x="{left + gi*bw + bw/2:.1f}" y="{top+plot_h+16}" text-anchor="middle">{w}</text>')
        e.append(f'<text x="{left + gi*bw + bw/2:.1f}" y="{top+plot_h+30}" text-anchor="middle" font-size="9" fill="#555">{m}</text>')
    for si, s in enumerate(scheds):
        lx = left + si * 165
        e.append(f'<rect x="{lx}" y="{H-28}" width="12" height="12" fill="{COLORS[si % len(COLORS)]}"/>')
        e.append(f'<text x="{lx+16}" y="{H-18}">{label(s)}</text>')
    e.append("</svg>")
    return "\n".join(e) + "\n"


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("results")
    ap.add_argument("outdir")
    ap.add_argument("--vm", default="?")
    ap.add_argument("--quick", action="store_true")
    a = ap.parse_args()
    data = load(a.results)
    died = load_died(os.path.join(os.path.dirname(a.results), "died.txt"))
    if not data:
        sys.exit(f"bench/report.py: error: no results in {a.results}")
    seen = []
    for k in data:
        if k[2] not in seen:
            seen.append(k[2])
    # The known schedulers in their order, then variants (gmp+OPTION) as run.
    scheds = [s for s in ORDER if s in seen] + sorted(s for s in seen if s not in ORDER)
    name = "quick" if a.quick else "latest"
    open(f"{a.outdir}/{name}.md", "w").write(table(data, scheds, a.vm, a.quick, died))
    open(f"{a.outdir}/{name}.svg", "w").write(svg(data, scheds, a.vm))
    print(open(f"{a.outdir}/{name}.md").read())


if __name__ == "__main__":
    main()
