"""capture() and replay() around bundles; the examples in python/examples (on the host executor:
the GPU-only ones in a CPU-sized form); the package installed with pip and by cmake --install."""

import os
import shutil
import subprocess
import sys

import pytest

import pipectl
from conftest import env_for_child


def test_capture_then_replay(quickstart, tmp_path):
    b = pipectl.capture(quickstart, tmp_path / "bundle", reps=1, batches=3, executor="host")
    assert b.manifest["schema"] == "pipectl-bundle"
    rep = pipectl.replay(b, executor="host")
    assert rep.ok and bool(rep) and rep.verdict == rep.report["verdict"]
    assert rep.report["batches_done"] == 3


def test_replay_of_a_changed_output(quickstart, tmp_path):
    b = pipectl.capture(quickstart, tmp_path / "bundle", reps=1, batches=2, executor="host",
                        set={"double.alpha": 3})
    # The bundled pipeline now doubles instead of tripling: refused, or every batch differs.
    canon = b.path / "pipeline.yaml"
    canon.write_text(canon.read_text().replace('alpha: "3"', 'alpha: "2"'))
    with pytest.raises(pipectl.CheckError, match="changed since the capture"):
        pipectl.replay(b, executor="host")
    rep = pipectl.replay(b, executor="host", allow_changed_inputs=True)
    assert not rep.ok and rep.report["first_difference"] is not None


def test_capture_error_has_the_position(tmp_path):
    bad = tmp_path / "bad.yaml"
    bad.write_text("pipeline: b\nrun: {batches: zero}\n")
    with pytest.raises(pipectl.CheckError) as e:
        pipectl.capture(bad, tmp_path / "b", reps=1)
    assert e.value.file == str(bad) and e.value.line == 2


EXAMPLES = [
    ("quickstart_numpy.py", ["--executor", "host"]),
    ("gpt2_greedy_numpy.py", ["--tiny", "--executor", "host", "--steps", "1"]),
    ("search_numpy.py", []),
]


@pytest.mark.parametrize("name,args", EXAMPLES, ids=[e[0] for e in EXAMPLES])
def test_example_runs_on_the_host(repo, name, args):
    proc = subprocess.run([sys.executable, str(repo / "python" / "examples" / name), *args],
                          capture_output=True, text=True, env=env_for_child(), timeout=600)
    assert proc.returncode == 0, proc.stderr
    assert "batches" in proc.stdout


def test_pip_install_then_import(repo, tmp_path):
    """pip install ./python (nothing compiled; offline, so without build isolation), then the
    installed package finds the library through PIPECTL_LIBRARY."""
    target = tmp_path / "site"
    proc = subprocess.run([sys.executable, "-m", "pip", "install", "-q", "--no-deps",
                           "--no-build-isolation", "--target", str(target),
                           str(repo / "python")], capture_output=True, text=True, timeout=300,
                          cwd=tmp_path)
    if proc.returncode != 0 and "No module named pip" in proc.stderr:
        pytest.skip("no pip for this Python")
    assert proc.returncode == 0, proc.stderr
    shutil.rmtree(repo / "python" / "build", ignore_errors=True)
    env = dict(os.environ, PYTHONPATH=str(target), PIPECTL_LIBRARY=pipectl.library)
    out = subprocess.run([sys.executable, "-c", "import pipectl; print(pipectl.__version__, "
                          "pipectl.__file__)"], capture_output=True, text=True, env=env,
                         cwd=tmp_path)
    assert out.returncode == 0, out.stderr
    assert out.stdout.startswith(pipectl.__version__) and str(target) in out.stdout


def test_cmake_install_prefix(repo, tmp_path):
    """cmake --install puts the package in PREFIX/lib/python3/site-packages; it finds
    PREFIX/lib/libpipectl.so from there, with nothing set."""
    build = os.path.dirname(pipectl.library)
    if not os.path.exists(os.path.join(build, "CMakeCache.txt")):
        pytest.skip("the library is not a build folder's")
    proc = subprocess.run(["cmake", "--install", build, "--prefix", str(tmp_path / "p")],
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    site = next((tmp_path / "p").glob("lib*/**/site-packages"))
    env = {k: v for k, v in os.environ.items() if k not in ("PIPECTL_LIBRARY", "PYTHONPATH")}
    env["PYTHONPATH"] = str(site)
    out = subprocess.run([sys.executable, "-c", "import pipectl; print(pipectl.library)"],
                         capture_output=True, text=True, env=env, cwd=tmp_path)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip().startswith(str(tmp_path / "p"))
