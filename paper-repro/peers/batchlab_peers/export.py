"""Reading a model export (``engine export-model``; ``docs/model-export.md``).

An export is a safetensors file: a little-endian u64 header length N, N bytes
of JSON giving every tensor's ``dtype``, ``shape`` and ``data_offsets`` (a
byte range of the data section that follows the header), then the data.
Every parameter is the F32 tensor ``param/<role>/<param>``, with ``engine
export-model --gradients`` the reference executor's gradient of each is
``grad/<role>/<param>``, and the export's own header (cells, nodes, bindings,
reference loss) is the JSON string under ``__metadata__["batchlab"]``.

The layout is parsed here with the standard library, so the program
generator and its tests run without numpy or the safetensors package;
:meth:`Export.param` and :meth:`Export.grad` return numpy arrays (numpy is
imported when they are called).
"""

import array
import json
import math
import struct
import sys

FORMAT = "batchlab-model-export"
VERSION = 2
#: Key of the export's header in the safetensors ``__metadata__``.
METADATA_KEY = "batchlab"
#: First bytes of a version 1 export (its own container), recognised only to
#: refuse it with a message that says what to do.
V1_MAGIC = b"BLMODEL\0"
#: Header fields the harness reads.
REQUIRED = ("workload", "hidden", "seed", "instances", "op_nodes", "agenda_batches", "loss_nodes", "roles", "nodes")


def param_tensor(role, name):
    """Name of the tensor of parameter ``name`` of role ``role``."""
    return f"param/{role}/{name}"


def grad_tensor(role, name):
    """Name of the tensor of that parameter's reference gradient."""
    return f"grad/{role}/{name}"


class ExportError(Exception):
    """A file that is not a (readable) model export; the message names it."""


def _is_size(x):
    return isinstance(x, int) and not isinstance(x, bool) and x >= 0


def _check_roles(header, bad):
    """The parts of ``roles`` the reader itself walks: each role's name and
    its parameters' names and shapes."""
    roles = header["roles"]
    if not isinstance(roles, list) or not all(isinstance(r, dict) for r in roles):
        raise bad("metadata `batchlab`: `roles` is not a list of objects")
    for i, r in enumerate(roles):
        if not isinstance(r.get("role"), str) or not isinstance(r.get("params"), list):
            raise bad(f"metadata `batchlab`: roles[{i}] lacks a `role` name or a `params` list")
        for j, p in enumerate(r["params"]):
            if (
                not isinstance(p, dict)
                or not isinstance(p.get("name"), str)
                or not isinstance(p.get("shape"), list)
                or not all(map(_is_size, p["shape"]))
            ):
                raise bad(f"metadata `batchlab`: roles[{i}].params[{j}] is not a `name` and a `shape`")
    for key in ("nodes", "loss_nodes"):
        if not isinstance(header[key], list):
            raise bad(f"metadata `batchlab`: `{key}` is not a list")


def _check_nodes(header, bad):
    """The nodes the program generator walks: each node's role an index of
    ``roles``, one producer list per port of its role's cell, every
    producer an earlier node, ``row`` and ``label`` integers; the loss
    nodes, nodes."""
    roles, nodes = header["roles"], header["nodes"]
    for i, n in enumerate(nodes):
        where = f"metadata `batchlab`: nodes[{i}]"
        if not isinstance(n, dict):
            raise bad(f"{where} is not an object")
        r = n.get("role")
        if not _is_size(r) or r >= len(roles):
            raise bad(f"{where}: role {r!r} is not an index of `roles` ({len(roles)} roles)")
        ports = n.get("ports")
        want = roles[r].get("ports")
        if not isinstance(want, list):
            raise bad(f"metadata `batchlab`: roles[{r}] has no `ports` list")
        if not isinstance(ports, list) or len(ports) != len(want):
            raise bad(f"{where}: `ports` is not {len(want)} producer lists (role {roles[r]['role']})")
        for p, producers in enumerate(ports):
            if not isinstance(producers, list) or not all(_is_size(u) and u < i for u in producers):
                raise bad(f"{where}: ports[{p}] {producers!r} is not a list of earlier nodes")
        for key in ("row", "label"):
            if not isinstance(n.get(key), int) or isinstance(n.get(key), bool):
                raise bad(f"{where}: `{key}` is not an integer")
    for v in header["loss_nodes"]:
        if not _is_size(v) or v >= len(nodes):
            raise bad(f"metadata `batchlab`: loss node {v!r} is not a node ({len(nodes)} nodes)")


