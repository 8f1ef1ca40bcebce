"""The model's graph with its embedding tables kept int8: rows are picked, then made float.

The int8 export stores each weight as int8 numbers and scales, made float by a Cast and a Mul at
each run. onnxruntime's graph optimization folds those into float32 constants once, at load:
right for the matrices that every token multiplies (a query stays at a few ms), but the word
embedding table (30,522 x 384) then takes 47 MB of float32 for the few dozen rows a batch reads.
Here, ``Gather(Mul(Cast(table), scale), ids)`` becomes ``Mul(Cast(Gather(table, ids)),
Gather(scale, ids))``: the same float multiplications, on the rows read only, so the vectors are
the same bit for bit (tests/test_semantic_rewrite.py) and the session holds the table as its
11.7 MB of int8 (docs/semantic.md, "Where the resident memory goes").

The ONNX file is a protobuf; the few fields read or written here are those of onnx.proto
(ModelProto.graph = 7; GraphProto node = 1, initializer = 5, value_info = 13; NodeProto input = 1,
output = 2, name = 3, op_type = 4, attribute = 5, domain = 7; AttributeProto name = 1, i = 3,
type = 20; TensorProto dims = 1, data_type = 2, name = 8). Every other field is copied as it was.
A graph not laid out as this expects is left alone (:func:`gather_int8` answers None).
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from typing import Final

_INT8: Final = 3
_FLOAT: Final = 1
_ATTRIBUTE_INT: Final = 2


def _varint(data: memoryview, at: int) -> tuple[int, int]:
    value = shift = 0
    while True:
        byte = data[at]
        at += 1
        value |= (byte & 0x7F) << shift
        if byte < 0x80:
            return value, at
        shift += 7
        if shift > 63:
            raise ValueError("a varint longer than 10 bytes")


def _fields(data: memoryview) -> list[tuple[int, int, int | memoryview, memoryview]]:
    """Each field of one message: (number, wire type, value, the field's whole bytes)."""
    found = []
    at = 0
    while at < len(data):
        start = at
        key, at = _varint(data, at)
        number, wire = key >> 3, key & 7
        value: int | memoryview
        if wire == 0:
            value, at = _varint(data, at)
        elif wire == 2:
            size, at = _varint(data, at)
            if at + size > len(data):
                raise ValueError("a field longer than its message")
            value, at = data[at:at + size], at + size
        elif wire in (1, 5):
            size = 8 if wire == 1 else 4
            value, at = data[at:at + size], at + size
        else:
            raise ValueError(f"wire type {wire}")
        found.append((number, wire, value, data[start:at]))
    return found


def _encode_varint(value: int) -> bytes:
    out = bytearray()
    while True:
        byte = value & 0x7F
        value >>= 7
        if value:
            out.append(byte | 0x80)
        else:
            out.append(byte)
            return bytes(out)


def _bytes_field(number: int, value: bytes) -> bytes:
    return _encode_varint(number << 3 | 2) + _encode_varint(len(value)) + value


def _int_field(number: int, value: int) -> bytes:
    return _encode_varint(number << 3) + _encode_varint(value)


def _node(op_type: str, inputs: list[str], output: str, name: str, attribute: bytes = b"") -> bytes:
    message = b"".join(_bytes_field(1, item.encode()) for item in inputs)
    message += _bytes_field(2, output.encode()) + _bytes_field(3, name.encode()) + _bytes_field(4, op_type.encode())
    if attribute:
        message += _bytes_field(5, attribute)
    return _bytes_field(1, message)


@dataclass
class _Node:
    whole: memoryview
    op_type: str = ""
    domain: str = ""
    inputs: list[str] = field(default_factory=list)
    outputs: list[str] = field(default_factory=list)
    ints: dict[str, int] = field(default_factory=dict)


def _text(value: int | memoryview) -> str:
    assert isinstance(value, memoryview)
    return bytes(value).decode("utf-8")


def _parse_node(value: memoryview, whole: memoryview) -> _Node:
    node = _Node(whole)
    for number, _, item, _ in _fields(value):
        if number == 1:
            node.inputs.append(_text(item))
        elif number == 2:
            node.outputs.append(_text(item))
        elif number == 4:
            node.op_type = _text(item)
        elif number == 7:
            node.domain = _text(item)
        elif number == 5:
            assert isinstance(item, memoryview)
            name, integer = "", None
            for inner, _, part, _ in _fields(item):
                if inner == 1:
                    name = _text(part)
                elif inner == 3 and isinstance(part, int):
                    integer = part - (1 << 64) if part >= 1 << 63 else part
            node.ints[name] = integer if integer is not None else -1
    return node


def _tensor_header(value: memoryview) -> tuple[str, int, list[int]]:
    """An initializer's name, data type and dims (its data is skipped, not read)."""
    name, data_type, dims = "", 0, []
    for number, wire, item, _ in _fields(value):
        if number == 8:
            name = _text(item)
        elif number == 2 and isinstance(item, int):
            data_type = item
        elif number == 1 and isinstance(item, int):
            dims.append(item)
        elif number == 1 and wire == 2:  # packed
            assert isinstance(item, memoryview)
            at = 0
            while at < len(item):
                dim, at = _varint(item, at)
                dims.append(dim)
    return name, data_type, dims


def gather_int8(model: bytes) -> bytes | None:
    """`model` with each int8 table that is only gathered from picked as int8 (the module's rewrite);
    None when no table is laid out so, or the bytes are not a model this understands."""
    try:
        return _rewrite(model)
    except (ValueError, IndexError, UnicodeDecodeError, AssertionError):
        return None


def _rewrite(model: bytes) -> bytes | None:
    top = _fields(memoryview(model))
    graphs = [item for number, wire, item, _ in top if number == 7 and wire == 2]
    if len(graphs) != 1:
        return None
    assert isinstance(graphs[0], memoryview)
    parts = _fields(graphs[0])
    nodes = [_parse_node(item, whole) for number, _, item, whole in parts if number == 1 and isinstance(item, memoryview)]
    tensors = {}
    for number, _, item, _ in parts:
        if number == 5 and isinstance(item, memoryview):
            name, data_type, dims = _tensor_header(item)
            tensors[name] = (data_type, dims)
    producer = {output: node for node in nodes for output in node.outputs}
    uses = Counter(name for node in nodes for name in node.inputs)
    gone: set[int] = set()  # ids of the Cast and Mul nodes no longer needed
    replaced: dict[int, bytes] = {}
    dropped_values: set[str] = set()
    for node in nodes:
        if node.op_type != "Gather" or node.domain or node.ints.get("axis", 0) != 0 or len(node.inputs) != 2:
            continue
        table, ids = node.inputs
        mul = producer.get(table)
        if mul is None or mul.op_type != "Mul" or mul.domain or len(mul.inputs) != 2 or uses[table] != 1:
            continue
        floats, scale = mul.inputs
        cast = producer.get(floats)
        if cast is None or cast.op_type != "Cast" or cast.domain or cast.ints.get("to") != _FLOAT \
                or len(cast.inputs) != 1 or uses[floats] != 1:
            continue
        quantized = tensors.get(cast.inputs[0])
        scales = tensors.get(scale)
        if quantized is None or scales is None or quantized[0] != _INT8 or len(quantized[1]) != 2 \
                or scales[0] != _FLOAT or scales[1] != [quantized[1][0], 1] or uses[cast.inputs[0]] != 1:
            continue
        out = node.outputs[0]
        to_float = _bytes_field(1, b"to") + _int_field(3, _FLOAT) + _int_field(20, _ATTRIBUTE_INT)
        replaced[id(node)] = (_node("Gather", [cast.inputs[0], ids], out + "_q8", out + "_gather_q8")
                              + _node("Gather", [scale, ids], out + "_scale8", out + "_gather_scale8")
                              + _node("Cast", [out + "_q8"], out + "_f8", out + "_cast8", to_float)
                              + _node("Mul", [out + "_f8", out + "_scale8"], out, out + "_mul8"))
        gone.update((id(cast), id(mul)))
        dropped_values.update((table, floats))
    if not replaced:
        return None
    # Pieces joined once: the model's 23 MB are copied one time, not once per level.
    graph: list[bytes | memoryview] = []
    at_node = 0
    for number, _, item, whole in parts:
        if number == 1 and isinstance(item, memoryview):
            node = nodes[at_node]
            at_node += 1
            if id(node) not in gone:
                graph.append(replaced.get(id(node), whole))
        elif number == 13 and isinstance(item, memoryview) and any(
                inner == 1 and _text(value) in dropped_values for inner, _, value, _ in _fields(item)):
            continue  # the type of a value no node makes now
        else:
            graph.append(whole)
    pieces: list[bytes | memoryview] = []
    for number, wire, _, whole in top:
        if number == 7 and wire == 2:
            pieces.append(_encode_varint(7 << 3 | 2) + _encode_varint(sum(len(piece) for piece in graph)))
            pieces.extend(graph)
        else:
            pieces.append(whole)
    return b"".join(pieces)
