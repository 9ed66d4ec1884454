#!/usr/bin/env python3
"""How long wakeups waited to run, from an ftrace text trace (bench/waits.sh).

Usage: bench/waits.py TRACE [--comm NAME] [--over-ms MS] [--show N] [--stranded-ms MS]
                      [--batch NAME [--batch-max-ms MS]] [--idle-beside NAME]

For every sched_wakeup of a task whose comm starts with NAME (default
gmp-load), the wait is the time from that wakeup to the sched_switch that
runs the task. Prints the number of waits and their p50/p90/p99/p99.9, how
many were longer than MS (default 3), what the CPU that finally ran each of
those did meanwhile (the tasks it switched to, or idle), and, for the first N
(default 5) of them, every event in between except other wakeups of NAME's
peers: switches, migrations, and any bpf_printk() or trace_marker lines a
diagnostic build wrote.

With --stranded-ms MS it also lists every wakeup that waited over MS while
some CPU idled for half of that wait or more (a task a scheduler left
waiting beside an idle CPU), and exits 1 if there is one.

With --batch NAME it also says how long a batch job (tasks whose comm
starts with NAME, e.g. stress-ng's SCHED_IDLE hogs) delayed each wakeup:
the time within the wait that the CPU which finally ran the task spent
running the batch job. It prints how many wakeups the batch job delayed,
their p99 and the longest, and with --batch-max-ms MS exits 1 if any was
delayed longer than MS (issue 12's bound: one slice).

With --idle-beside NAME it also says how long CPUs idled while a task whose
comm starts with NAME was runnable but not running (preempted, and not yet
back on a CPU): work left waiting beside an idle CPU, in ms per second of
the trace, summed over the CPUs. For CPU hogs, which never sleep, that is
all the idle time while some hog waits.
"""
import argparse
import bisect
import collections
import re
import sys

LINE = re.compile(r"^\s*(.+?)-(\d+)\s+\[(\d+)\]\s+\S+\s+([\d.]+):\s+(\w+):\s+(.*)$")
FIELDS = re.compile(r"(\w+)=(\S+)")


def parse(path):
    """The trace's events: (seconds, cpu, event, text, comm)."""
    events = []
    with open(path, errors="replace") as f:
        for line in f:
            m = LINE.match(line)
            if m:
                comm, _pid, cpu, ts, ev, rest = m.groups()
                events.append((float(ts), int(cpu), ev, rest, comm))
    return events


def waits(events, comm):
    """(wait in s, index of the wakeup, index of the switch, pid, cpu run on).
    A wakeup of a task that is still on a CPU (it was about to sleep) makes
    it wait for nothing, and one that is followed by the task switching out
    (it went back to sleep first) ends there: neither is counted."""
    woken, out, on_cpu = {}, [], set()
    for i, (ts, cpu, ev, rest, _) in enumerate(events):
        if ev in ("sched_wakeup", "sched_wakeup_new") and rest.startswith("comm=" + comm):
            pid = int(dict(FIELDS.findall(rest))["pid"])
            if pid not in on_cpu:
                woken.setdefault(pid, (ts, i))
        elif ev == "sched_switch":
            d = dict(FIELDS.findall(rest))
            prev, pid = int(d["prev_pid"]), int(d["next_pid"])
            on_cpu.discard(prev)
            woken.pop(prev, None)
            if pid:
                on_cpu.add(pid)
            if pid in woken:
                t0, i0 = woken.pop(pid)
                out.append((ts - t0, i0, i, pid, cpu))
    return out


def meanwhile(events, i0, i1, cpu):
    """What `cpu` switched to between events i0 and i1: its task names."""
    ran = []
    for ts, c, ev, rest, _ in events[i0:i1]:
        if ev == "sched_switch" and c == cpu:
            name = dict(FIELDS.findall(rest))["next_comm"]
            ran.append("idle" if name.startswith("swapper") else name)
    return ran


def run_spans(events, name):
    """Each CPU's spans running a task whose comm starts with `name`,
    (start, end) in s; one still open at the end of the trace ends there."""
    start, spans = {}, collections.defaultdict(list)
    for ts, cpu, ev, rest, _ in events:
        if ev != "sched_switch":
            continue
        d = dict(FIELDS.findall(rest))
        if d["prev_comm"].startswith(name) and cpu in start:
            spans[cpu].append((start.pop(cpu), ts))
        if d["next_comm"].startswith(name):
            start[cpu] = ts
    end = events[-1][0] if events else 0.0
    for cpu, t0 in start.items():
        spans[cpu].append((t0, end))
    return spans


def idle_spans(events):
    """Each CPU's idle spans, (start, end) in s (run_spans() of its idle
    task)."""
    return run_spans(events, "swapper")


def batch_delays(events, ws, name):
    """For each wait, the time within it that the CPU which ran the task
    ran a task named `name`*: (delay in s, wait in s, pid, woken at, cpu)."""
    spans, out = run_spans(events, name), []
    for cs in spans.values():
        cs.sort()
    ends = {cpu: [b for _, b in cs] for cpu, cs in spans.items()}
    for w, i0, i1, pid, cpu in ws:
        t0, t1 = events[i0][0], events[i1][0]
        cs, d = spans.get(cpu, []), 0.0
        # A CPU's spans do not overlap: start at the first that ends after t0.
        for a, b in cs[bisect.bisect_right(ends.get(cpu, []), t0) :]:
            if a >= t1:
                break
            d += max(0.0, min(b, t1) - max(a, t0))
        out.append((d, w, pid, t0, cpu))
    return out


