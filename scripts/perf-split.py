#!/usr/bin/env python3
"""Splits a fleet-worker's `perf script` samples (perf record --call-graph dwarf) into the rows of
docs/benchmarks.md's "Where the worker's CPU goes".

A sample goes to the row of the leaf-most frame that names one, so that a decode called from a
controller counts as decoding and the allocator counts for its caller. A kernel leaf is socket work
or scheduling. A decode is split by the frames around it: managedFields, a write's answer, a watch
event or list, or a stack too deep for perf's 8 KiB copy (cut short). Samples whose leaf is in the
allocator, memcpy or a drop are counted a second time, in the last row.

    perf script -i perf.data | scripts/perf-split.py --us-per-lifecycle 164
"""
import argparse
import collections
import re
import sys

# (row, frame patterns), checked in this order against each frame from the leaf up.
ROWS = [
    ("the fence and the shard table", [r"batchfleet_worker::runtime::shard", r"fence", r"lease_deadline"]),
    ("metrics (prometheus)", [r"prometheus", r"batchfleet_telemetry::metrics"]),
    ("logging", [r"^tracing", r"tracing_subscriber", r"tracing_core"]),
    ("decoding", [r"lean_writes", r"lean_protobuf", r"lean_decode", r"serde_json::de", r"serde_json::read",
                  r"prost::encoding::.*merge", r"Deserialize", r"serde::de", r"watch_split"]),
    ("encoding request bodies", [r"serde_json::ser", r"Serialize", r"json_patch", r"prost::.*encode"]),
    ("the Job controller's decisions (`job/core`)", [r"batchfleet_worker::job::core"]),
    ("the cache: store, indexes, trim, handlers", [r"batchfleet_worker::informer", r"hashbrown", r"foldhash"]),
    ("the HTTP client (hyper, h2, kube's tower layers, the fair-budget and metrics layers)",
     [r"^hyper", r"^<hyper", r"^h2::", r"^<h2::", r"hyper_util", r"^<?tower", r"kube_client",
      r"batchfleet_worker::client", r"^<?http::", r"^<?bytes::", r"hyper_rustls"]),
    ("the controllers' own code, the workqueue, tokio", [r"batchfleet_", r"^<?tokio"]),
]
MANAGED_FIELDS = re.compile(r"ManagedFieldsEntry|FieldsV1|managed_fields")
WRITE_ANSWER = re.compile(r"lean_writes|kube_client::api::core_methods|kube_client::api::subresource|"
                          r"Api<.*>::(create|patch|delete|replace)")
WATCH_OR_LIST = re.compile(r"watch|list_watch|request_events|lean_protobuf|Lean<|list_page|informer|reflector",
                           re.IGNORECASE)
KERNEL_SCHEDULING = re.compile(r"schedule|futex|__switch_to|finish_task_switch|pick_next|enqueue_task|"
                               r"dequeue_task|update_curr|psi_")
ALLOCATION = re.compile(r"malloc|free|realloc|calloc|memcpy|memmove|memset|^_int_|drop_in_place|__rust_alloc|"
                        r"__rust_dealloc|__rdl_|RawVec")
FRAME = re.compile(r"\s*[0-9a-f]+\s+(.*?)\s+\((.*)\)\s*$")


def samples(lines):
    """Each sample's frames as (symbol, dso), leaf first."""
    stack = []
    for line in lines:
        if not line.strip():
            if stack:
                yield stack
            stack = []
        elif line[0] in " \t":
            frame = FRAME.match(line)
            if frame:
                stack.append((re.sub(r"\+0x[0-9a-f]+$", "", frame.group(1)), frame.group(2)))
        else:
            stack = []
    if stack:
        yield stack


def in_kernel(dso):
    return "kernel" in dso or dso.startswith("[")


def decoding_row(stack):
    frames = " ".join(symbol for symbol, _ in stack)
    if MANAGED_FIELDS.search(frames):
        return "decoding `managedFields` (watch events, lists, write answers)"
    if WRITE_ANSWER.search(frames):
        return "decoding write answers (the rest of each object)"
    if WATCH_OR_LIST.search(frames):
        return "decoding watch events and lists (the rest of each object)"
    return "decoding, stack cut short (watch events or answers)"


def row_of(stack):
    if in_kernel(stack[0][1]):
        for symbol, dso in stack:
            if not in_kernel(dso):
                break
            if KERNEL_SCHEDULING.search(symbol):
                return "kernel: scheduling, futex"
        return "kernel: sockets, epoll, syscalls"
    for symbol, _ in stack:
        for row, patterns in ROWS:
            if any(re.search(pattern, symbol) for pattern in patterns):
                return decoding_row(stack) if row == "decoding" else row
    return "other (libc, std, unresolved)"


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--us-per-lifecycle", type=float, help="the run's CPU-µs per lifecycle")
    args = parser.parse_args()
    rows, allocation, total = collections.Counter(), 0, 0
    for stack in samples(sys.stdin):
        total += 1
        rows[row_of(stack)] += 1
        allocation += bool(ALLOCATION.search(stack[0][0]))
    if not total:
        sys.exit("no samples on stdin")
    per = args.us_per_lifecycle

    def line(name, n):
        share = n / total
        us = f"{share * per:.0f}" if per else ""
        return f"| {name} | {share * 100:.1f}% | {us} |"

    print(f"{total} samples")
    print("| where the CPU goes | share | µs per lifecycle |\n|---|---:|---:|")
    for name, n in rows.most_common():
        print(line(name, n))
    print(line("*of all the above, in malloc, free, memcpy and drop*", allocation))


if __name__ == "__main__":
    main()
