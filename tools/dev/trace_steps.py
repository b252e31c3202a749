#!/usr/bin/env python3
"""Reads tools/dev/kernel_trace.cpp's CSV and describes the graph replays (training steps) in it.

  trace_steps.py trace.csv [--last 20] [--timeline] [--critical]

A replay is every activity with the correlation id of one cudaGraphLaunch. For the last N
replays of the most common size it prints: span (first start to last end), the time some
kernel ran (union), the idle time inside the span, the gap to the next replay, time per
kernel name inside the graph (mean per replay), and with --timeline the median replay's
activities in start order (offset, duration, stream) with the idle gaps marked. With
--critical and the tracer's trace.csv.edges beside the trace, the median replay's critical path:
from the activity that ends last, back through the dependency that finished last each time, with
each activity's wait (its start after that dependency's end; negative when it launched early)
and the time it added to the path.
"""
import argparse
import csv
import collections
import shutil
import statistics
import subprocess


DEMANGLED = {}


def demangle_all(names):
    names = [n for n in set(names) if n.startswith("_Z")]
    if names and shutil.which("c++filt"):
        out = subprocess.run(["c++filt"], input="\n".join(names), capture_output=True, text=True).stdout
        DEMANGLED.update(zip(names, out.splitlines()))


def short(name, width=90):
    name = DEMANGLED.get(name, name)
    for noise in ("(anonymous namespace)::", "ge::", "gpu::", "bn::", "__half", "unsigned int"):
        name = name.replace(noise, "")
    name = name.replace("void ", "")
    return name if len(name) <= width else name[:width]


def span_shares(acts):
    """Cuts the span into the pieces during which each activity was the last to end: with
    programmatic dependent launch a kernel starts before its predecessor ends and waits, so
    durations overlap; these shares add up to the busy time instead."""
    front, shares = None, []
    for a in sorted(acts, key=lambda a: a[1]):
        begin = a[0] if front is None else max(front, a[0])
        shares.append((a, max(0, a[1] - begin)))
        front = a[1] if front is None else max(front, a[1])
    return shares


def us(ns):
    return ns / 1000.0


