"""An ONNX model's bytes, written without the ``onnx`` package: the few protobuf messages a feed-forward graph needs.

The ``onnx`` package would bring protobuf and take about a second to import,
more than the whole NumPy encoder takes to start; ONNX Runtime itself needs
only the serialized ``ModelProto``. What is written here is the subset of
``onnx.proto`` (IR version 8) a graph of named operators over typed inputs
needs: nodes with integer, float and integer-list attributes, inputs and
outputs with symbolic dimensions, and initializers whose data lives outside
the model (handed to the session as ``OrtValue`` objects, so the weights are
never copied into the model's bytes).

Protobuf's wire format: each field is a key (field number << 3 | wire type)
then a varint (type 0), a 4-byte little-endian value (type 5) or a length and
bytes (type 2); repeated and nested fields repeat that.
"""

from __future__ import annotations

import struct
from collections.abc import Iterable, Sequence
from typing import Final

__all__ = ["FLOAT", "INT32", "OnnxGraph"]

#: TensorProto.DataType values.
FLOAT: Final = 1
INT32: Final = 6

_IR_VERSION: Final = 8
_VARINT, _FIXED32, _BYTES = 0, 5, 2
# AttributeProto.AttributeType values.
_ATTRIBUTE_FLOAT, _ATTRIBUTE_INT, _ATTRIBUTE_INTS = 1, 2, 7
_EXTERNAL: Final = 1  # TensorProto.DataLocation


def _varint(value: int) -> bytes:
    if value < 0:
        value += 1 << 64  # int64 fields: two's complement, ten bytes
    out = bytearray()
    while True:
        low, value = value & 0x7F, value >> 7
        if value:
            out.append(low | 0x80)
        else:
            out.append(low)
            return bytes(out)


def _key(field: int, wire: int) -> bytes:
    return _varint(field << 3 | wire)


def _int(field: int, value: int) -> bytes:
    return _key(field, _VARINT) + _varint(value)


def _float(field: int, value: float) -> bytes:
    return _key(field, _FIXED32) + struct.pack("<f", value)


def _bytes(field: int, value: bytes) -> bytes:
    return _key(field, _BYTES) + _varint(len(value)) + value


def _text(field: int, value: str) -> bytes:
    return _bytes(field, value.encode("utf-8"))


def _value_info(name: str, element: int, shape: Sequence[int | str]) -> bytes:
    """A ValueInfoProto: a tensor's name, element type and dimensions (an int, or a name for a size known at run time)."""
    dims = b"".join(_bytes(1, _int(1, dim) if isinstance(dim, int) else _text(2, dim)) for dim in shape)
    tensor_type = _int(1, element) + _bytes(2, dims)
    return _text(1, name) + _bytes(2, _bytes(1, tensor_type))


class OnnxGraph:
    """A graph built node by node; :meth:`model` gives the serialized ModelProto.

    Args:
        opsets: the operator sets used, as (domain, version); ``""`` is the standard domain.
    """

    def __init__(self, opsets: Iterable[tuple[str, int]]) -> None:
        self._opsets = list(opsets)
        self._nodes: list[bytes] = []
        self._inputs: list[bytes] = []
        self._outputs: list[bytes] = []
        self._initializers: list[bytes] = []
        self._names = 0

    def input(self, name: str, element: int, shape: Sequence[int | str]) -> str:
        """Declare a graph input; return its name."""
        self._inputs.append(_value_info(name, element, shape))
        return name

    def output(self, name: str, element: int, shape: Sequence[int | str]) -> None:
        """Declare that the value called *name* is a graph output."""
        self._outputs.append(_value_info(name, element, shape))

    def external(self, name: str, element: int, shape: Sequence[int]) -> str:
        """Declare an initializer whose data the session is given apart (``SessionOptions.add_external_initializers``)."""
        location = _bytes(13, _text(1, "location") + _text(2, name))  # never read: the session gets the value itself
        self._initializers.append(
            b"".join(_int(1, dim) for dim in shape) + _int(2, element) + _text(8, name) + location + _int(14, _EXTERNAL)
        )
        return name

    def node(
        self, op_type: str, inputs: Sequence[str], *, domain: str = "", output: str | None = None, **attributes: int | float | Sequence[int]
    ) -> str:
        """Add a node of one output; return the output's name (*output*, or a fresh one)."""
        self._names += 1
        name = output or f"{op_type.lower()}_{self._names}"
        encoded = [b"".join(_text(1, value) for value in inputs), _text(2, name), _text(3, f"n{self._names}"), _text(4, op_type)]
        for key, value in sorted(attributes.items()):
            if isinstance(value, float):
                attribute = _text(1, key) + _float(2, value) + _int(20, _ATTRIBUTE_FLOAT)
            elif isinstance(value, int):
                attribute = _text(1, key) + _int(3, value) + _int(20, _ATTRIBUTE_INT)
            else:
                attribute = _text(1, key) + b"".join(_int(8, item) for item in value) + _int(20, _ATTRIBUTE_INTS)
            encoded.append(_bytes(5, attribute))
        if domain:
            encoded.append(_text(7, domain))
        self._nodes.append(b"".join(encoded))
        return name

    def model(self, name: str) -> bytes:
        """The ModelProto's bytes."""
        graph = b"".join(
            [
                *(_bytes(1, node) for node in self._nodes),
                _text(2, name),
                *(_bytes(5, tensor) for tensor in self._initializers),
                *(_bytes(11, value) for value in self._inputs),
                *(_bytes(12, value) for value in self._outputs),
            ]
        )
        opsets = b"".join(_bytes(8, (_text(1, domain) if domain else b"") + _int(2, version)) for domain, version in self._opsets)
        return _int(1, _IR_VERSION) + _text(2, "ghostjournal") + _bytes(7, graph) + opsets
