"""wire: JSON + .npy frames between grader and worker; every allowed value round-trips, nothing else passes,
and nothing is ever unpickled."""

import io
import json
import math
import struct

import numpy as np
import pytest
import torch

from attnlab.grading.worker import wire
from attnlab.grading.worker.wire import ObjectHandle, WireError, pack, read_frame, roundtrip, unpack_body


def same(a, b):
    """Deep equality with exact tensor dtype/shape/value (nan == nan) and exact container types."""
    assert type(a) is type(b), (type(a), type(b))
    if isinstance(a, torch.Tensor):
        assert a.dtype == b.dtype and a.shape == b.shape
        assert torch.equal(a, b) or torch.equal(a.isnan(), b.isnan()) and torch.equal(a.nan_to_num(), b.nan_to_num())
    elif isinstance(a, np.ndarray):
        assert a.dtype == b.dtype and a.shape == b.shape and np.array_equal(a, b, equal_nan=a.dtype.kind in "fc")
    elif isinstance(a, (list, tuple)):
        assert len(a) == len(b)
        for x, y in zip(a, b):
            same(x, y)
    elif isinstance(a, dict):
        assert list(a) == list(b)
        for k in a:
            same(a[k], b[k])
    elif isinstance(a, float) and math.isnan(a):
        assert math.isnan(b)
    else:
        assert a == b


def body(header: dict, *blobs: bytes) -> bytes:
    """A frame body (no u64 prefix) written by hand, as a malicious worker could."""
    h = json.dumps(header).encode()
    return struct.pack("<I", len(h)) + h + b"".join(blobs)


def npy(arr, allow_pickle=False) -> bytes:
    buf = io.BytesIO()
    np.save(buf, arr, allow_pickle=allow_pickle)
    return buf.getvalue()


@pytest.mark.parametrize("value", [
    None, True, False, 0, -7, 2**62, 1.5, -0.0, "", "héllo ✓", [], {}, (),
    float("inf"), float("-inf"), float("nan"),
    [1, [2, [3, (4, 5)]]],
    ((1, 2), (3, (4, {"k": (5,)}))),
    {"a": {"b": {"c": [1, 2.0, None, True]}}, "t": (torch.ones(2), "x")},
    torch.float16, torch.bfloat16, torch.int64, torch.bool, torch.complex64,
    ObjectHandle(3),
    {"handles": [ObjectHandle(1), ObjectHandle(2)], "dtype": torch.float64},
    {(97, 98): 3, (98, 98): 1}, {1: "a", 2.5: None, None: [1], False: 0, "s": 1, (): 2, (1, ("x", None)): 3},
], ids=repr)
def test_plain_values_round_trip(value):
    same(roundtrip(value), value)


def test_bool_stays_bool_and_int_stays_int():
    out = roundtrip([True, 1, 1.0])
    assert [type(v) for v in out] == [bool, int, float]


@pytest.mark.parametrize("dtype", [torch.float64, torch.float32, torch.float16, torch.bfloat16, torch.int64,
                                   torch.int32, torch.int8, torch.uint8, torch.bool, torch.complex64])
def test_tensors_keep_dtype_shape_and_values(dtype):
    g = torch.Generator().manual_seed(0)
    t = (torch.randn(2, 3, 4, generator=g, dtype=torch.float64) * 50).to(dtype)
    same(roundtrip(t), t)
    same(roundtrip(torch.empty(0, 3, dtype=dtype)), torch.empty(0, 3, dtype=dtype))


def test_int64_extremes_and_float_specials_exact():
    ints = torch.tensor([2**63 - 1, -(2**63), 0, 12345678901234567])
    same(roundtrip(ints), ints)
    floats = torch.tensor([float("nan"), float("inf"), float("-inf"), 1e-320, 0.1], dtype=torch.float64)
    same(roundtrip(floats), floats)


def test_non_contiguous_and_grad_tensors_come_back_plain():
    x = torch.arange(12.0).reshape(3, 4).t()
    y = (torch.ones(3, requires_grad=True) * 2)
    a, b = roundtrip((x, y))
    same(a, x.contiguous())
    assert not b.requires_grad and b.grad_fn is None and torch.equal(b, torch.full((3,), 2.0))


