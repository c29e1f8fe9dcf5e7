"""pytest setup for the Python package's tests: the package from the source tree (python/), the
library and the pipectl command of the build (tests/python/run_pytest.sh sets PIPECTL_LIBRARY
and PIPECTL_CLI; run by hand, the package finds build/libpipectl.so itself), the `gpu` marker."""

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "python"))

import pipectl  # noqa: E402


def pytest_configure(config):
    config.addinivalue_line("markers", "gpu: needs a CUDA device (skipped without one)")


@pytest.fixture(scope="module")
def repo():
    return REPO


@pytest.fixture(scope="module")
def cli():
    """The pipectl command of the same build as the library."""
    return pipectl._bundle.cli()


@pytest.fixture
def quickstart(tmp_path):
    """A copy of pipelines/quickstart.yaml in its own folder, so outputs do not race other tests
    writing pipelines/out/."""
    dst = tmp_path / "quickstart.yaml"
    shutil.copy(REPO / "pipelines" / "quickstart.yaml", dst)
    return dst


_GPU = {}


def gpu_available():
    """Whether this build has the GPU executor and a usable device (probed once)."""
    if "ok" not in _GPU:
        p = pipectl.loads("pipeline: probe\nrun: {batches: 1}\nbuffers:\n"
                          "  a: {where: host, dtype: u8, shape: [8]}\nstages:\n"
                          "  - {name: gen, kind: source, to: a, generator: constant}\n"
                          "  - {name: put, kind: sink, from: a}\n")
        try:
            p.run(executor="gpu")
            _GPU["ok"], _GPU["why"] = True, ""
        except pipectl.NoDeviceError as e:
            _GPU["ok"], _GPU["why"] = False, str(e)
    return _GPU["ok"]


@pytest.fixture
def gpu():
    if not gpu_available():
        pytest.skip(f"no usable CUDA device: {_GPU['why']}")


def run_cli(cli, *args, check=True, **kw):
    proc = subprocess.run([cli, *map(str, args)], capture_output=True, text=True, **kw)
    if check and proc.returncode != 0:
        raise AssertionError(f"pipectl {' '.join(map(str, args))} exited {proc.returncode}: "
                             f"{proc.stderr}")
    return proc


def env_for_child():
    """The environment a child Python needs to import the same package and library."""
    env = dict(os.environ)
    env["PYTHONPATH"] = str(REPO / "python") + os.pathsep + env.get("PYTHONPATH", "")
    env["PIPECTL_LIBRARY"] = pipectl.library
    return env


def wait_for_a_batch(partial, alive, timeout=60):
    """Waits until a sink's `<to>.partial` has grown past the size it was first seen with (at
    least one batch written), or `alive()` turns false: a run stopped before its first batch
    leaves no file (stages/sink.c), so a test of what an interrupted run keeps waits for one."""
    import time  # noqa: PLC0415
    first, end = None, time.monotonic() + timeout
    while time.monotonic() < end and alive():
        if partial.exists():
            size = partial.stat().st_size
            first = size if first is None else first
            if size > first:
                return
        time.sleep(0.01)
