"""Example (d): a BiLSTM tagger written the practitioner's way (the sentence
embedded at once, nn.LSTMCell loops, the classifier and the loss on whole
sentences) over the WikiNER sentences of a built-in trace: whole-sentence
calls become one node per word."""

from __future__ import annotations

from pathlib import Path

import torch

from batchlab_torch.examples.bilstm_tagger import BiLSTMTagger, setup
from batchlab_torch.examples.data import wikiner_sentences

from .conftest import run, run_json
from .pipeline import full


def test_bilstm_tagger_goes_through_the_pipeline(engine: str, search: str, planner: str, tmp_path: Path) -> None:
    trace = tmp_path / "tagger.json"
    run(
        engine,
        "record",
        "--workload",
        "bilstm-tagger",
        "--batch",
        "6",
        "--hidden",
        "8",
        "--seed",
        "7",
        "--out",
        str(trace),
    )
    sents = wikiner_sentences(str(trace))
    assert len(sents) == 6 and all(len(s.words) == len(s.tags) > 0 for s in sents)
    vocab = max(w for s in sents for w in s.words) + 1

    def make() -> tuple[torch.nn.Module, dict]:
        m = BiLSTMTagger(vocab, hidden=16)
        return m, {"fwd": m.fwd, "bwd": m.bwd}

    r = full(engine, search, planner, make, sents, tmp_path)
    # One node per word and direction, as the built-in workload has.
    words = sum(len(s.words) for s in sents)
    roles = {x["role"]: x["nodes"] for x in run_json(engine, "inspect", "--model", str(r["folder"]))["roles"]}
    assert roles["fwd"] == roles["bwd"] == words, roles
    # The example's setup rebuilds the recorded sentences from the folder.
    got = setup(str(r["folder"]))["samples"]
    assert [(s.words, s.tags) for s in got] == [(s.words, s.tags) for s in sents]