def test_numpy_arrays_and_scalars():
    arr = np.arange(6, dtype=np.int16).reshape(2, 3)
    same(roundtrip(arr), arr)
    assert roundtrip(np.float32(2.5)) == 2.5 and roundtrip(np.int64(3)) == 3 and roundtrip(np.bool_(True)) is True


@pytest.mark.parametrize("t", [torch.tensor(0.1, dtype=torch.float64), torch.tensor(3), torch.tensor(True),
                               torch.tensor(1.5)], ids=lambda t: str(t.dtype))
def test_zero_dim_tensors_keep_shape_and_exact_value(t):
    same(roundtrip(t), t)


def test_zero_dim_float64_blob_decodes_exactly():
    frame = body({"v": {"__tensor__": 0, "dtype": "float64"}, "blobs": [len(npy(np.array(0.1)))]}, npy(np.array(0.1)))
    out = unpack_body(frame)
    assert out.dtype == torch.float64 and out.shape == () and out.item() == 0.1


# ---------------------------------------------------------------- what cannot be sent


class Thing:
    pass


DEEP = 1
for _ in range(40):
    DEEP = [DEEP]


@pytest.mark.parametrize("value, message", [
    (Thing(), "cannot send a value of type"),
    ({1, 2}, "cannot send a value of type builtins.set"),
    (b"bytes", "cannot send a value of type builtins.bytes"),
    ({torch.ones(1): "a"}, "dict keys must be str, int"),
    (lambda: 1, "cannot send"),
    (np.array([object(), 1], dtype=object), "cannot send an array of dtype object"),
    (np.array(["a", "b"]), "cannot send an array of dtype <U1"),
    (DEEP, "nested deeper"),
])
def test_rejects_what_cannot_travel(value, message):
    with pytest.raises(WireError, match=message):
        pack(value)


# ---------------------------------------------------------------- malformed frames


def test_truncated_frames_are_refused():
    frame = pack({"t": torch.arange(10.0)})
    assert unpack_body(frame[8:])["t"].shape == (10,)
    with pytest.raises(WireError, match="too short"):
        unpack_body(frame[8:10])
    with pytest.raises(WireError, match="header length out of range"):
        unpack_body(frame[8:20])
    with pytest.raises(WireError, match="blob sizes do not match"):
        unpack_body(frame[8:-1])
    with pytest.raises(EOFError):
        read_frame(io.BytesIO(frame[:-1]))
    with pytest.raises(EOFError):
        read_frame(io.BytesIO(frame[:5]))
    with pytest.raises(EOFError):
        read_frame(io.BytesIO(b""))


def test_read_frame_reads_one_frame_at_a_time():
    stream = io.BytesIO(pack(1) + pack((2, torch.ones(2))) + pack("three"))
    assert read_frame(stream) == 1
    same(read_frame(stream), (2, torch.ones(2)))
    assert read_frame(stream) == "three"


def test_oversize_length_prefix_is_refused_before_reading():
    class Stream(io.BytesIO):
        reads = []

        def read(self, n=-1):
            self.reads.append(n)
            return super().read(n)

    stream = Stream(struct.pack("<Q", wire.MAX_FRAME_BYTES + 1) + b"\0" * 16)
    with pytest.raises(WireError, match="exceeds the limit"):
        read_frame(stream)
    assert stream.reads == [8]  # the body was never requested


@pytest.mark.parametrize("index", [1, -1, "0", None, 0.0])
def test_bad_blob_index_is_refused(index):
    with pytest.raises(WireError, match="blob index"):
        unpack_body(body({"v": {"__tensor__": index}, "blobs": [len(npy(np.ones(2)))]}, npy(np.ones(2))))


@pytest.mark.parametrize("header", [b"not json", b'{"blobs": "x"}', b"[1, 2]", b'{"v": 1, "blobs": ["a"]}'])
def test_malformed_headers_are_refused(header):
    with pytest.raises(WireError, match="malformed frame header"):
        unpack_body(struct.pack("<I", len(header)) + header)


@pytest.mark.parametrize("tree", [{"__nothing__": 1}, {}, {"__dtype__": "not_a_dtype"}, {"__dtype__": "nn"}])
def test_unknown_values_are_refused(tree):
    with pytest.raises(WireError):
        unpack_body(body({"v": tree, "blobs": []}))


