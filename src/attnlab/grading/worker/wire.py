"""The wire format between the grader and the worker that runs student code.

A message is JSON plus a list of ``.npy`` blobs. Blobs are read back with ``allow_pickle=False``, so
nothing the worker sends can run code in the grader. Values that can travel:

- ``None``, ``bool``, ``int``, ``float``, ``str``
- ``list``, ``tuple``, ``dict`` (keys: ``str``, ``int``, ``float``, ``bool``, ``None``, or tuples of them, as a
  BPE pair count ``{(97, 98): 3}``)
- ``torch.Tensor`` and ``numpy.ndarray`` of bool, integer, floating or complex dtype
- ``torch.dtype``
- ``torch.Generator`` on the CPU (its state travels: the receiver gets a generator that draws the same numbers)
- ``ObjectHandle`` (a reference to an object living in the worker)

Frame layout: ``u64 length`` then ``u32 header length``, the UTF-8 JSON header, then the blobs back to back
(their byte lengths are listed in the header).
"""

from __future__ import annotations

import io
import json
import math
import re
import struct
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch

# Budgets sized with room above the largest replies the labs' solutions send (benchmarks/README.md). A frame over
# them is treated as broken.
MAX_FRAME_BYTES = 32 * 2**20  # several times the largest real frame
MAX_HEADER_BYTES = 2**20  # the JSON part of a frame
MAX_JSON_OBJECTS = 20_000  # values in the JSON part (counted before parsing: nested empty lists amplify)
MAX_DEPTH = 32
_ALLOWED_KINDS = {"b", "i", "u", "f", "c"}
_GENERATOR_STATE_BYTES = torch.Generator().get_state().numel()  # 5056 on CPU (Mersenne Twister and more)
_NPY_HEADER_MAX = 2**16 + 16  # an .npy header is shorter (numpy's own limit is 10,000 bytes)


def _numpy_dtypes() -> dict:
    """torch dtype -> the numpy dtype of the array a tensor of that label must carry (the dtypes numpy has)."""
    out = {}
    for name in ("bool", "uint8", "uint16", "uint32", "uint64", "int8", "int16", "int32", "int64", "float16",
                 "float32", "float64", "complex64", "complex128"):
        try:
            out[getattr(torch, name)] = torch.empty(0, dtype=getattr(torch, name)).numpy().dtype
        except (AttributeError, TypeError, RuntimeError):  # an older torch without that dtype
            continue
    return out


_NUMPY_DTYPES = _numpy_dtypes()
TENSOR_DTYPES = frozenset(_NUMPY_DTYPES) | {torch.bfloat16}  # the tensor dtypes that travel (bfloat16 as float32)
# The .npy header np.save writes for a little-endian or byte-order-free array, parsed without numpy's general
# (ast-based) reader, which was a quarter of the grader's time in the wire: anything else goes to numpy's reader.
_NPY_MAGIC = b"\x93NUMPY\x01\x00"
_NPY_DESCRS = {dt.str: dt for dt in map(np.dtype, _NUMPY_DTYPES.values()) if dt.byteorder in "<|="}
_NPY_HEADER = re.compile(rb"\{'descr': '([<|][a-z]\d{1,2})', 'fortran_order': (False|True), "
                         rb"'shape': \(((?:\d{1,19}, )*\d{1,19},?|)\), \} *\n")


class WireError(Exception):
    """A value cannot be sent, or a received frame is malformed."""


@dataclass(frozen=True)
class ObjectHandle:
    """A reference to an object created in the worker (``StudentAPI.create``)."""

    id: int


def _tensor_to_numpy(t: torch.Tensor) -> np.ndarray:
    t = t.detach()
    if t.dtype == torch.bfloat16:
        t = t.to(torch.float32)
    return t.cpu().contiguous().numpy()


