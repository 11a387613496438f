"""Command line of the peer harness (``python -m batchlab_peers``).

Commands write one JSON object to ``--result FILE`` (atomically), never to
standard output: DyNet's profiler and its exit-time timing report write
there. Exit status: 0 done, 2 bad input (the message names the file or
flag), 3 peer unavailable (its framework does not import).
"""

import argparse
import json
import os
import platform
import sys
import tempfile

from . import SCHEMA, codegen, explain, peers, profile
from .export import Export, ExportError


def write_result(path, obj):
    obj = {"schema": SCHEMA, **obj}
    if path is None:
        print(json.dumps(obj, indent=2))
        return
    tmp = f"{path}.{os.getpid()}.tmp"
    with open(tmp, "w") as f:
        json.dump(obj, f)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)


def cmd_probe(a):
    out = {"python": platform.python_version(), "frameworks": {}}
    for fw in ("dynet", "torch", "dgl"):
        version, why = peers.probe(fw)
        out["frameworks"][fw] = {"available": version is not None, "version": version, "reason": why}
    write_result(a.result, out)
    return 0


def cmd_program(a):
    e = Export.read(a.export)
    src = codegen.program_source(e, a.backend)
    if a.out:
        with open(a.out, "w") as f:
            f.write(src)
    else:
        sys.stdout.write(src)
    ops = codegen.program_ops(e)
    print(f"{ops} ops ({e.header['op_nodes']} in batchlab's op-level expansion)", file=sys.stderr)
    return 0


def loss_check(e, loss):
    ref = e.header.get("reference_loss")
    rel = None if ref is None or loss is None else abs(loss - ref) / max(abs(ref), 1e-30)
    return {"loss": loss, "reference_loss": ref, "loss_rel_err": rel}


def cmd_run(a):
    e = Export.read(a.export)
    if a.train and not e.has_gradients():
        raise ExportError(f"{a.export}: --train needs the reference's gradients (engine export-model --gradients)")
    fsm = None
    with tempfile.TemporaryDirectory() as work:
        if a.peer == "torch-fsm":
            if not (a.fsm_trace and a.fsm_export):
                raise ExportError("torch-fsm needs --fsm-trace and --fsm-export (the trace its FSM is learned on)")
            fsm = peers.learn_fsm(
                Export.read(a.fsm_export),
                a.fsm_trace,
                os.path.join(work, "fsm.yaml"),
                a.fsm_episodes,
                a.fsm_seed,
                a.fsm_encoding,
            )
        p = peers.open_peer(a.peer, e, a.threads, train=a.train, trace=a.trace, fsm=fsm, device=a.device)
        m = peers.measure(p, a.warmup, a.repeats, e if a.train else None)
    out = {
        "peer": p.name,
        "framework": p.framework,
        "version": p.version,
        "python": platform.python_version(),
        "workload": e.header["workload"],
        "hidden": e.header["hidden"],
        "instances": e.header["instances"],
        "threads": a.threads,
        "device": a.device,
        "warmup": a.warmup,
        "repeats": a.repeats,
        "program_ops": p.program.ops,
        "expected_ops": e.header["op_nodes"],
        "train": a.train,
        "batches": m["batches"],
        **{
            k: m[k] for k in ("construction_s", "forward_s", "backward_s", "total_s", "cpu_s", "samples", "cpu_samples")
        },
        **{k: m[k] for k in ("grad_rel_err", "grad_worst") if k in m},
        **loss_check(e, m["loss"]),
    }
    write_result(a.result, out)
    return 0


