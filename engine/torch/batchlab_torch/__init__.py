"""batchlab_torch: bring your own PyTorch model to batchlab.

Record a model's own eager, per-instance forward into a batchlab model
folder (a trace, one cell per marked submodule, the weights and PyTorch's
own outputs), then study it with batchlab's tools, or run any batchlab
schedule inside PyTorch with :func:`run`. See ``docs/torch.md``.

::

    import batchlab_torch as bt

    rec = bt.Recorder(model, cells={"leaf": model.leaf, "node": model.node, "out": model.out})
    with rec:
        for sample in samples:
            model(sample)
    rec.save("out/my-model")
"""

from ._recording.graph import RecordError
from ._recording.record import Recorder
from ._running.runner import Runner, Stats, last_stats, run
from ._running.schedules import ScheduleError

__version__ = "0.1.0"

__all__ = ["Recorder", "RecordError", "Runner", "ScheduleError", "Stats", "last_stats", "run", "__version__"]
