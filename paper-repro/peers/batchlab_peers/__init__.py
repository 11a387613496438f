"""batchlab peers: the real DyNet and PyTorch running batchlab's cells.

The harness reads a model export written by ``engine export-model`` (the
seeded parameters, every role's cell and every node's bound producers), turns
every role's cell into a function of the peer framework op for op
(:mod:`batchlab_peers.codegen`), runs the trace node by node with those
functions (:mod:`batchlab_peers.program`) and measures what the framework's
users pay per mini-batch (:mod:`batchlab_peers.measure`). It is driven by the
``peers`` experiments kind and ``paper-repro --only peers``; ``python -m
batchlab_peers --help`` lists its commands. Format and protocol:
``docs/peers.md``.

Only the standard library is needed to read exports and generate programs;
the peers themselves need their framework (``dynet38``, ``torch``) and numpy.
"""

#: Version of the harness's JSON output (``docs/peers.md``).
SCHEMA = 1
