"""otter_zip: Otter Generate's autograder zip with our test files and support files, repacked."""

import io
import os
import zipfile

import pytest

from attnlab.buildchain.transforms.otter_zip import otter_zip

TESTS = {"double.py": "name = 'double'\npoints = 2.0\n", "Scale.py": "name = 'Scale'\npoints = 1.0\n"}
SUPPORT = {"hidden_tests.py": b"suite = 'hidden'\n", "reference.py": b"def double(x):\n    return 2 * x\n",
           "manifest.json": b'{"lab": "lab99_demo"}\n'}
REQUIREMENTS = "attnlab @ git+https://example.invalid/attnlab\n"


@pytest.fixture(scope="module")
def built():
    return otter_zip(TESTS, SUPPORT, requirements=REQUIREMENTS)


def entries(data):
    with zipfile.ZipFile(io.BytesIO(data)) as zf:
        return {n: zf.read(n) for n in zf.namelist()}


def test_contains_tests_support_files_and_otter_scaffolding(built):
    files = entries(built)
    assert files["tests/double.py"].decode() == TESTS["double.py"]
    assert files["tests/Scale.py"].decode() == TESTS["Scale.py"]
    for name, data in SUPPORT.items():
        assert files[f"files/{name}"] == data
    assert {"run_autograder", "setup.sh", "environment.yml", "otter_config.json"} <= set(files)
    assert "run_otter.py" in files and b"run_otter.py" in files["run_autograder"]
    # the kit is installed in the grading image so that the hidden cases can import the bridge
    env = files["environment.yml"].decode()
    assert "attnlab @ git+https://example.invalid/attnlab" in env and "python=3.11" in env


def test_repacked_deterministically(built):
    again = otter_zip(TESTS, SUPPORT, requirements=REQUIREMENTS)
    assert again == built
    with zipfile.ZipFile(io.BytesIO(built)) as zf:
        names = zf.namelist()
        assert names == sorted(names)
        assert all(i.date_time == (1980, 1, 1, 0, 0, 0) for i in zf.infolist())


def test_working_directory_is_restored_even_on_failure(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    otter_zip({"q.py": "name = 'q'\n"}, {}, requirements="")
    assert os.getcwd() == str(tmp_path)
    assert list(tmp_path.iterdir()) == []  # everything happened in a temporary folder

    import otter.generate

    def boom(**kwargs):
        raise RuntimeError("otter failed")

    monkeypatch.setattr(otter.generate, "main", boom)
    with pytest.raises(RuntimeError, match="otter failed"):
        otter_zip(TESTS, SUPPORT, requirements="")
    assert os.getcwd() == str(tmp_path)
