"""Running a mini-batch inside PyTorch by a batchlab schedule.

:func:`run` (or a :class:`Runner`, which keeps what it learns between
mini-batches) takes the user's model, its marked cells and a mini-batch of
samples, and

1. **discovers** the mini-batch's graph by running the user's own forward
   on every sample with placeholders (:class:`Value`): a cell call records
   a node and returns placeholders of its output shapes, without
   computing (:class:`Discovery`, the same :class:`~batchlab_torch.tracer.Tracer`
   the recorder is, so the nodes and their types are the recording's);
2. **schedules** it: ``"depth"``, ``"agenda"`` or any batchlab policy name,
   a policy file from ``search train``, both by batchlab's own policies in
   ``engine schedule --serve``; or a schedule file (``search optimise``,
   ``engine schedule --out``) of this very mini-batch;
3. **executes** the batches in order with the user's own modules: per
   batch, gather the inputs into one tensor per argument, call the cell
   once, scatter its outputs (:class:`Execution`). A cell that computes
   row by row is called directly on the batch; any other is run under
   ``torch.func.vmap``, which batches any per-instance code, or, for an op
   vmap has no rule for, row by row; which one is decided once per kind by
   comparing them on its first batch.

Gathers and scatters move rows of one buffer per output shape; under
autograd they are custom functions whose backward adds into a gradient
buffer of the same rows, so a step costs what its batches cost, not a copy
of the buffer per batch. The returned values are what each ``model(sample)``
returned, with autograd through the batched graph.
"""

from __future__ import annotations

import gc
import json
import os
import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import torch
from torch import nn

from .._flat import unflatten as tree_unflatten
from .._recording.graph import Kind, Kinds, RecordError
from .discover import Discovery, Known
from .execute import Execution, KindTable, base_key, callers
from .memory import keep_freed_memory
from .plan import Fragment, Plan
from .schedules import ScheduleError, _Server, find_tool, graph_request, read_schedule

_found: tuple[str | None, str, str] | None = None


def _engine_path() -> str:
    """:func:`find_tool`'s ``engine``, looked for again only when
    ``$BATCHLAB_ENGINE`` or the working folder changed (it walks the
    folders up from both: a few hundred microseconds a mini-batch)."""
    global _found
    key = (os.environ.get("BATCHLAB_ENGINE"), os.getcwd())
    if _found is None or _found[:2] != key or not os.path.isfile(_found[2]):
        _found = (*key, find_tool("engine"))
    return _found[2]


@dataclass
class Stats:
    """Where one :meth:`Runner.run` spent its time, in seconds, and what it ran."""

    discover: float = 0.0
    schedule: float = 0.0
    execute: float = 0.0
    nodes: int = 0
    batches: int = 0
    discovered: int = 0
    lower_bound: int | None = None  # with Runner(bound=True)
    misses: int = 0  # a policy file's decisions in states it does not hold
    deferred: int = 0  # its decisions it hands to its fallback by design
    direct_kinds: int = 0
    rows_kinds: int = 0  # direct, with per-row losses
    vmap_kinds: int = 0
    loop_kinds: int = 0
    per_type: dict[str, int] = field(default_factory=dict)

    @property
    def total(self) -> float:
        return self.discover + self.schedule + self.execute


# ---------------------------------------------------------------- the runner


