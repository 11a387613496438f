"""Schedules of a mini-batch: batchlab's own policies through ``engine
schedule --serve`` (one process per policy, kept for the session: one line
in, one line out per mini-batch), or a schedule file of this very
mini-batch, checked against it."""

from __future__ import annotations

import atexit
import fcntl
import json
import os
import select
import shutil
import subprocess
import threading

import numpy as np

from .._recording.graph import Kind
from .plan import Plan


class ScheduleError(Exception):
    """A schedule that cannot run this mini-batch, or no way to compute one."""


def find_tool(name: str = "engine") -> str:
    """A batchlab binary (``engine``, ``search``, ``planner``,
    ``paper-repro``): ``$BATCHLAB_<NAME>`` (``-`` as ``_``), else ``target/release`` (then ``target/debug``) of
    the checkout this package or the working folder sits in, else ``PATH``."""
    var = f"BATCHLAB_{name.upper().replace('-', '_')}"
    env = os.environ.get(var)
    if env:
        if not os.path.isfile(env):
            raise ScheduleError(f"{var}={env}: no such file")
        return env
    for start in (os.getcwd(), os.path.dirname(os.path.abspath(__file__))):
        d = start
        while True:
            for sub in ("release", "debug"):
                p = os.path.join(d, "target", sub, name)
                if os.path.isfile(p) and os.access(p, os.X_OK):
                    return p
            parent = os.path.dirname(d)
            if parent == d:
                break
            d = parent
    found = shutil.which(name)
    if found:
        return found
    raise ScheduleError(
        f"batchlab's `{name}` binary is needed here (batchlab's policies are not re-implemented in Python): "
        f"build it with `cargo build --release` in the batchlab checkout, or set {var}=/path/to/{name}"
    )


def _timeout() -> float:
    """Seconds to wait for the schedule service's answer."""
    text = os.environ.get("BATCHLAB_SCHEDULE_TIMEOUT", "120")
    try:
        t = float(text)
    except ValueError:
        t = float("nan")
    if not (t > 0 and t < float("inf")):
        raise ScheduleError(f"BATCHLAB_SCHEDULE_TIMEOUT={text}: give seconds, a positive number")
    return t


class _Server:
    """An ``engine schedule --serve --policy P`` process: one trace per
    line in, its batches per line out."""

    _all: dict[tuple[str, str], _Server] = {}
    _lock = threading.Lock()

    def __init__(self, engine: str, policy: str) -> None:
        self.proc = subprocess.Popen(
            [engine, "schedule", "--serve", "--policy", policy],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
        )
        self.policy = policy
        self.engine = engine
        self.read_version: tuple[int, int, int] | None = None  # the policy file it read
        self.pending = False  # a request sent whose answer is not read yet
        # A request is ~16 bytes a node, more than a pipe's default 64 KiB:
        # a bigger pipe takes it in one write, not in turns with the reader.
        try:
            fcntl.fcntl(self.proc.stdin.fileno(), fcntl.F_SETPIPE_SZ, 1 << 20)  # type: ignore[union-attr]
        except (AttributeError, OSError):
            pass  # not Linux, or above /proc/sys/fs/pipe-max-size: the default pipe works, in turns

    @staticmethod
    def version(policy: str) -> tuple[int, int, int] | None:
        """The policy file as it is on disk now (inode, size, modification
        time), or None for a heuristic's name: the service read the file
        when it started, so a file rewritten since (a policy retrained in
        the same session) needs a new one."""
        try:
            st = os.stat(policy)
        except OSError:
            return None
        return (st.st_ino, st.st_size, st.st_mtime_ns)

    @classmethod
    def get(cls, engine: str, policy: str) -> _Server:
        with cls._lock:
            now = cls.version(policy)
            s = cls._all.get((engine, policy))
            if s is not None and s.proc.poll() is None and s.read_version != now:
                s.close()
                s = None
            if s is None or s.proc.poll() is not None:
                s = cls(engine, policy)
                s.read_version = now
                cls._all[(engine, policy)] = s
            return s

    def close(self) -> None:
        try:
            if self.proc.stdin is not None:
                self.proc.stdin.close()
            self.proc.wait(timeout=5)
        except Exception:
            self.proc.kill()

    def ask(self, request: bytes) -> tuple[dict, list[np.ndarray]]:
        """Sends a binary request; the answer's header and its batches."""
        self.send(request)
        return self.receive()

    def send(self, request: bytes) -> None:
        """Sends a binary request (:meth:`receive` reads its answer: work in
        between overlaps the policy's run). An earlier request whose answer
        was never read (its mini-batch failed in between) is answered first,
        and that answer dropped: each answer goes to its own request."""
        assert self.proc.stdin is not None
        _timeout()  # a bad setting is refused before anything is sent
        if self.pending:
            self.receive()
        self.pending = True
        try:
            self.proc.stdin.write(request)
            self.proc.stdin.flush()
        except BrokenPipeError:
            pass  # the service stopped: receive says why

    def receive(self) -> tuple[dict, list[np.ndarray]]:
        """The answer to the request sent last: its header and its batches.
        A service that does not answer within ``$BATCHLAB_SCHEDULE_TIMEOUT``
        seconds (default 120), stops, or answers other than a schedule is an
        error naming the program (``BATCHLAB_ENGINE`` may name another)."""
        assert self.proc.stdout is not None
        try:
            return self._answer()
        except BaseException:
            # The stream's place is unknown: the next request gets a new service.
            self.proc.kill()
            raise
        finally:
            self.pending = False

    def _answer(self) -> tuple[dict, list[np.ndarray]]:
        assert self.proc.stdout is not None
        who = f"`{self.engine} schedule --serve --policy {self.policy}`"
        hint = "BATCHLAB_ENGINE must name batchlab's `engine` binary (cargo build --release)"
        timeout = _timeout()
        ready, _, _ = select.select([self.proc.stdout], [], [], timeout)
        if not ready:
            self.proc.kill()
            raise ScheduleError(
                f"{who} gave no answer in {timeout:g} s (BATCHLAB_SCHEDULE_TIMEOUT raises the limit); {hint}"
            )
        try:
            line = self.proc.stdout.readline()
        except BrokenPipeError:
            line = b""
        if not line:
            self.proc.wait(timeout=5)
            err = self.proc.stderr.read().decode(errors="replace") if self.proc.stderr is not None else ""
            raise ScheduleError(f"{who} stopped ({err.strip() or f'exit status {self.proc.returncode}'}); {hint}")
        try:
            head = json.loads(line)
            if "error" not in head:
                sizes = [int(x) for x in head["batch_sizes"]]
        except (ValueError, KeyError, TypeError):
            self.proc.kill()
            raise ScheduleError(f"{who} answered {line[:80]!r}, not a schedule; {hint}") from None
        if "error" in head:
            raise ScheduleError(f"engine schedule --policy {self.policy}: {head['error']}")
        data = self.proc.stdout.read(4 * sum(sizes))
        if len(data) != 4 * sum(sizes):
            self.proc.kill()
            raise ScheduleError(f"{who} stopped in the middle of an answer; {hint}")
        nodes = np.frombuffer(data, dtype="<u4").astype(np.int64)
        ends = np.cumsum(sizes).tolist()
        return head, [nodes[a:b] for a, b in zip([0, *ends[:-1]], ends)]

    @classmethod
    def close_all(cls) -> None:
        for s in cls._all.values():
            s.close()
        cls._all.clear()


