"""Running (internal): ``bt.run``'s pipeline. A mini-batch's graph is
discovered with placeholders (:mod:`.discover`), laid out as arrays
(:mod:`.plan`), scheduled by batchlab (:mod:`.schedules`) and executed
batch by batch with the user's own modules (:mod:`.execute`), all driven by
a :class:`~.runner.Runner`. The public names are re-exported by
``batchlab_torch``."""