def _encode(value: Any, blobs: list[bytes], depth: int) -> Any:
    if depth > MAX_DEPTH:
        raise WireError(f"value nested deeper than {MAX_DEPTH} levels")
    if value is None or isinstance(value, (bool, str)):
        return value
    if isinstance(value, int):
        return int(value)
    if isinstance(value, float):
        if math.isfinite(value):
            return float(value)
        return {"__float__": repr(float(value))}
    if isinstance(value, torch.Tensor):
        arr = _tensor_to_numpy(value)
        blobs.append(_npy_bytes(arr))
        return {"__tensor__": len(blobs) - 1, "dtype": str(value.dtype).removeprefix("torch.")}
    if isinstance(value, np.ndarray):
        blobs.append(_npy_bytes(value))
        return {"__ndarray__": len(blobs) - 1}
    if isinstance(value, np.generic):
        return _encode(value.item(), blobs, depth + 1)
    if isinstance(value, tuple):  # containers before torch.Generator, whose isinstance is slow
        return {"__tuple__": [_encode(v, blobs, depth + 1) for v in value]}
    if isinstance(value, list):
        return [_encode(v, blobs, depth + 1) for v in value]
    if isinstance(value, dict):
        if all(isinstance(k, str) for k in value):
            return {"__dict__": [[k, _encode(v, blobs, depth + 1)] for k, v in value.items()]}
        for k in value:
            if not _plain_key(k):
                raise WireError(f"dict keys must be str, int, float, bool, None or tuples of them, got "
                                f"{type(k).__name__}")
        return {"__map__": [[_encode(k, blobs, depth + 1), _encode(v, blobs, depth + 1)] for k, v in value.items()]}
    if isinstance(value, torch.dtype):
        return {"__dtype__": str(value).removeprefix("torch.")}
    if isinstance(value, torch.Generator):
        if value.device.type != "cpu":
            raise WireError(f"cannot send a torch.Generator on {value.device}: only CPU generators travel")
        blobs.append(_npy_bytes(value.get_state().numpy()))
        return {"__generator__": len(blobs) - 1}
    if isinstance(value, ObjectHandle):
        return {"__handle__": int(value.id)}
    raise WireError(f"cannot send a value of type {type(value).__module__}.{type(value).__qualname__}")


def _plain_key(key: Any, depth: int = 0) -> bool:
    """A dict key that can travel: hashable plain values only (never a tensor, a list or an object)."""
    if key is None or isinstance(key, (str, int, float)):  # bool is an int
        return True
    return isinstance(key, tuple) and depth < MAX_DEPTH and all(_plain_key(k, depth + 1) for k in key)


def _npy_bytes(arr: np.ndarray) -> bytes:
    if arr.dtype.kind not in _ALLOWED_KINDS:
        raise WireError(f"cannot send an array of dtype {arr.dtype}")
    # np.ascontiguousarray would turn a 0-d array into shape (1,): copy instead
    arr = arr if arr.flags.c_contiguous else arr.copy(order="C")
    if arr.dtype.str not in _NPY_DESCRS:  # big-endian and the like: numpy writes it
        buf = io.BytesIO()
        np.save(buf, arr, allow_pickle=False)
        return buf.getvalue()
    header = f"{{'descr': '{arr.dtype.str}', 'fortran_order': False, 'shape': {tuple(arr.shape)!r}, }}"
    header += " " * (-(len(_NPY_MAGIC) + 2 + len(header) + 1) % 64) + "\n"  # np.save's 64-byte alignment
    return _NPY_MAGIC + struct.pack("<H", len(header)) + header.encode() + arr.tobytes()