class Runner:
    """Runs mini-batches of ``model`` by batchlab schedules (see the module
    docs), remembering each kind's shapes and call mode between them. Every
    mini-batch's samples are discovered afresh (their graphs, ids and labels
    read from the forward each time); ``cache=True`` keeps each sample
    object's graph instead, for samples that never change once run (a
    changed sample would run its first graph: nothing detects it). ``bound=True`` asks the
    schedule service for each mini-batch's A.3 lower bound too
    (``stats.lower_bound``; else ``None``). On the CPU it keeps freed host
    memory in the process (:func:`~batchlab_torch._running.memory.keep_freed_memory`;
    ``BATCHLAB_TORCH_KEEP_FREED=0`` not)."""

    def __init__(
        self,
        model: nn.Module,
        cells: dict[str, nn.Module],
        *,
        name: str | None = None,
        engine: str | None = None,
        cache: bool = False,
        bound: bool = False,
    ) -> None:
        self.model = model
        self.cells = dict(cells)
        self.name = name
        self.engine = engine
        self.bound = bound  # ask the service for each mini-batch's lower bound (stats.lower_bound)
        self.known: dict[tuple, Known] = {}
        self.kinds = Kinds()  # every kind met, by key and index (a node's kind id is its index)
        self._named = 0  # kinds named so far (kind_list[:_named])
        self._type_names: dict[str, tuple] = {}
        self._discovery: Discovery | None = None
        self.cache: dict[int, tuple[Any, Fragment]] | None = {} if cache else None
        self.stats = Stats()
        self._caller: Any = None
        self.buffers: dict = {}  # store buffers, reused from one mini-batch to the next
        self.table = KindTable(self)  # stores and kind plans, the same in every mini-batch
        try:
            self.device = next(model.parameters()).device
        except StopIteration:
            self.device = torch.device("cpu")
        if self.device.type == "cpu":
            keep_freed_memory()  # a batch's big temporaries, not faulted in afresh every mini-batch

    @property
    def caller(self) -> Any:
        """The per-kind callers (made on first use: they hold the model's parameters)."""
        if self._caller is None:
            self._caller = callers(self)
        return self._caller

    # ------------------------------------------------------------ kinds
    @property
    def kind_list(self) -> list[Kind]:
        """Every kind met, by index (the kind ids of a plan)."""
        return self.kinds.list

    def name_kinds(self) -> None:
        """Names the kinds met since the last call (type names as a recording
        names them; each integer input's column)."""
        kinds = self.kinds.list
        for kind in kinds[self._named :]:
            name = f"{kind.base}[{kind.signature()}]"
            while self._type_names.get(name, kind.key) != kind.key:
                name = f"{kind.base}-{len(self._type_names)}[{kind.signature()}]"
            self._type_names[name] = kind.key
            kind.type_name = name
            kind.data_slot = {p: i for i, p in enumerate(kind.data_positions)}
        self._named = len(kinds)

    def out_keys(self, kind: Kind) -> list[tuple]:
        """Per output, the store it goes to: (per-instance shape, dtype)."""
        known = self.known.get(base_key(kind.key))
        dts = known.out_dtypes if known is not None else (torch.float32,) * len(kind.out_tshapes)
        return [(tuple(s), d) for s, d in zip(kind.out_tshapes, dts)]

    # ------------------------------------------------------------ the steps
    def discover(self, samples: Sequence[Any]) -> list[Fragment]:
        """The mini-batch's fragments: each sample seen before from the cache,
        the others by running the forward with placeholders (all new samples
        in one pass, one fragment)."""
        frags: list[Fragment | None] = [None] * len(samples)
        todo = []
        for i, s in enumerate(samples):
            hit = self.cache.get(id(s)) if self.cache is not None else None
            if hit is not None and hit[0] is s:
                frags[i] = hit[1]
            else:
                todo.append(i)
        self.stats.discovered = len(todo)
        if not todo:
            return frags  # type: ignore[return-value]
        d = self._discovery
        if d is None:
            d = self._discovery = Discovery(self.model, self.cells, self.known, self.device, self.kinds, self.name)
            self.name = d.name
        d.begin()
        returns = []
        collecting = gc.isenabled()
        gc.disable()  # discovery makes many small objects and no cycles
        try:
            with d:
                for i in todo:
                    returns.append(self.model(samples[i]))
            f = d.graph.finish_arrays()
            if (f.inst < 0).any():
                bad = self.kinds.list[int(f.kid[int(np.argmax(f.inst < 0))])]
                raise RecordError(f"{bad.frame}: bt.run: a node outside every sample's forward")
            new = Fragment.of(f, returns)
        finally:
            if collecting:
                gc.enable()
        self.name_kinds()
        if len(todo) == len(samples):
            if self.cache is None:
                return [new]
            parts = new.per_sample()
        else:
            parts = new.per_sample()
        for i, part in zip(todo, parts):
            frags[i] = part
            if self.cache is not None:
                self.cache[id(samples[i])] = (samples[i], part)
        return frags  # type: ignore[return-value]

    def ask(self, plan: Plan, schedule: str) -> Any:
        """Starts scheduling the mini-batch; a function returning its batches
        (what runs in between overlaps batchlab's policy, in its own process)."""
        schedule = schedule_arg(schedule)
        if schedule.endswith(".json") and os.path.isfile(schedule):
            batches = read_schedule(schedule, plan, self.kind_list)
            return lambda: batches
        engine = self.engine or _engine_path()
        server = _Server.get(engine, schedule)
        server.send(graph_request(self.name or "model", plan, self.kind_list, self.bound))

        def answer() -> list[np.ndarray]:
            head, batches = server.receive()
            self.stats.lower_bound = head.get("lower_bound")
            self.stats.misses = head.get("misses", 0)
            self.stats.deferred = head.get("deferred", 0)
            return batches

        return answer

    def batches(self, samples: Iterable[Any], schedule: str = "depth") -> list[np.ndarray]:
        """The batches ``run(samples, schedule)`` would run, each an array of
        node ids, without running them. The nodes are numbered as in a
        recording of the same samples (its ``trace.json``): the same
        forward makes the same nodes in the same order, so these are the
        batches ``engine schedule --model DIR --policy P`` gives for a
        recording of ``samples`` (:attr:`stats` has the policy's misses and
        deferred decisions)."""
        samples = list(samples)
        self.stats = Stats()
        plan = Plan(self.discover(samples), self.kind_list)
        out = self.ask(plan, schedule)()
        self.stats.nodes, self.stats.batches = plan.n, len(out)
        return out

    def save_trace(self, samples: Iterable[Any], path: str) -> None:
        """Writes the mini-batch's graph as a trace file (what a schedule
        file must be made for: ``search optimise --trace PATH --out S.json``,
        then ``run(samples, schedule="S.json")``)."""
        samples = list(samples)
        plan = Plan(self.discover(samples), self.kind_list)
        kinds = self.kind_list
        present, type_of = plan.present, plan.type_of
        nodes = []
        for i, q in enumerate(plan.kid.tolist()):
            if kinds[q].what == "sum":
                args = plan.snode[plan.sptr[i] : plan.sptr[i + 1]].tolist()
            else:
                args = [a for a in plan.anode[i].tolist() if a >= 0]
            nodes.append({"type": int(type_of[i]), "args": args, "instance": int(plan.instance[i])})
        body = {
            "format": "batchlab-trace",
            "version": 1,
            "workload": self.name,
            "meta": {"batch_size": len(samples), "level": "cell", "recorded_by": "batchlab_torch.Runner"},
            "types": [{"name": kinds[q].type_name, "batchable": True} for q in present.tolist()],
            "nodes": nodes,
        }
        tmp = f"{path}.tmp-{os.getpid()}"
        with open(tmp, "w") as f:
            json.dump(body, f)
            f.write("\n")
        os.replace(tmp, path)

    def run(self, samples: Iterable[Any], schedule: str = "depth") -> list[Any]:
        """What ``[model(s) for s in samples]`` returns, computed by batches
        of ``schedule``; :attr:`stats` says where the time went."""
        samples = list(samples)
        self.stats = st = Stats()
        schedule = schedule_arg(schedule)
        if not samples:
            return []  # what [model(s) for s in []] returns
        t0 = time.perf_counter()
        frags = self.discover(samples)
        rets = [r for f in frags for r in f.rets]
        for r in rets:
            if r.bad is not None:
                raise RecordError(f"bt.run: a placeholder for {r.bad} was returned but never computed")
        plan = Plan(frags, self.kind_list)
        t1 = time.perf_counter()
        pending = self.ask(plan, schedule)
        # While batchlab's policy runs: the rest of the plan, and which node
        # outputs the samples return.
        plan.prepare()
        offs = plan.frag_offsets[:-1].tolist()
        gnode = np.concatenate([r.node + o for f, o in zip(frags, offs) for r in f.rets])
        gk = np.concatenate([r.k for r in rets])
        batches = pending()
        t2 = time.perf_counter()
        ex = Execution(self, plan, batches, torch.is_grad_enabled())
        ex.run()
        for ids in batches:
            ty = self.kind_list[int(plan.kid[ids[0]])].type_name
            st.per_type[ty] = st.per_type.get(ty, 0) + 1
        got = ex.values(gnode, gk) if len(gnode) else []
        out = []
        pos = 0
        for r in rets:
            if r.spec is None and r.at:  # returned one node output: it is the value
                out.append(got[pos])
                pos += 1
                continue
            leaves = list(r.leaves)
            for j in r.at:
                leaves[j] = got[pos]
                pos += 1
            out.append(tree_unflatten(leaves, r.spec))
        t3 = time.perf_counter()
        st.discover, st.schedule, st.execute = t1 - t0, t2 - t1, t3 - t2
        st.nodes, st.batches = plan.n, len(batches)
        modes = [k.mode for k in self.known.values()]
        st.direct_kinds, st.rows_kinds, st.vmap_kinds, st.loop_kinds = (
            modes.count(m) for m in ("direct", "rows", "vmap", "loop")
        )
        return out