def test_negative_blob_size_and_garbage_blob_are_refused():
    with pytest.raises(WireError, match="blob sizes"):
        unpack_body(body({"v": None, "blobs": [-1]}))
    with pytest.raises(WireError, match="malformed array"):
        unpack_body(body({"v": {"__ndarray__": 0}, "blobs": [5]}, b"hello"))


@pytest.mark.parametrize("arr", [np.array(["a", "bc"]), np.zeros(2, dtype=[("x", "i4"), ("y", "f8")]),
                                 np.array(["2020-01-01"], dtype="datetime64[D]")], ids=lambda a: str(a.dtype))
def test_arrays_of_dtypes_outside_the_allowed_kinds_are_refused(arr):
    data = npy(arr)
    with pytest.raises(WireError, match="not allowed"):
        unpack_body(body({"v": {"__ndarray__": 0}, "blobs": [len(data)]}, data))


UNPICKLED = []


def _record(what):
    UNPICKLED.append(what)
    return what


class Evil:
    def __reduce__(self):
        return (_record, ("the grader ran code from the worker",))


@pytest.mark.parametrize("key", ["__ndarray__", "__tensor__"])
def test_a_pickled_object_array_is_refused_and_never_unpickled(key):
    data = npy(np.array([Evil(), 1], dtype=object), allow_pickle=True)
    # sanity: this blob really runs code when unpickled
    np.load(io.BytesIO(data), allow_pickle=True)
    assert UNPICKLED == ["the grader ran code from the worker"]
    UNPICKLED.clear()
    try:
        with pytest.raises(WireError, match="malformed array"):
            unpack_body(body({"v": {key: 0, "dtype": "float32"}, "blobs": [len(data)]}, data))
    finally:
        assert UNPICKLED == [], "the grader unpickled a blob from the worker"


@pytest.mark.parametrize("header", [
    {"v": {"__tuple__": 5}, "blobs": []},
    {"v": {"__dict__": [1]}, "blobs": []},
    {"v": {"__dict__": 3}, "blobs": []},
    {"v": {"__handle__": "x"}, "blobs": []},
    {"v": {"__float__": "abc"}, "blobs": []},
    {"blobs": []},
    {"v": {"__map__": 3}, "blobs": []},
    {"v": {"__map__": [[1, 2, 3]]}, "blobs": []},
    {"v": {"__map__": [[[1, 2], 0]]}, "blobs": []},
    {"v": {"__map__": [[{"__dict__": []}, 0]]}, "blobs": []},
    {"v": {"__map__": [[{"__tuple__": [[1]]}, 0]]}, "blobs": []},
    {"v": {"__map__": [[{"__tensor__": 0, "dtype": "float32"}, 0]]}, "blobs": []},
], ids=["tuple-of-int", "dict-item-not-pair", "dict-not-list", "handle-not-int", "float-not-number", "no-v",
        "map-not-list", "map-item-not-pair", "map-key-list", "map-key-dict", "map-key-tuple-of-list",
        "map-key-tensor"])
def test_malformed_value_trees_raise_wire_error(header):
    with pytest.raises(WireError):
        unpack_body(body(header))


def test_frame_layout_is_as_documented():
    frame = pack({"x": torch.ones(2, dtype=torch.float32)})
    (length,) = struct.unpack("<Q", frame[:8])
    assert length == len(frame) - 8
    (hlen,) = struct.unpack("<I", frame[8:12])
    header = json.loads(frame[12:12 + hlen])
    assert header["blobs"] == [len(frame) - 12 - hlen]
    blob = frame[12 + hlen:]
    assert blob.startswith(b"\x93NUMPY")
    assert np.array_equal(np.load(io.BytesIO(blob), allow_pickle=False), np.ones(2, dtype=np.float32))


@pytest.mark.parametrize("key", [torch.ones(1), (1, torch.ones(1)), ObjectHandle(1), object(), (1, ObjectHandle(2))],
                         ids=repr)
def test_dict_keys_that_cannot_travel(key):
    with pytest.raises(WireError, match="dict keys must be"):
        pack({key: 1})


def test_a_cpu_generator_travels_with_its_state():
    g = torch.Generator().manual_seed(11)
    torch.rand(5, generator=g)  # not at its seed any more
    copy = roundtrip({"gen": g})["gen"]
    assert isinstance(copy, torch.Generator) and copy is not g
    assert torch.equal(torch.rand(7, generator=copy), torch.rand(7, generator=g))