def _npy_header(blob: memoryview) -> tuple[tuple, bool, np.dtype, int]:
    """(shape, fortran order, dtype, data offset) of an .npy blob: np.save's own header for the dtypes that travel
    read directly, any other header by numpy's reader (never a pickle)."""
    if bytes(blob[:8]) == _NPY_MAGIC and len(blob) >= 10:
        end = 10 + int.from_bytes(blob[8:10], "little")
        match = _NPY_HEADER.fullmatch(bytes(blob[10:end])) if end <= len(blob) else None
        if match and match[1].decode() in _NPY_DESCRS:
            shape = tuple(int(n) for n in match[3].split(b",") if n.strip())
            return shape, match[2] == b"True", _NPY_DESCRS[match[1].decode()], end
    head = io.BytesIO(bytes(blob[:_NPY_HEADER_MAX]))
    version = np.lib.format.read_magic(head)
    fmt = np.lib.format
    shape, fortran, dtype = (fmt.read_array_header_1_0 if version == (1, 0) else fmt.read_array_header_2_0)(head)
    return shape, fortran, dtype, head.tell()


def _decode(value: Any, blobs: list[bytes], depth: int) -> Any:
    if depth > MAX_DEPTH:
        raise WireError(f"value nested deeper than {MAX_DEPTH} levels")
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    if isinstance(value, list):
        return [_decode(v, blobs, depth + 1) for v in value]
    if not isinstance(value, dict) or len(value) == 0:
        raise WireError(f"malformed value in frame: {type(value).__name__}")
    if "__tensor__" in value:
        return _tensor(_load_npy(blobs, value["__tensor__"]), value.get("dtype"))
    if "__ndarray__" in value:
        return _load_npy(blobs, value["__ndarray__"]).copy()
    if "__float__" in value:
        return float(value["__float__"])
    if "__dtype__" in value:
        dt = getattr(torch, str(value["__dtype__"]), None)
        if not isinstance(dt, torch.dtype):
            raise WireError(f"unknown dtype {value['__dtype__']!r}")
        return dt
    if "__handle__" in value:
        return ObjectHandle(int(value["__handle__"]))
    if "__generator__" in value:
        return _generator(_load_npy(blobs, value["__generator__"]))
    if "__tuple__" in value:
        return tuple(_decode(v, blobs, depth + 1) for v in value["__tuple__"])
    if "__dict__" in value:
        return {str(k): _decode(v, blobs, depth + 1) for k, v in value["__dict__"]}
    if "__map__" in value:
        return _decode_map(value["__map__"], blobs, depth)
    raise WireError(f"malformed value in frame: keys {sorted(value)[:3]}")


def _decode_map(pairs: Any, blobs: list[bytes], depth: int) -> dict:
    if not isinstance(pairs, list) or not all(isinstance(p, list) and len(p) == 2 for p in pairs):
        raise WireError("malformed dict in frame")
    out = {}
    for raw_key, raw_value in pairs:
        key = _decode(raw_key, blobs, depth + 1)
        if not _plain_key(key):
            raise WireError(f"a dict key in the frame is a {type(key).__name__}, not a plain value")
        out[key] = _decode(raw_value, blobs, depth + 1)
    return out


def _generator(state: np.ndarray) -> torch.Generator:
    """A CPU generator in ``state`` (a uint8 vector of the length torch's CPU generators use)."""
    if state.dtype != np.uint8 or state.shape != (_GENERATOR_STATE_BYTES,):
        raise WireError(f"malformed generator state: {state.dtype} {state.shape}")
    generator = torch.Generator()
    try:
        generator.set_state(torch.from_numpy(state.copy()))
    except RuntimeError as exc:
        raise WireError(f"malformed generator state: {exc}") from None
    return generator


def _tensor(arr: np.ndarray, label: Any) -> torch.Tensor:
    """The tensor of a blob (``arr``, a view of the frame) labelled ``label``: the label must name the
    array's own dtype (bfloat16 travels as float32, see ``_tensor_to_numpy``), checked before anything is
    converted or copied, so a blob cannot ask the grader to blow it up (bytes labelled complex128)."""
    want = getattr(torch, label, None) if isinstance(label, str) else None
    if not isinstance(want, torch.dtype):
        raise WireError(f"a tensor in the frame has no valid dtype label ({label!r:.40})")
    sent = np.float32 if want == torch.bfloat16 else _NUMPY_DTYPES.get(want)
    if sent is None or arr.dtype != np.dtype(sent):
        raise WireError(f"a tensor in the frame is labelled {label} but holds {arr.dtype} data")
    t = torch.from_numpy(arr.copy())  # the one copy; any number of dimensions, 0-d included
    return t.to(want) if want == torch.bfloat16 else t


