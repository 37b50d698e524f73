"""Device choice, fast mode and the first-cell description, with CUDA and MPS faked where needed."""

import pytest
import torch

from attnlab.kit import device as dev


@pytest.fixture
def machine(monkeypatch):
    """A controllable machine: no CUDA, no MPS, no attnlab environment variables unless a test says so."""
    monkeypatch.delenv(dev.DEVICE_ENV, raising=False)
    monkeypatch.delenv(dev.FAST_ENV, raising=False)

    class Machine:
        def __init__(self):
            self.gpus = 0
            self.mps = False

    m = Machine()
    monkeypatch.setattr(torch.cuda, "is_available", lambda: m.gpus > 0)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: m.gpus)
    monkeypatch.setattr(torch.cuda, "get_device_name", lambda device=None: "Fake GPU 80GB")
    monkeypatch.setattr(dev, "_mps_works", lambda: m.mps)
    return m


def test_cpu_only_machine_picks_cpu(machine):
    assert dev.pick_device() == torch.device("cpu")
    assert dev.available_devices() == ["cpu"]


def test_cuda_wins_over_mps_and_mps_over_cpu(machine):
    machine.mps = True
    assert dev.pick_device() == torch.device("mps")
    machine.gpus = 1
    assert dev.pick_device() == torch.device("cuda")


def test_prefer_and_env_override_the_automatic_choice(machine, monkeypatch):
    machine.gpus = 2
    assert dev.pick_device("cpu") == torch.device("cpu")
    assert dev.pick_device("cuda:1") == torch.device("cuda", 1)
    monkeypatch.setenv(dev.DEVICE_ENV, "cpu")
    assert dev.pick_device() == torch.device("cpu")
    # an explicit preference beats the environment
    assert dev.pick_device("cuda") == torch.device("cuda")
    # "auto" and an empty value mean: choose for me
    monkeypatch.setenv(dev.DEVICE_ENV, "auto")
    assert dev.pick_device() == torch.device("cuda")
    monkeypatch.setenv(dev.DEVICE_ENV, "")
    assert dev.pick_device() == torch.device("cuda")


def test_unavailable_preference_names_it_and_what_is_available(machine, monkeypatch):
    with pytest.raises(ValueError, match=r"prefer='cuda'.*available: cpu"):
        dev.pick_device("cuda")
    monkeypatch.setenv(dev.DEVICE_ENV, "cuda")
    with pytest.raises(ValueError, match=r"ATTNLAB_DEVICE='cuda'.*available: cpu"):
        dev.pick_device()
    with pytest.raises(ValueError, match=r"'mps'"):
        dev.pick_device("mps")
    machine.gpus = 1
    with pytest.raises(ValueError, match=r"'cuda:1'.*GPU number 1.*has 1.*cpu, cuda:0"):
        dev.pick_device("cuda:1")


@pytest.mark.parametrize("name", ["gpu", "cuda:x", "meta"])
def test_unknown_device_names_are_rejected(machine, name):
    with pytest.raises(ValueError, match=repr(name)):
        dev.pick_device(name)


def test_fast_mode_follows_the_device_unless_forced(machine, monkeypatch):
    assert dev.is_fast_mode() is True
    assert dev.sized(2000, 20000) == 2000
    machine.gpus = 1
    assert dev.is_fast_mode() is False
    assert dev.sized(2000, 20000) == 20000
    monkeypatch.setenv(dev.FAST_ENV, "1")
    assert dev.is_fast_mode() is True
    monkeypatch.setenv(dev.FAST_ENV, "0")
    machine.gpus = 0
    assert dev.is_fast_mode() is False
    assert dev.sized((2, 3), (20, 30)) == (20, 30)


def test_fast_mode_on_a_cpu_preference_even_with_a_gpu(machine, monkeypatch):
    machine.gpus = 1
    monkeypatch.setenv(dev.DEVICE_ENV, "cpu")
    assert dev.is_fast_mode() is True


def test_bad_fast_value_raises(machine, monkeypatch):
    monkeypatch.setenv(dev.FAST_ENV, "yes")
    with pytest.raises(ValueError, match=r"ATTNLAB_FAST='yes'.*'1'.*'0'"):
        dev.is_fast_mode()


def test_describe_device_is_one_line_with_device_torch_and_size(machine, monkeypatch):
    line = dev.describe_device()
    assert "\n" not in line
    assert line.startswith("device: cpu |")
    assert f"torch {torch.__version__}" in line
    assert "fast size" in line
    machine.gpus = 1
    line = dev.describe_device()
    assert line.startswith("device: cuda (Fake GPU 80GB) |")
    assert line.endswith("| full size")
    monkeypatch.setenv(dev.FAST_ENV, "1")
    assert dev.describe_device().endswith("fast size (ATTNLAB_FAST=1)")


def test_mps_probe_runs_on_this_machine():
    # the real probe (not faked): a bool, and consistent with what pick_device would accept
    dev._mps_works.cache_clear()
    works = dev._mps_works()
    assert isinstance(works, bool)
    assert ("mps" in dev.available_devices()) == works