@pytest.mark.parametrize("state", [np.zeros(10, np.uint8), np.zeros(5056, np.float32), np.zeros((2, 2528), np.uint8)],
                         ids=["short", "float", "2-d"])
def test_malformed_generator_states_raise_wire_error(state):
    data = npy(state)
    with pytest.raises(WireError, match="malformed generator state"):
        unpack_body(body({"v": {"__generator__": 0}, "blobs": [len(data)]}, data))


def test_any_generator_state_of_the_right_size_is_refused_or_a_generator():
    data = npy(np.full(5056, 255, np.uint8))
    try:
        out = unpack_body(body({"v": {"__generator__": 0}, "blobs": [len(data)]}, data))
    except WireError:
        return
    torch.rand(3, generator=out["v"])  # a state torch accepts is just another generator


# -- a tensor's dtype label must name its array's dtype (issue 17: one reply blew up to gigabytes) ---------
@pytest.mark.parametrize("arr, label", [
    (np.zeros(64, np.uint8), "complex128"),  # 64 bytes would become 1 KiB: refused, never converted
    (np.zeros(8, np.float32), "float64"),
    (np.zeros(8, np.int64), "float32"),
    (np.zeros(8, np.float64), "bfloat16"),  # bfloat16 travels as float32 only
])
def test_a_tensor_whose_label_disagrees_with_its_array_is_refused(arr, label, monkeypatch):
    converted = []
    monkeypatch.setattr(torch.Tensor, "to", lambda *a, **k: converted.append(a) or None)
    with pytest.raises(WireError, match=f"labelled {label} but holds {arr.dtype} data"):
        unpack_body(body({"v": {"__tensor__": 0, "dtype": label}, "blobs": [len(npy(arr))]}, npy(arr)))
    assert converted == []  # refused before any conversion


@pytest.mark.parametrize("label", [None, "", "Tensor", "not_a_dtype", 3, ["float32"]])
def test_a_tensor_without_a_valid_dtype_label_is_refused(label):
    blob = npy(np.zeros(3, np.float32))
    tree = {"__tensor__": 0} if label is None else {"__tensor__": 0, "dtype": label}
    with pytest.raises(WireError, match="no valid dtype label"):
        unpack_body(body({"v": tree, "blobs": [len(blob)]}, blob))


def test_bfloat16_still_travels_as_float32_and_comes_back_bfloat16():
    t = torch.tensor([1.5, -2.25, 3e38], dtype=torch.bfloat16)
    back = roundtrip(t)
    assert back.dtype == torch.bfloat16 and torch.equal(back, t)


@pytest.mark.parametrize("extra", [b"", b"\x00" * 8])
def test_an_npy_blob_whose_data_does_not_fill_it_exactly_is_refused(extra):
    blob = npy(np.zeros(4, np.float32))
    short = blob[:-4] + extra if not extra else blob + extra
    with pytest.raises(WireError, match="bytes of data for shape"):
        unpack_body(body({"v": {"__ndarray__": 0}, "blobs": [len(short)]}, short))


def test_fortran_order_arrays_keep_their_values():
    arr = np.asfortranarray(np.arange(6, dtype=np.int32).reshape(2, 3))
    blob = npy(arr)
    out = unpack_body(body({"v": {"__tensor__": 0, "dtype": "int32"}, "blobs": [len(blob)]}, blob))
    assert torch.equal(out, torch.arange(6, dtype=torch.int32).reshape(2, 3))


def test_decoded_tensors_own_their_memory_and_are_writable():
    frame = pack({"a": torch.arange(4.0), "n": np.arange(3)})
    out = unpack_body(bytearray(frame[8:]))
    out["a"] += 1
    out["n"] += 1  # a view of the frame would be read-only or alias it
    assert out["a"].tolist() == [1.0, 2.0, 3.0, 4.0] and out["n"].tolist() == [1, 2, 3]