def _load_npy(blobs: list, index: Any) -> np.ndarray:
    """A read-only view of blob ``index`` (an ``.npy`` file), nothing copied: only its header is parsed
    (never a pickle), then the data must fill the blob exactly."""
    if not isinstance(index, int) or not 0 <= index < len(blobs):
        raise WireError(f"blob index {index!r} out of range")
    blob = memoryview(blobs[index])
    try:
        shape, fortran, dtype, offset = _npy_header(blob)
    except Exception as exc:  # noqa: BLE001 - any parse failure is a malformed frame
        raise WireError(f"malformed array in frame: {exc}") from None
    if dtype.kind not in _ALLOWED_KINDS or dtype.hasobject:
        raise WireError(f"malformed array in frame: dtype {dtype} is not allowed")
    count = math.prod(shape)
    if len(blob) - offset != count * dtype.itemsize:
        raise WireError(f"malformed array in frame: {len(blob) - offset} bytes of data for shape {shape} "
                        f"of {dtype}")
    arr = np.frombuffer(blob, dtype=dtype, count=count, offset=offset)
    return arr.reshape(shape[::-1]).T if fortran else arr.reshape(shape)


def pack(message: Any, *, budget: bool = False) -> bytes:
    """Encode ``message`` into one frame (length prefix included). ``budget``: refuse a frame the grader would
    refuse to read (the worker's replies), so that the worker can send an error instead."""
    blobs: list[bytes] = []
    tree = _encode(message, blobs, 0)
    header = json.dumps({"v": tree, "blobs": [len(b) for b in blobs]}).encode()
    body = struct.pack("<I", len(header)) + header + b"".join(blobs)
    if budget:
        _check_header(header)
        if len(body) > MAX_FRAME_BYTES:
            raise WireError(f"a frame of {len(body)} bytes exceeds the limit of {MAX_FRAME_BYTES}")
    return struct.pack("<Q", len(body)) + body


def _check_header(header: bytes) -> None:
    """The JSON part's size and an upper bound of its number of values, checked before ``json.loads``."""
    if len(header) > MAX_HEADER_BYTES:
        raise WireError(f"a frame header of {len(header)} bytes exceeds the limit of {MAX_HEADER_BYTES}")
    values = sum(header.count(c) for c in (b"[", b"{", b","))
    if values > MAX_JSON_OBJECTS:
        raise WireError(f"a frame holds about {values} values, over the limit of {MAX_JSON_OBJECTS}")


def unpack_body(body: bytes | memoryview, *, budget: bool = True) -> Any:
    """Decode a frame body (without its u64 length prefix). ``budget``: enforce ``MAX_HEADER_BYTES`` and
    ``MAX_JSON_OBJECTS`` before parsing (off only where the sender is the grader)."""
    body = memoryview(body)
    if len(body) < 4:
        raise WireError("frame too short")
    (hlen,) = struct.unpack("<I", body[:4])
    if hlen > len(body) - 4:
        raise WireError("frame header length out of range")
    if budget:
        _check_header(bytes(body[4 : 4 + hlen]))
    try:
        header = json.loads(bytes(body[4 : 4 + hlen]))
        sizes = [int(s) for s in header["blobs"]]
    except Exception as exc:  # noqa: BLE001
        raise WireError(f"malformed frame header: {exc}") from None
    blobs, pos = [], 4 + hlen
    for size in sizes:
        if size < 0 or pos + size > len(body):
            raise WireError("blob sizes do not match the frame length")
        blobs.append(body[pos : pos + size])  # a view: the frame is never copied
        pos += size
    try:
        return _decode(header["v"], blobs, 0)
    except WireError:
        raise
    except (TypeError, ValueError, KeyError, AttributeError, IndexError, OverflowError) as exc:
        raise WireError(f"malformed value in frame: {type(exc).__name__}: {exc}") from None