def union_busy(intervals):
    busy, cur_s, cur_e = 0, None, None
    gaps = []
    for s, e in sorted(intervals):
        if cur_e is None:
            cur_s, cur_e = s, e
        elif s > cur_e:
            busy += cur_e - cur_s
            gaps.append((cur_e, s))
            cur_s, cur_e = s, e
        else:
            cur_e = max(cur_e, e)
    if cur_e is not None:
        busy += cur_e - cur_s
    return busy, gaps


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("trace")
    ap.add_argument("--last", type=int, default=20)
    ap.add_argument("--timeline", action="store_true")
    ap.add_argument("--critical", action="store_true")
    args = ap.parse_args()

    groups = collections.defaultdict(list)
    with open(args.trace) as f:
        for row in csv.DictReader(f):
            if row["graph"] == "0":
                continue
            groups[int(row["correlation"])].append(
                (int(row["start_ns"]), int(row["end_ns"]), int(row["stream"]), row["kind"], row["name"],
                 int(row["graph"]), int(row["graph_node"])))
    if not groups:
        print("no graph replays in the trace")
        return
    # The training step's graph: of the sizes seen at least 10 times (other graphs, such as the
    # algorithm search's, replay a few activities), the one with the most activities.
    counts = collections.Counter(len(g) for g in groups.values())
    size = max((n for n, k in counts.items() if k >= 10), default=counts.most_common(1)[0][0])
    replays = sorted((g for g in groups.values() if len(g) == size), key=lambda g: min(a[0] for a in g))
    print(f"{len(groups)} graph launches; {len(replays)} of {size} activities; using the last {args.last}")
    starts = [min(a[0] for a in g) for g in replays]
    replays, next_start = replays[-args.last - 1:-1], starts[-args.last:]
    demangle_all(a[4] for g in replays for a in g)
    rows, per_name, per_share = [], collections.defaultdict(float), collections.defaultdict(float)
    for g, nxt in zip(replays, next_start):
        s0, e0 = min(a[0] for a in g), max(a[1] for a in g)
        busy, gaps = union_busy([(a[0], a[1]) for a in g])
        rows.append((e0 - s0, busy, nxt - s0, g, gaps))
        for a in g:
            per_name[a[4]] += (a[1] - a[0]) / len(replays)
        for a, share in span_shares(g):
            per_share[a[4]] += share / len(replays)
    med = lambda xs: statistics.median(xs)
    print(f"replay span {us(med([r[0] for r in rows])):.1f} us (median), start to next start "
          f"{us(med([r[2] for r in rows])):.1f} us, some kernel running {us(med([r[1] for r in rows])):.1f} us, "
          f"idle inside the span {us(med([r[0] - r[1] for r in rows])):.1f} us")
    streams = collections.defaultdict(list)
    mid = sorted(rows, key=lambda r: r[0])[len(rows) // 2]
    for a in mid[3]:
        streams[a[2]].append((a[0], a[1]))
    for st, iv in sorted(streams.items()):
        b, _ = union_busy(iv)
        print(f"  stream {st}: {len(iv)} activities, busy {us(b):.1f} us")
    total = sum(per_name.values())
    print(f"\nper kernel name, mean per replay: duration (sum {us(total):.1f} us), share of the span it ended"
          f" (sum {us(sum(per_share.values())):.1f} us)")
    for name, t in sorted(per_share.items(), key=lambda kv: -kv[1])[:45]:
        print(f"  {us(per_name[name]):8.1f} {us(t):8.1f}  {short(name)}")
    if args.critical:
        critical_path(mid[3], args.trace + ".edges")
    if args.timeline:
        g, gaps = mid[3], mid[4]
        s0 = min(a[0] for a in g)
        gap_at = {gs: ge for gs, ge in gaps}
        print(f"\nmedian replay, {us(mid[0]):.1f} us; offset, duration (us), stream, name; '--' marks idle")
        events = sorted(g)
        ends_sorted = sorted(gap_at)
        gi = 0
        for a in events:
            while gi < len(ends_sorted) and ends_sorted[gi] <= a[0]:
                gs = ends_sorted[gi]
                print(f"  -- idle {us(gap_at[gs] - gs):.1f} us")
                gi += 1
            print(f"  {us(a[0] - s0):8.1f} {us(a[1] - a[0]):7.1f}  s{a[2]:<3} {short(a[4])}")


def critical_path(replay, edges_path):
    """The chain of activities that set the replay's end, walked back from the last to end."""
    # A node id is the graph's id in the high 32 bits and the node's number in the low ones; the
    # activities name the nodes of the executable graph, a copy of the one whose edges the tracer
    # wrote at instantiation, with the same numbers: matched on those.
    low = lambda node: node & 0xFFFFFFFF
    graph_of = collections.Counter()
    with open(edges_path) as f:
        rows = list(csv.DictReader(f))
    size = len(replay)
    for r in rows:
        graph_of[int(r["graph"])] += 1
    # the graph with about as many edges as the replay has activities (the training step's)
    graph = min(graph_of, key=lambda g: abs(graph_of[g] - size)) if graph_of else None
    preds = collections.defaultdict(list)
    for r in rows:
        if int(r["graph"]) == graph:
            preds[low(int(r["to"]))].append(low(int(r["from"])))
    by_node = {low(a[6]): a for a in replay}
    if not any(n in preds for n in by_node):
        print("\nno edge matches the replay's nodes")
        return
    def last_input(node):  # the activity among node's (transitive through non-activities) inputs that ended last
        best = None
        stack = list(preds.get(node, []))
        seen = set()
        while stack:
            p = stack.pop()
            if p in seen:
                continue
            seen.add(p)
            if p in by_node:
                if best is None or by_node[p][1] > by_node[best][1]:
                    best = p
            else:
                stack.extend(preds.get(p, []))
        return best

    s0 = min(a[0] for a in replay)
    node = low(max(replay, key=lambda a: a[1])[6])
    path = []
    while node is not None:
        path.append(node)
        node = last_input(node)
    path.reverse()
    print(f"\ncritical path of the median replay: {len(path)} activities; offset, wait after its input, "
          f"time added, duration (us), stream, name")
    prev_end, waits, busy = None, 0, 0
    for n in path:
        a = by_node[n]
        wait = 0 if prev_end is None else a[0] - prev_end
        added = a[1] - (a[0] if prev_end is None else max(a[0], prev_end))
        waits += max(wait, 0)
        busy += added
        print(f"  {us(a[0] - s0):8.1f} {us(wait):6.1f} {us(added):6.1f} {us(a[1] - a[0]):6.1f}  s{a[2]:<3} {short(a[4])}")
        prev_end = a[1]
    print(f"  on the path: {us(busy):.1f} us of running, {us(waits):.1f} us of waiting between activities")


if __name__ == "__main__":
    main()
