"""A student's handed-in notebook with outputs, for the marking tests of the student's own outputs: a section whose
experiment printed a table, plotted a PNG and showed HTML, before the written question ``mirror``."""

from __future__ import annotations

import base64
import hashlib
import json
import struct
import zlib

TABLE = "     d | max weight, unscaled\n     4 |                0.331\n  1024 |                0.953\n"


def png() -> bytes:
    """A real 1x1 PNG."""
    def chunk(kind: bytes, data: bytes) -> bytes:
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))
    return (b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", struct.pack(">IIBBBBB", 1, 1, 8, 2, 0, 0, 0))
            + chunk(b"IDAT", zlib.compress(b"\x00\xff\x00\x00")) + chunk(b"IEND", b""))


def notebook(extra_outputs: list | None = None) -> dict:
    b64 = base64.b64encode(png()).decode()
    fake = base64.b64encode(b"<svg onload=alert(1)>").decode()
    return {"nbformat": 4, "nbformat_minor": 5, "metadata": {}, "cells": [
        {"cell_type": "markdown", "metadata": {}, "source": "## 1. An earlier section"},
        {"cell_type": "code", "metadata": {}, "source": "print('earlier')", "execution_count": 1,
         "outputs": [{"output_type": "stream", "name": "stdout", "text": "NOT-THIS-SECTION\n"}]},
        {"cell_type": "markdown", "metadata": {}, "source": ["## 2. Why scale?\n", "Run the experiment."]},
        {"cell_type": "code", "metadata": {}, "source": "experiment()", "execution_count": 2, "outputs": [
            {"output_type": "stream", "name": "stdout", "text": ["\x1b[31m", TABLE]},
            {"output_type": "display_data", "metadata": {}, "data": {"image/png": b64, "text/plain": "<Figure>"}},
            {"output_type": "display_data", "metadata": {}, "data": {"image/png": fake}},
            {"output_type": "execute_result", "metadata": {}, "execution_count": 2,
             "data": {"text/html": "<script>alert(1)</script><table><tr><td>7</td></tr></table>"}},
            *(extra_outputs or [])]},
        {"cell_type": "markdown", "metadata": {}, "source": "Explain the table."},
        {"cell_type": "markdown", "metadata": {"attnlab": {"written": "mirror"}}, "source": "It climbs to 0.953."},
    ]}


def write_notebook(path, nb: dict | None = None) -> str:
    """``nb`` (``notebook()``) written to ``path``: its sha256, as the gradebook records it."""
    data = json.dumps(nb or notebook()).encode()
    path.write_bytes(data)
    return hashlib.sha256(data).hexdigest()