def cmd_count(a):
    e = Export.read(a.export)
    p = peers.DynetPeer(e, autobatch=1, profiling=2)
    run, text = profile.capture_stdout(p.run_once)
    counts = profile.parse(text)
    out = {
        "peer": p.name,
        "version": p.version,
        "dynet_batches": counts["batches"],
        "dynet_nodes": counts["nodes"],
        "dynet_by_kind": counts["by_kind"],
        "agenda_by_op": e.header.get("agenda_by_op"),
        "parameter_batches": counts["parameters"],
        "constant_batches": counts["constants"],
        "forward_calls": counts["forward_calls"],
        "agenda_batches": e.header["agenda_batches"],
        "program_ops": p.program.ops,
        "expected_ops": e.header["op_nodes"],
        "two_node_ops": codegen.two_node_ops(e, "dynet"),
        "attribution": explain.attribution(e),
        **loss_check(e, run["loss"]),
    }
    write_result(a.result, out)
    return 0


def cmd_explain(a):
    e = Export.read(a.export)
    out = {
        "workload": e.header["workload"],
        "agenda_batches": e.header["agenda_batches"],
        "attribution": explain.attribution(e),
    }
    write_result(a.result, out)
    return 0


def main(argv=None):
    ap = argparse.ArgumentParser(prog="python -m batchlab_peers", description=__doc__.splitlines()[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    pr = sub.add_parser("probe", help="which peer frameworks import, and their versions")
    pr.add_argument("--result", help="JSON output file (default: standard output)")
    pg = sub.add_parser("program", help="print the generated program of an export")
    pg.add_argument("--export", required=True, help="model export (engine export-model)")
    pg.add_argument("--backend", choices=codegen.BACKENDS, default="dynet")
    pg.add_argument("--out", help="write the source here instead of standard output")
    ru = sub.add_parser("run", help="time one peer on an export (warm-up, repeats, medians)")
    ru.add_argument("--export", required=True)
    ru.add_argument("--peer", required=True, choices=peers.PEERS)
    ru.add_argument("--threads", type=int, default=1, help="threads (PyTorch set_num_threads)")
    ru.add_argument("--device", default="cpu", help="cpu, cuda or cuda:N (the PyTorch peers; DyNet and DGL: cpu)")
    ru.add_argument("--warmup", type=int, default=1)
    ru.add_argument("--repeats", type=int, default=3)
    ru.add_argument(
        "--train", action="store_true", help="time training steps (forward + backward) and check the gradients"
    )
    ru.add_argument("--result", help="JSON output file (default: standard output)")
    ru.add_argument("--trace", help="torch-depth/agenda/fsm: the export's trace (which sample each node is of)")
    ru.add_argument("--fsm-trace", help="torch-fsm: the trace its FSM is learned on (search train, every encoding)")
    ru.add_argument("--fsm-export", help="torch-fsm: that trace's export (its cells and bindings)")
    ru.add_argument("--fsm-episodes", type=int, default=1000, help="torch-fsm: search train's episode budget")
    ru.add_argument("--fsm-seed", type=int, default=1, help="torch-fsm: search train's seed")
    ru.add_argument("--fsm-encoding", default="all", help="torch-fsm: search train's encoding (all: the best kept)")
    co = sub.add_parser("count", help="DyNet agenda's executed batches from its profiler")
    co.add_argument("--export", required=True)
    co.add_argument("--result", help="JSON output file (default: standard output)")
    ex = sub.add_parser("explain", help="DyNet's and batchlab's agenda batch counts, simulated rule by rule")
    ex.add_argument("--export", required=True)
    ex.add_argument("--result", help="JSON output file (default: standard output)")
    a = ap.parse_args(argv)
    for flag in ("threads", "warmup", "repeats"):
        v = getattr(a, flag, None)
        if v is not None and v < (0 if flag == "warmup" else 1):
            ap.error(f"--{flag} {v} is out of range")
    try:
        return {"probe": cmd_probe, "program": cmd_program, "run": cmd_run, "count": cmd_count, "explain": cmd_explain}[
            a.cmd
        ](a)
    except ExportError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    except codegen.CodegenError as e:
        print(f"error: {a.export}: {e}", file=sys.stderr)
        return 2
    except ValueError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    except peers.PeerUnavailable as e:
        print(f"peer unavailable: {e}", file=sys.stderr)
        return 3


if __name__ == "__main__":
    sys.exit(main())