def schedule_arg(schedule: Any) -> str:
    """A ``schedule`` argument as a string: a policy's name or a file's path
    (a ``pathlib.Path`` is a path)."""
    if isinstance(schedule, os.PathLike):
        schedule = os.fspath(schedule)
    if not isinstance(schedule, str) or not schedule:
        raise ScheduleError(
            f'schedule={schedule!r}: give a policy\'s name ("depth", "agenda"), a policy file P.yaml from '
            "`search train`, or a schedule file S.json of this mini-batch"
        )
    return schedule


_RUNNERS: dict[tuple[int, tuple], Runner] = {}


def run(
    model: nn.Module,
    samples: Iterable[Any],
    *,
    cells: dict[str, nn.Module],
    schedule: str = "depth",
    name: str | None = None,
) -> list[Any]:
    """``[model(s) for s in samples]``, computed by the batches of
    ``schedule``: ``"depth"``, ``"agenda"`` (or another batchlab policy
    name), a policy file ``P.yaml`` from ``search train``, or a schedule file
    ``S.json`` of this mini-batch. ``cells`` are the marked submodules, as
    for :class:`~batchlab_torch.Recorder`. The runner (and what it learned)
    is kept per model and cells; :func:`last_stats` tells where the time
    went."""
    key = (id(model), tuple(sorted((k, id(v)) for k, v in cells.items())))
    r = _RUNNERS.get(key)
    if r is None:
        r = Runner(model, cells, name=name)
        _RUNNERS[key] = r
    global _LAST
    out = r.run(samples, schedule)
    _LAST = r.stats
    return out


_LAST: Stats | None = None


def last_stats() -> Stats | None:
    """The :class:`Stats` of the last :func:`run`."""
    return _LAST
