"""A hostile worker for the grader's memory tests: it speaks the wire format by hand (stdlib only, so that a
restart costs milliseconds) and answers every request with the largest frame the grader accepts.

    python hostile_worker.py MODE

MODE ``flood``: every call returns a float32 vector filling a whole 32 MiB frame, with the inputs echoed
honestly (a valid reply); the load reports 20 cell errors of 40,000 characters and a billion failed cells.
MODE ``forge``: every call's reply is a 32 MiB frame of bytes labelled ``complex128`` (16x its size once
converted). MODE ``error``: every call fails with an error text filling the JSON part of a frame (1 MiB).
"""

from __future__ import annotations

import json
import struct
import sys

FRAME_LIMIT = 32 * 2**20  # wire.MAX_FRAME_BYTES, not imported: this worker starts without torch
BLOB_BYTES = FRAME_LIMIT - 2**16  # room for the JSON part and the echoed inputs
BIG: dict[str, tuple[bytes, str]] = {}  # mode -> the blob every reply carries (built once) and its label


def npy(descr: str, count: int) -> bytes:
    """An ``.npy`` file of ``count`` zero items of ``descr`` (a 1-D array)."""
    header = f"{{'descr': '{descr}', 'fortran_order': False, 'shape': ({count},), }}"
    pad = 64 - (10 + len(header) + 1) % 64
    header = header + " " * pad + "\n"
    return b"\x93NUMPY\x01\x00" + struct.pack("<H", len(header)) + header.encode() + bytes(count * int(descr[-1]))


def read_exact(stream, n: int) -> bytes:
    data = b""
    while len(data) < n:
        chunk = stream.read(n - len(data))
        if not chunk:
            sys.exit(0)
        data += chunk
    return data


def read_request(stream) -> tuple[dict, list[bytes]]:
    (length,) = struct.unpack("<Q", read_exact(stream, 8))
    body = read_exact(stream, length)
    (hlen,) = struct.unpack("<I", body[:4])
    header = json.loads(body[4 : 4 + hlen])
    blobs, pos = [], 4 + hlen
    for size in header["blobs"]:
        blobs.append(body[pos : pos + size])
        pos += size
    return header["v"], blobs


def send(stream, tree, blobs: list[bytes], request=None) -> None:
    """Write one reply frame; the request's id is echoed, as the grader checks (a reply to another id restarts it)."""
    if request is not None and isinstance(tree, dict) and "__dict__" in tree:
        tree = {"__dict__": [*tree["__dict__"], ["id", fields(request).get("id")]]}
    header = json.dumps({"v": tree, "blobs": [len(b) for b in blobs]}).encode()
    length = 4 + len(header) + sum(len(b) for b in blobs)
    stream.write(struct.pack("<Q", length) + struct.pack("<I", len(header)) + header)
    for blob in blobs:  # never joined: the big blob is written as it is
        stream.write(blob)
    stream.flush()


def fields(tree) -> dict:
    return dict(tree["__dict__"]) if isinstance(tree, dict) and "__dict__" in tree else {}


def ok(value) -> dict:
    return {"__dict__": [["ok", True], ["value", value]]}


def reply(mode: str, request, blobs: list[bytes]):
    payload = fields(fields(request).get("payload"))
    args = payload.get("args") or []
    echoed = [[str(i), a] for i, a in enumerate(args) if isinstance(a, dict) and "__tensor__" in a]
    if mode == "error":
        return {"__dict__": [["ok", False], ["error", "E" * (2**20 - 4096)]]}, []
    big, label = BIG[mode]
    output = {"__tensor__": len(blobs), "dtype": label}
    value = {"__dict__": [["output", output], ["grads", {"__dict__": []}], ["param_grads", {"__dict__": []}],
                          ["inputs_after", {"__dict__": echoed}]]}
    return ok(value), blobs + [big]


def main() -> int:
    mode = sys.argv[1]
    if mode == "forge":
        BIG[mode] = npy("|u1", BLOB_BYTES - 128), "complex128"
    elif mode == "flood":
        BIG[mode] = npy("<f4", (BLOB_BYTES - 128) // 4), "float32"
    stdin, stdout = sys.stdin.buffer, sys.stdout.buffer
    while True:
        request, blobs = read_request(stdin)
        if fields(request).get("op") == "load":
            index = fields(fields(request)["cells"][0])["index"]  # a cell the grader sent
            errors = [{"__dict__": [["index", index], ["line", 1], ["error", "cell error " + "x" * 40_000]]}] * 20
            send(stdout, ok({"__dict__": [["errors", errors], ["failed", 10**9]]}), [], request)
            continue
        send(stdout, *reply(mode, request, blobs), request)


if __name__ == "__main__":
    sys.exit(main())