def stranded(events, ws, over_ms):
    """The waits over `over_ms` beside a CPU idle for half of the wait or
    more: (the wait, as waits() gives it, idle CPU, its idle s)."""
    spans, out = idle_spans(events), []
    for wait in ws:
        w, i0, i1, _, _ = wait
        if w * 1000 <= over_ms:
            continue
        t0, t1 = events[i0][0], events[i1][0]
        for c, cs in sorted(spans.items()):
            idle = sum(max(0.0, min(b, t1) - max(a, t0)) for a, b in cs)
            if idle >= w / 2:
                out.append((wait, c, idle))
                break
    return out


def show(events, w, i0, i1, pid, cpu, comm):
    """Print one wait event by event, from the wakeup to the switch that ran
    the task: every switch and migration, and every other event but the
    wakeups of tasks not named `comm`*."""
    print(f"--- pid {pid} woken at {events[i0][0]:.6f}, ran on CPU {cpu} after {w * 1000:.1f} ms")
    for ts, c, ev, rest, name in events[i0 : i1 + 1]:
        if ev == "sched_switch":
            d = dict(FIELDS.findall(rest))
            print(f"  {ts:.6f} [{c}] {d['prev_comm']}:{d['prev_pid']} ({d['prev_state']}) -> {d['next_comm']}:{d['next_pid']}")
        elif ev not in ("sched_wakeup", "sched_waking") or rest.startswith("comm=" + comm):
            print(f"  {ts:.6f} [{c}] {name}: {ev}: {rest}")


def idle_beside(events, name):
    """CPU-seconds idled while a task named `name`* was preempted and not
    yet back on a CPU, and the trace's length in s."""
    idle, waiting, total, last = set(), set(), 0.0, None
    for ts, cpu, ev, rest, _ in events:
        if ev != "sched_switch":
            continue
        if last is not None and waiting:
            total += (ts - last) * len(idle)
        last = ts
        d = dict(FIELDS.findall(rest))
        if d["prev_comm"].startswith(name) and d["prev_state"].startswith("R"):
            waiting.add(d["prev_pid"])
        waiting.discard(d["next_pid"])
        if d["next_pid"] == "0":
            idle.add(cpu)
        else:
            idle.discard(cpu)
    span = events[-1][0] - events[0][0] if events else 0.0
    return total, span


def main(argv):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("trace")
    ap.add_argument("--comm", default="gmp-load")
    ap.add_argument("--over-ms", type=float, default=3.0)
    ap.add_argument("--show", type=int, default=5)
    ap.add_argument("--stranded-ms", type=float)
    ap.add_argument("--batch")
    ap.add_argument("--batch-max-ms", type=float)
    ap.add_argument("--idle-beside")
    a = ap.parse_args(argv)
    if a.batch_max_ms is not None and a.batch is None:
        ap.error("--batch-max-ms needs --batch")
    events = parse(a.trace)
    ws = waits(events, a.comm)
    if not ws:
        print(f"waits.py: no wakeup of a task named {a.comm}* ran in {a.trace}", file=sys.stderr)
        return 1
    lat = sorted(w[0] for w in ws)
    n = len(lat)
    pcts = " ".join(f"p{q:g}={lat[int(q / 100 * (n - 1))] * 1e6:.0f}us" for q in (50, 90, 99, 99.9))
    print(f"wakeups={n} {pcts} max={lat[-1] * 1e6:.0f}us")
    long = sorted((w for w in ws if w[0] * 1000 > a.over_ms), key=lambda w: w[1])
    print(f"over {a.over_ms:g} ms: {len(long)}, {sum(w[0] for w in long) * 1000:.1f} ms in all")
    ran = collections.Counter()
    for _, i0, i1, _, cpu in long:
        seen = meanwhile(events, i0, i1, cpu)
        ran[", ".join(sorted(set(seen))) or "nothing (the waker ran on)"] += 1
    for what, count in ran.most_common():
        print(f"  {count} while its CPU ran: {what}")
    for wait in long[: a.show]:
        show(events, *wait, a.comm)
    rc = 0
    if a.idle_beside is not None:
        idle, span = idle_beside(events, a.idle_beside)
        per_s = idle / span * 1000 if span else 0.0
        print(f"idle beside a waiting {a.idle_beside}*: {per_s:.0f} ms per s over {span:.2f} s")
    if a.batch is not None:
        ds = batch_delays(events, ws, a.batch)
        hit = sorted(d for d in ds if d[0] > 0)
        p99 = hit[int(0.99 * (len(hit) - 1))][0] * 1e6 if hit else 0.0
        print(f"delayed by {a.batch}*: {len(hit)} of {n} wakeups, p99={p99:.0f}us", end="")
        if hit:
            d, w, pid, t0, cpu = hit[-1]
            print(
                f" max={d * 1e6:.0f}us (pid {pid} woken at {t0:.6f}, waited"
                f" {w * 1000:.1f} ms, ran on CPU {cpu})"
            )
        else:
            print(" max=0us")
        if a.batch_max_ms is not None and hit and hit[-1][0] * 1000 > a.batch_max_ms:
            print(f"delayed by {a.batch}* over {a.batch_max_ms:g} ms: {sum(1 for d in hit if d[0] * 1000 > a.batch_max_ms)}")
            rc = 1
    if a.stranded_ms is None:
        return rc
    bad = stranded(events, ws, a.stranded_ms)
    print(f"stranded over {a.stranded_ms:g} ms: {len(bad)}")
    for (w, i0, _, pid, cpu), c, idle in bad:
        print(
            f"  pid {pid} woken at {events[i0][0]:.6f} waited {w * 1000:.1f} ms (ran on CPU {cpu})"
            f" while CPU {c} idled {idle * 1000:.1f} ms of it"
        )
    # The first one event by event: a test that fails on it says why.
    if bad:
        show(events, *bad[0][0], a.comm)
    return 1 if bad else rc


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
