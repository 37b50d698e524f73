"""Deterministic zip files: sorted entries, fixed timestamps and permissions, no compression
(so the bytes do not depend on the zlib version), so that ``attnlab build --check`` can compare them."""

from __future__ import annotations

import io
import zipfile

FIXED_TIME = (1980, 1, 1, 0, 0, 0)


def deterministic_zip(files: dict[str, bytes], executable: frozenset[str] = frozenset()) -> bytes:
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", compression=zipfile.ZIP_STORED) as zf:
        for name in sorted(files):
            info = zipfile.ZipInfo(name, date_time=FIXED_TIME)
            info.external_attr = (0o755 if name in executable else 0o644) << 16
            info.create_system = 3
            zf.writestr(info, files[name])
    return buf.getvalue()


def repack(zip_bytes: bytes) -> bytes:
    """Rewrite an existing zip deterministically, keeping the executable bits."""
    files, executable = {}, set()
    with zipfile.ZipFile(io.BytesIO(zip_bytes)) as zf:
        for info in zf.infolist():
            if info.is_dir():
                continue
            files[info.filename] = zf.read(info)
            if (info.external_attr >> 16) & 0o111:
                executable.add(info.filename)
    return deterministic_zip(files, frozenset(executable))
