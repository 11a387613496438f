"""Reading a model export (``engine export-model``; ``docs/model-export.md``).

Layout: 8 bytes of magic ``BLMODEL\\0``, a little-endian u64 header length
N, N bytes of JSON header, then the parameters as little-endian f32 at the
header's offsets (in floats). Only the standard library is used, so the
program generator and its tests run without numpy; :meth:`Export.param`
returns a numpy array when numpy is importable.
"""

import array
import json
import struct
import sys

MAGIC = b"BLMODEL\0"
FORMAT = "batchlab-model-export"
VERSION = 1


class ExportError(Exception):
    """A file that is not a (readable) model export; the message names it."""


class Export:
    """A parsed export: ``header`` (the JSON object) and the raw data."""

    def __init__(self, header, data, path="<bytes>"):
        self.header = header
        self._data = data
        self.path = path
        self.roles = header["roles"]
        self.nodes = header["nodes"]

    @classmethod
    def from_bytes(cls, raw, path="<bytes>"):
        if len(raw) < 16 or raw[:8] != MAGIC:
            raise ExportError(
                f"{path}: not a batchlab model export (magic BLMODEL missing); "
                "write one with `engine export-model`"
            )
        (n,) = struct.unpack("<Q", raw[8:16])
        if 16 + n > len(raw):
            raise ExportError(f"{path}: header length {n} runs past the end of the file")
        try:
            header = json.loads(raw[16 : 16 + n].decode("utf-8"))
        except (UnicodeDecodeError, ValueError) as e:
            raise ExportError(f"{path}: header: {e}") from None
        if header.get("format") != FORMAT or header.get("version") != VERSION:
            raise ExportError(
                f"{path}: format {header.get('format')!r} version {header.get('version')!r} "
                f"is not {FORMAT!r} version {VERSION}"
            )
        for key in ("workload", "hidden", "roles", "nodes", "data_floats", "loss_nodes", "op_nodes"):
            if key not in header:
                raise ExportError(f"{path}: header: missing field {key!r}")
        data = raw[16 + n :]
        if len(data) != 4 * header["data_floats"]:
            raise ExportError(
                f"{path}: data section has {len(data)} bytes, the header says "
                f"{header['data_floats']} floats"
            )
        return cls(header, data, path)

    @classmethod
    def read(cls, path):
        try:
            with open(path, "rb") as f:
                raw = f.read()
        except OSError as e:
            raise ExportError(f"{path}: {e.strerror or e}") from None
        return cls.from_bytes(raw, path)

    def param_list(self, spec):
        """A parameter's floats as a flat Python list (row-major)."""
        a = array.array("f")
        a.frombytes(self._data[4 * spec["offset"] : 4 * (spec["offset"] + spec["numel"])])
        if sys.byteorder != "little":
            a.byteswap()
        return a.tolist()

    def param(self, spec):
        """A parameter as a numpy float32 array of its shape (row-major)."""
        import numpy as np

        flat = np.frombuffer(self._data, dtype="<f4", count=spec["numel"], offset=4 * spec["offset"])
        return flat.reshape(spec["shape"]).astype(np.float32)

    def has_gradients(self):
        """Whether the export carries the reference's gradients
        (``engine export-model --gradients``)."""
        return all("grad_offset" in p for r in self.roles for p in r["params"])

    def grad(self, spec):
        """The reference executor's gradient of the loss with respect to a
        parameter, as a numpy float32 array of its shape."""
        import numpy as np

        if "grad_offset" not in spec:
            raise ExportError(
                f"{self.path}: parameter {spec['name']!r} has no gradient; "
                "write the export with `engine export-model --gradients`"
            )
        flat = np.frombuffer(self._data, dtype="<f4", count=spec["numel"], offset=4 * spec["grad_offset"])
        return flat.reshape(spec["shape"]).astype(np.float32)