def read_frame(stream, *, budget: bool = True) -> Any:
    """Read one frame from a binary file object (blocking). Raises EOFError at end of stream. ``budget``:
    as in ``unpack_body``, and frames over ``MAX_FRAME_BYTES`` are refused."""
    head = _read_exact(stream, 8)
    (length,) = struct.unpack("<Q", head)
    if budget and length > MAX_FRAME_BYTES:
        raise WireError(f"frame of {length} bytes exceeds the limit of {MAX_FRAME_BYTES}")
    return unpack_body(_read_exact(stream, length), budget=budget)


def _read_exact(stream, n: int) -> bytes:
    chunks, got = [], 0
    while got < n:
        chunk = stream.read(n - got)
        if not chunk:
            raise EOFError("stream closed")
        chunks.append(chunk)
        got += len(chunk)
    return b"".join(chunks)


def roundtrip(value: Any) -> Any:
    """Send ``value`` through the wire format and back: plain tensors and containers only."""
    frame = pack(value)
    return unpack_body(frame[8:], budget=False)  # in-process: nothing untrusted crosses


def copied(value: Any, depth: int = 0) -> Any:
    """What ``roundtrip(value)`` returns, built directly, without the JSON and the bytes: the same values and types
    come back (containers as plain list/tuple/dict, tensors as new plain CPU tensors of the same dtype, numpy
    scalars as Python ones) and the same values are refused with the same ``WireError``. For in-process calls
    (``LocalStudent``: the reference and the catalogue's candidates, trusted code), where the real format cost a
    tenth of lab08's grading time; ``tests/grading/test_wire.py`` holds the two equal. Follows ``_encode``."""
    if depth > MAX_DEPTH:
        raise WireError(f"value nested deeper than {MAX_DEPTH} levels")
    if value is None or isinstance(value, bool):
        return value
    if isinstance(value, str):
        return str.__str__(value)  # a subclass comes back a plain str, as from JSON
    if isinstance(value, int):
        return int(value)
    if isinstance(value, float):
        return float(value)
    if isinstance(value, torch.Tensor):
        arr = _tensor_to_numpy(value)
        if arr.dtype.kind not in _ALLOWED_KINDS:
            raise WireError(f"cannot send an array of dtype {arr.dtype}")
        return _tensor(arr, str(value.dtype).removeprefix("torch."))  # copies
    if isinstance(value, np.ndarray):
        if value.dtype.kind not in _ALLOWED_KINDS:
            raise WireError(f"cannot send an array of dtype {value.dtype}")
        return np.array(value, order="C", copy=True, subok=False)
    if isinstance(value, np.generic):
        return copied(value.item(), depth + 1)
    if isinstance(value, (list, tuple, dict)):
        return _copied_container(value, depth)
    if isinstance(value, torch.dtype):
        return value
    if isinstance(value, torch.Generator):
        if value.device.type != "cpu":
            raise WireError(f"cannot send a torch.Generator on {value.device}: only CPU generators travel")
        return _generator(value.get_state().numpy())
    if isinstance(value, ObjectHandle):
        return ObjectHandle(int(value.id))
    raise WireError(f"cannot send a value of type {type(value).__module__}.{type(value).__qualname__}")


def _copied_container(value: list | tuple | dict, depth: int) -> Any:
    if isinstance(value, tuple):
        return tuple(copied(v, depth + 1) for v in value)
    if isinstance(value, list):
        return [copied(v, depth + 1) for v in value]
    if all(isinstance(k, str) for k in value):
        return {str.__str__(k): copied(v, depth + 1) for k, v in value.items()}
    for k in value:
        if not _plain_key(k):
            raise WireError(f"dict keys must be str, int, float, bool, None or tuples of them, got "
                            f"{type(k).__name__}")
    return {copied(k, depth + 1): copied(v, depth + 1) for k, v in value.items()}