def _tensor_info(name, info, data_len, bad):
    """``(shape, begin, end)`` of one entry of the safetensors header, its
    byte range checked against the data section and its shape."""
    if not isinstance(info, dict):
        raise bad(f"tensor `{name}`: its header entry is not a JSON object")
    dtype, shape, offsets = info.get("dtype"), info.get("shape"), info.get("data_offsets")
    if dtype != "F32":
        raise bad(f"tensor `{name}` is {dtype}; batchlab reads F32 tensors")
    if not isinstance(shape, list) or not all(map(_is_size, shape)):
        raise bad(f"tensor `{name}`: shape {shape!r} is not a list of sizes")
    if not isinstance(offsets, list) or len(offsets) != 2 or not all(map(_is_size, offsets)):
        raise bad(f"tensor `{name}`: data_offsets {offsets!r} is not [begin, end]")
    begin, end = offsets
    if not begin <= end <= data_len:
        raise bad(f"tensor `{name}`: data_offsets [{begin}, {end}] lie outside the {data_len}-byte data section")
    want = 4 * math.prod(shape)
    if end - begin != want:
        raise bad(f"tensor `{name}`: {end - begin} bytes of data, but shape {shape} of F32 is {want}")
    return shape, begin, end


class Export:
    """A parsed export: ``header`` (the JSON object), ``roles`` and ``nodes``
    (its lists), and the tensors, read by parameter spec (an entry of a
    role's ``params``)."""

    def __init__(self, header, tensors, raw, data_start, path="<bytes>"):
        self.header = header
        self.roles = header["roles"]
        self.nodes = header["nodes"]
        self.path = path
        self._tensors = tensors  # name -> (shape, begin, end) in the data section
        self._raw = raw
        self._data_start = data_start
        # The role of each parameter spec of ``roles``: param() and grad()
        # take a spec alone, and a tensor's name needs its role.
        self._role_of = {id(p): r["role"] for r in self.roles for p in r["params"]}
        self._gradients = any(grad_tensor(r["role"], p["name"]) in tensors for r in self.roles for p in r["params"])

    @classmethod
    def from_bytes(cls, raw, path="<bytes>"):
        """Parses an export's bytes; every violation of the format is an
        :class:`ExportError` naming ``path``."""

        def bad(message):
            return ExportError(f"{path}: {message}")

        raw = bytes(raw)
        if raw.startswith(V1_MAGIC):
            raise bad(
                f"a version 1 model export; this batchlab reads version {VERSION} "
                "(safetensors): write it again with `engine export-model`"
            )
        if len(raw) < 8:
            raise bad(f"not a safetensors file: {len(raw)} bytes, too short for the header length")
        (n,) = struct.unpack("<Q", raw[:8])
        if n > len(raw) - 8:
            raise bad(
                f"header length {n} runs past the end of the file ({len(raw)} bytes): "
                "not a safetensors file, or a truncated one"
            )
        try:
            table = json.loads(raw[8 : 8 + n].decode("utf-8"))
        except (UnicodeDecodeError, ValueError) as e:
            raise bad(f"safetensors header: {e}") from None
        if not isinstance(table, dict):
            raise bad("safetensors header: not a JSON object")
        meta = table.pop("__metadata__", None)
        if not isinstance(meta, dict) or METADATA_KEY not in meta:
            raise bad(
                f"a safetensors file without `{METADATA_KEY}` metadata: not a batchlab "
                "model export (write one with `engine export-model`)"
            )
        try:
            header = json.loads(meta[METADATA_KEY])
        except (TypeError, ValueError) as e:
            raise bad(f"metadata `{METADATA_KEY}`: {e}") from None
        if not isinstance(header, dict):
            raise bad(f"metadata `{METADATA_KEY}`: not a JSON object")
        if header.get("format") != FORMAT or header.get("version") != VERSION:
            raise bad(
                f"format {header.get('format')!r} version {header.get('version')!r} is not "
                f"{FORMAT!r} version {VERSION}; write the export again with `engine export-model`"
            )
        for key in REQUIRED:
            if key not in header:
                raise bad(f"metadata `{METADATA_KEY}`: missing field {key!r}")
        _check_roles(header, bad)
        _check_nodes(header, bad)
        data_start = 8 + n
        data_len = len(raw) - data_start
        tensors = {name: _tensor_info(name, info, data_len, bad) for name, info in table.items()}
        # As safetensors requires, the tensors tile the data section: no
        # byte is in two tensors or in none.
        at = 0
        for name, (_, begin, end) in sorted(tensors.items(), key=lambda t: t[1][1:]):
            if begin != at:
                raise bad(
                    f"tensor `{name}` starts at byte {begin} of the data section, not {at}: "
                    "tensors overlap or leave a gap"
                )
            at = end
        if at != data_len:
            raise bad(f"the data section has {data_len} bytes, its tensors cover {at}")
        e = cls(header, tensors, raw, data_start, path)
        e._check_tensors(bad)
        return e

    def _check_tensors(self, bad):
        """The tensors against the header: every parameter present at its
        shape, every gradient or none, nothing else."""
        expected = set()
        for role, p in ((r["role"], p) for r in self.roles for p in r["params"]):
            need = [(param_tensor(role, p["name"]), f"role {role} parameter {p['name']}")]
            if self._gradients:
                need.append(
                    (
                        grad_tensor(role, p["name"]),
                        f"the gradient of role {role} parameter {p['name']}; "
                        "the export has other parameters' gradients",
                    )
                )
            for name, why in need:
                if name not in self._tensors:
                    raise bad(f"no tensor `{name}` ({why})")
                shape = self._tensors[name][0]
                if shape != p["shape"]:
                    raise bad(f"tensor `{name}` has shape {shape}, but {why} needs {p['shape']}")
                expected.add(name)
        stray = sorted(set(self._tensors) - expected)
        if stray:
            raise bad(f"tensor `{stray[0]}` is no parameter or gradient of the header's roles")

    @classmethod
    def read(cls, path):
        try:
            with open(path, "rb") as f:
                raw = f.read()
        except OSError as e:
            raise ExportError(f"{path}: {e.strerror or e}") from None
        return cls.from_bytes(raw, path)

    @property
    def data_floats(self):
        """Floats in all the tensors (parameters and gradients)."""
        return sum((end - begin) // 4 for _, begin, end in self._tensors.values())

    def _tensor(self, kind, spec):
        role = self._role_of.get(id(spec))
        if role is None:
            raise ExportError(f"{self.path}: parameter {spec.get('name')!r} is not an entry of this export's `roles`")
        return self._tensors[f"{kind}/{role}/{spec['name']}"]

    def _array(self, kind, spec):
        import numpy as np

        shape, begin, end = self._tensor(kind, spec)
        flat = np.frombuffer(self._raw, dtype="<f4", count=(end - begin) // 4, offset=self._data_start + begin)
        return flat.reshape(shape).astype(np.float32)

    def param_list(self, spec):
        """A parameter's floats as a flat Python list (row-major)."""
        _, begin, end = self._tensor("param", spec)
        a = array.array("f")
        a.frombytes(self._raw[self._data_start + begin : self._data_start + end])
        if sys.byteorder != "little":
            a.byteswap()
        return a.tolist()

    def param(self, spec):
        """A parameter as a numpy float32 array of its shape (row-major)."""
        return self._array("param", spec)

    def has_gradients(self):
        """Whether the export carries the reference's gradients
        (``engine export-model --gradients``)."""
        return self._gradients

    def grad(self, spec):
        """The reference executor's gradient of the loss with respect to a
        parameter, as a numpy float32 array of its shape."""
        if not self._gradients:
            raise ExportError(
                f"{self.path}: parameter {spec['name']!r} has no gradient; "
                "write the export with `engine export-model --gradients`"
            )
        return self._array("grad", spec)
