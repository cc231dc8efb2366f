"""Reads a `cleave run --trace` file and checks it against the Chrome
trace-event format (the JSON Object Format of Google's "Trace Event Format"
document, which chrome://tracing and ui.perfetto.dev import): a JSON object
whose `traceEvents` list holds complete events (ph "X": name, cat, pid, tid,
ts and dur in microseconds, optional args object) and metadata events (ph
"M": process_name, process_labels, process_sort_index, thread_name,
thread_sort_index, each with its one args key). Beyond the format, what a
viewer needs to draw the file as cleave means it: every process and thread
that has events is named, and the spans of one thread nest (two spans
either are disjoint or one holds the other), so each track is a stack of
slices. The perfetto package's TraceProcessor cannot be used offline
(docs/training.md, "Profiling"), so this is the check.

    trace = chrome_trace.load(path)      # raises TraceError naming the fault
    trace.processes[pid], trace.threads[(pid, tid)], trace.spans
"""
import json
import math

METADATA_KEYS = {
    "process_name": "name",
    "process_labels": "labels",
    "process_sort_index": "sort_index",
    "thread_name": "name",
    "thread_sort_index": "sort_index",
}


# A nanosecond in the trace's microseconds.
NS = 1e-3


class TraceError(Exception):
    pass


class Span:
    def __init__(self, event):
        self.pid, self.tid = event["pid"], event["tid"]
        self.name, self.cat = event["name"], event["cat"]
        self.ts, self.dur = float(event["ts"]), float(event["dur"])
        self.end = self.ts + self.dur
        self.args = event.get("args", {})

    def holds(self, other, slack=0.0):
        return self.ts - slack <= other.ts and other.end <= self.end + slack

    def __repr__(self):
        return f"<{self.name} pid {self.pid} tid {self.tid} ts {self.ts} dur {self.dur}>"


class Trace:
    def __init__(self, document):
        self.document = document
        self.processes = {}
        self.labels = {}
        self.threads = {}
        self.spans = []

    def track(self, pid, name):
        """The spans of process `pid`'s thread named `name`, by start time."""
        tids = [tid for (p, tid), n in self.threads.items() if p == pid and n == name]
        return sorted((s for s in self.spans if s.pid == pid and s.tid in tids),
                      key=lambda s: (s.ts, -s.dur))

    def track_names(self, pid):
        return {n for (p, _), n in self.threads.items() if p == pid}


def _number(event, key):
    value = event.get(key)
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        raise TraceError(f"event {event}: '{key}' is not a finite number")
    if value < 0:
        raise TraceError(f"event {event}: '{key}' is negative")
    return value


def _integer(event, key):
    value = event.get(key)
    if isinstance(value, bool) or not isinstance(value, int):
        raise TraceError(f"event {event}: '{key}' is not an integer")
    return value


def check(document):
    """The Trace of a parsed trace document, or TraceError."""
    if not isinstance(document, dict) or not isinstance(document.get("traceEvents"), list):
        raise TraceError("not a JSON object with a 'traceEvents' list")
    trace = Trace(document)
    for event in document["traceEvents"]:
        if not isinstance(event, dict):
            raise TraceError(f"event {event!r} is not an object")
        ph = event.get("ph")
        pid = _integer(event, "pid")
        if ph == "M":
            name = event.get("name")
            if name not in METADATA_KEYS:
                raise TraceError(f"metadata event {event}: unknown name")
            args = event.get("args")
            key = METADATA_KEYS[name]
            if not isinstance(args, dict) or key not in args:
                raise TraceError(f"metadata event {event}: no args.{key}")
            if name == "process_name":
                trace.processes[pid] = args[key]
            elif name == "process_labels":
                trace.labels[pid] = args[key]
            elif name == "thread_name":
                trace.threads[(pid, _integer(event, "tid"))] = args[key]
        elif ph == "X":
            _integer(event, "tid")
            for key in ("name", "cat"):
                if not isinstance(event.get(key), str):
                    raise TraceError(f"event {event}: '{key}' is not a string")
            _number(event, "ts")
            _number(event, "dur")
            if "args" in event and not isinstance(event["args"], dict):
                raise TraceError(f"event {event}: 'args' is not an object")
            trace.spans.append(Span(event))
        else:
            raise TraceError(f"event {event}: phase {ph!r} is not one cleave writes (X, M)")
    for span in trace.spans:
        if span.pid not in trace.processes:
            raise TraceError(f"{span}: its process has no process_name")
        if (span.pid, span.tid) not in trace.threads:
            raise TraceError(f"{span}: its thread has no thread_name")
    # Spans of one thread nest: a stack of open spans, by start time (times
    # are written to the nanosecond: sums of them are compared to half of one).
    for key in trace.threads:
        open_spans = []
        for span in sorted((s for s in trace.spans if (s.pid, s.tid) == key),
                           key=lambda s: (s.ts, -s.dur)):
            while open_spans and open_spans[-1].end <= span.ts + NS / 2:
                open_spans.pop()
            if open_spans and not open_spans[-1].holds(span, NS / 2):
                raise TraceError(f"{span} overlaps {open_spans[-1]} without nesting in it")
            open_spans.append(span)
    return trace


def load(path):
    with open(path) as f:
        return check(json.load(f))