atexit.register(_Server.close_all)


def graph_request(name: str, plan: Plan, kinds: list[Kind], bound: bool = True) -> bytes:
    """The mini-batch's graph as ``engine schedule --serve`` takes it in
    binary (docs/cli.md): a header line, then, as little-endian u32, each
    node's type, the arguments' offsets, the arguments, each node's
    instance. ``bound``: whether the answer should carry the A.3 lower
    bound (the service's one pass per type more)."""
    head = {
        "workload": name,
        "types": [kinds[q].type_name for q in plan.present.tolist()],
        "nodes": int(plan.n),
        "args": len(plan.gnode),
    }
    if not bound:
        head["bound"] = False
    body = np.concatenate([plan.type_of, plan.gptr, plan.gnode, plan.instance]).astype("<u4").tobytes()
    return b"B " + json.dumps(head, separators=(",", ":")).encode() + b"\n" + body


def read_schedule(path: str, plan: Plan, kinds: list[Kind]) -> list[np.ndarray]:
    """A schedule file's batches, checked against this mini-batch's graph:
    node count, each batch one type, every node once after its arguments."""
    try:
        with open(path) as f:
            s = json.load(f)
    except (OSError, ValueError) as e:
        raise ScheduleError(f"{path}: {e}") from None
    if not isinstance(s, dict) or s.get("format") != "batchlab-schedule":
        raise ScheduleError(f"{path}: not a schedule file (format batchlab-schedule)")
    if s.get("nodes") != plan.n:
        raise ScheduleError(
            f"{path}: a schedule of {s.get('nodes')} nodes, but this mini-batch has {plan.n}: a schedule file "
            "fits only the mini-batch it was made for (use a policy for new samples)"
        )
    batches = s.get("batch_nodes")
    types = s.get("schedule")
    if not isinstance(batches, list) or not isinstance(types, list) or len(batches) != len(types):
        raise ScheduleError(f"{path}: batch_nodes and schedule missing or of different lengths")
    done = np.zeros(plan.n, dtype=bool)
    out = []
    for b, (ids, ty) in enumerate(zip(batches, types)):
        if not isinstance(ids, list) or not ids or not all(type(i) is int for i in ids):
            raise ScheduleError(f"{path}: batch {b}: not a list of node ids")
        if not all(0 <= i < plan.n for i in ids):
            bad = next(i for i in ids if not 0 <= i < plan.n)
            raise ScheduleError(f"{path}: batch {b}: node {bad} is out of range (this mini-batch has {plan.n} nodes)")
        arr = np.array(ids, dtype=np.int64)
        if arr.min() < 0 or arr.max() >= plan.n or done[arr].any() or len(np.unique(arr)) != len(arr):
            raise ScheduleError(f"{path}: batch {b}: a node out of range or scheduled twice")
        for i in ids:
            if kinds[int(plan.kid[i])].type_name != ty:
                raise ScheduleError(f"{path}: batch {b}: node {i} is {kinds[int(plan.kid[i])].type_name}, not {ty}")
            deps = (
                plan.snode[plan.sptr[i] : plan.sptr[i + 1]]
                if kinds[int(plan.kid[i])].what == "sum"
                else plan.anode[i][plan.anode[i] >= 0]
            )
            if len(deps) and not done[deps].all():
                raise ScheduleError(f"{path}: batch {b}: node {i} runs before one of its arguments")
        done[arr] = True
        out.append(arr)
    if not done.all():
        raise ScheduleError(f"{path}: node {int(np.argmin(done))} is in no batch")
    return out
