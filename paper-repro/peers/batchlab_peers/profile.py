"""DyNet's own account of the batches it executed.

With ``profiling`` 2, DyNet's autobatching engine prints, for every forward
call, ``Forward Call`` and then one line ``BatchSize:<n> <node>`` per batch it
executes, on the C++ standard output. Parameter nodes (``parameters(...)``,
``const_parameters(...)``) and input constants (``constant(...)``: the zeros
of an absent input) are leaves that batchlab's traces do not have as nodes;
they are counted apart. Every other line is a batch of ops.
"""

import os
import re
import sys
import tempfile

LINE = re.compile(r"^BatchSize:(\d+) (.*)$")
LEAVES = (("parameters", ("parameters(", "const_parameters(")), ("constants", ("constant(",)))


KINDS = (
    (re.compile(r"^lookup_parameters\("), "lookup"),
    (re.compile(r"^a( \+ a \* a)+$"), "affine"),
    (re.compile(r"^a \* a$"), "matmul"),
    (re.compile(r"^\\sigma\(a\)$"), "sigmoid"),
    (re.compile(r"^tanh\(a\)$"), "tanh"),
    (re.compile(r"^ReLU\(a\)$"), "relu"),
    (re.compile(r"^a \\cdot a$"), "mul"),
    (re.compile(r"^a - a$"), "sub"),
    (re.compile(r"^average\("), "mean"),
    (re.compile(r"^-a$"), "one_minus:negate"),
    (re.compile(r"^1 \+ a$"), "one_minus:plus1"),
    (re.compile(r"^pickneglogsoftmax\("), "pick_loss"),
    (re.compile(r"^softmax\("), "softmax"),
    (re.compile(r"^concat\("), "concat"),
    (re.compile(r"^pick_range\(|^\w\[\d+:\d+\]"), "slice"),
)


def kind(desc):
    """The op kind of a DyNet node description: ``a + a * a + a * a`` is an
    affine, ``a + a + a`` a 3-argument sum (``sum3``; ``add|sum2`` for two,
    as DyNet prints an add and a 2-argument sum alike)."""
    for rx, name in KINDS:
        if rx.search(desc):
            return name
    if re.fullmatch(r"a( \+ a)*", desc):
        k = desc.count("a")
        return "add|sum2" if k == 2 else f"sum{k}"
    return "other:" + desc


def parse(text):
    """Counts of a DyNet profiling-2 output: batches and nodes of ops, and the
    leaf batches set apart, with the op batches per node description."""
    out = {"forward_calls": 0, "batches": 0, "nodes": 0, "parameters": 0, "constants": 0, "by_op": {}, "by_kind": {}}
    for line in text.splitlines():
        line = line.rstrip()
        if line == "Forward Call":
            out["forward_calls"] += 1
            continue
        m = LINE.match(line)
        if not m:
            continue
        size, desc = int(m.group(1)), m.group(2)
        leaf = next((k for k, prefixes in LEAVES if desc.startswith(prefixes)), None)
        if leaf:
            out[leaf] += 1
            continue
        out["batches"] += 1
        out["nodes"] += size
        key = re.sub(r" @ 0x[0-9a-f]+$", "", desc)
        out["by_op"][key] = out["by_op"].get(key, 0) + 1
        k = kind(key)
        out["by_kind"][k] = out["by_kind"].get(k, 0) + 1
    return out


def capture_stdout(fn):
    """Runs ``fn`` with file descriptor 1 sent to a temporary file (C++
    ``cout`` included); returns (fn's result, the text written)."""
    sys.stdout.flush()
    saved = os.dup(1)
    with tempfile.TemporaryFile() as tmp:
        os.dup2(tmp.fileno(), 1)
        try:
            result = fn()
        finally:
            sys.stdout.flush()
            os.dup2(saved, 1)
            os.close(saved)
        tmp.seek(0)
        text = tmp.read().decode("utf-8", "replace")
    return result, text