def test_npy_headers_are_read_as_numpy_reads_them():
    """The direct reader of np.save's header gives numpy's own (shape, order, dtype, offset) for every dtype that
    travels and every layout, for the kit's bytes and for np.save's; other headers still go to numpy's reader."""
    from attnlab.grading.worker.wire import _NUMPY_DTYPES, _load_npy, _npy_bytes, _npy_header

    rng = np.random.default_rng(0)
    for dtype in _NUMPY_DTYPES.values():
        for shape in [(), (0,), (3,), (2, 3), (1, 0, 4), (2, 1, 3, 1, 2)]:
            a = (rng.standard_normal(shape) * 10).astype(dtype)
            for arr in (a, np.asfortranarray(a), a.T):
                for data in (_npy_bytes(arr), npy(arr)):
                    head = io.BytesIO(data)
                    np.lib.format.read_magic(head)
                    assert _npy_header(memoryview(data)) == (*np.lib.format.read_array_header_1_0(head), head.tell())
                    assert np.array_equal(_load_npy([data], 0), arr)
    big_endian = np.arange(3, dtype=">f4")  # not np.save's little-endian form: numpy's reader decides
    assert np.array_equal(_load_npy([npy(big_endian)], 0), big_endian)
    assert np.array_equal(_load_npy([_npy_bytes(big_endian)], 0), big_endian)


# ---------------------------------------------------------------- copied: roundtrip without the bytes
class Word(str):
    def __str__(self):
        return "changed"


class Small(int):
    pass


def _copy_corpus():
    from collections import OrderedDict, namedtuple

    point = namedtuple("Point", "x y")
    g = torch.Generator().manual_seed(3)
    values = [
        None, True, 0, -7, 2**70, 1.5, -0.0, float("nan"), float("inf"), "héllo ✓", Word("w"), Small(4), [], {}, (),
        [1, [2, [3, (4, 5)]]], point(1, torch.ones(2)), OrderedDict(b=1, a=(2,)), {Word("k"): 1, "k": 2},
        {(97, 98): 3, 1: "a", 2.5: None, None: [1], False: 0, "s": 1, (): 2, (1, ("x", None)): 3},
        torch.float16, torch.bfloat16, ObjectHandle(3), g,
        torch.arange(12.0).reshape(3, 4).t(), torch.ones(3, requires_grad=True) * 2, torch.nn.Parameter(torch.ones(2)),
        torch.tensor(0.1, dtype=torch.float64), torch.empty(0, 3, dtype=torch.int8),
        np.arange(6, dtype=np.int16).reshape(2, 3), np.asfortranarray(np.arange(6.0).reshape(2, 3)),
        np.arange(3, dtype=">f8"), np.array(2.5), np.arange(4, dtype=np.float16), np.float32(2.5), np.int64(3),
        np.bool_(True), np.float64(0.1),
    ]
    for dtype in (torch.float64, torch.float32, torch.float16, torch.bfloat16, torch.int64, torch.int32, torch.int8,
                  torch.uint8, torch.bool, torch.complex64, torch.complex128):
        values.append((torch.randn(2, 3, generator=g, dtype=torch.float64) * 50).to(dtype))
    return values


@pytest.mark.parametrize("value", _copy_corpus(), ids=lambda v: type(v).__name__)
def test_copied_is_what_roundtrip_returns(value):
    a, b = wire.copied(value), roundtrip(value)
    if isinstance(value, torch.Generator):
        assert type(a) is type(b) is torch.Generator and torch.equal(a.get_state(), b.get_state())
        assert a is not value
        return
    same(a, b)


def test_copied_tensors_and_arrays_own_their_memory():
    t, arr = torch.zeros(3), np.zeros(3)
    ct, carr = wire.copied([t, arr])
    ct += 1
    carr += 1
    assert t.sum() == 0 and arr.sum() == 0 and ct.grad_fn is None


@pytest.mark.parametrize("value", [Thing(), {1, 2}, b"bytes", {torch.ones(1): "a"}, {(1, Thing()): 3}, lambda: 1,
                                   np.array([object(), 1], dtype=object), np.array(["a", "b"]), DEEP, 1 + 2j,
                                   np.complex64(1 + 2j), [Thing()]], ids=lambda v: type(v).__name__)
def test_copied_refuses_what_pack_refuses_with_the_same_message(value):
    with pytest.raises(WireError) as packed:
        pack(value)
    with pytest.raises(WireError) as copy:
        wire.copied(value)
    assert str(copy.value) == str(packed.value)
