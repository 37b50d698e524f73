"""package_zip: deterministic zips (sorted, fixed times, stored) that keep executable bits."""

import io
import zipfile

from attnlab.buildchain.transforms.package_zip import FIXED_TIME, deterministic_zip, repack

FILES = {"run_autograder": b"#!/bin/sh\necho hi\n", "b/data.txt": b"x" * 100, "a.py": b"print(1)\n"}


def infos(data):
    with zipfile.ZipFile(io.BytesIO(data)) as zf:
        return {i.filename: i for i in zf.infolist()}, {n: zf.read(n) for n in zf.namelist()}


def test_two_builds_are_byte_identical_whatever_the_dict_order():
    a = deterministic_zip(FILES, frozenset({"run_autograder"}))
    b = deterministic_zip(dict(reversed(list(FILES.items()))), frozenset({"run_autograder"}))
    assert a == b


def test_entries_sorted_fixed_time_stored_and_contents_intact():
    meta, contents = infos(deterministic_zip(FILES))
    assert list(meta) == sorted(FILES)
    assert contents == FILES
    assert all(i.date_time == FIXED_TIME for i in meta.values())
    assert all(i.compress_type == zipfile.ZIP_STORED for i in meta.values())
    assert all(i.create_system == 3 for i in meta.values())


def test_executable_bits():
    meta, _ = infos(deterministic_zip(FILES, frozenset({"run_autograder"})))
    assert (meta["run_autograder"].external_attr >> 16) & 0o777 == 0o755
    assert (meta["a.py"].external_attr >> 16) & 0o777 == 0o644


def _messy_zip(stamp=(2024, 5, 6, 7, 8, 9)):
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", compression=zipfile.ZIP_DEFLATED) as zf:
        zf.writestr(zipfile.ZipInfo("setup.sh", date_time=stamp), b"echo setup\n")
        exe = zipfile.ZipInfo("run_autograder", date_time=stamp)
        exe.external_attr = 0o100775 << 16
        zf.writestr(exe, FILES["run_autograder"])
        zf.writestr(zipfile.ZipInfo("tests/"), b"")
        zf.writestr("tests/q.py", b"name = 'q'\n")
    return buf.getvalue()


def test_repack_keeps_executable_bits_drops_directories_and_is_deterministic():
    first = repack(_messy_zip())
    later = _messy_zip(stamp=(2025, 1, 2, 3, 4, 6))
    assert later != _messy_zip()  # the inputs differ in their timestamps ...
    assert repack(later) == first  # ... the repacked zips do not
    meta, contents = infos(first)
    assert list(meta) == ["run_autograder", "setup.sh", "tests/q.py"]
    assert contents["run_autograder"] == FILES["run_autograder"]
    assert (meta["run_autograder"].external_attr >> 16) & 0o777 == 0o755
    assert (meta["setup.sh"].external_attr >> 16) & 0o777 == 0o644
    assert all(i.date_time == FIXED_TIME and i.compress_type == zipfile.ZIP_STORED for i in meta.values())


def test_repack_is_idempotent():
    once = repack(_messy_zip())
    assert repack(once) == once
