"""The package on the GPU executor (CTest test_python_gpu, label gpu; each test skips without a
device): the quickstart from Python byte for byte the CLI's on the GPU and the host's, in-memory
inputs the same as the file they would come from, Ctrl-C, the GPU-only example."""

import json
import signal
import subprocess
import sys

import numpy as np
import pytest

import pipectl
from conftest import env_for_child, run_cli, wait_for_a_batch

pytestmark = [pytest.mark.gpu, pytest.mark.usefixtures("gpu")]


def test_quickstart_on_gpu_as_cli(cli, quickstart):
    summary = json.loads(run_cli(cli, "run", "--executor", "gpu", "--json", quickstart).stdout)
    want = np.load(quickstart.parent / "out" / "quickstart.npy")
    p = pipectl.load(quickstart)
    r = p.run(outputs=["y_host"], executor="gpu")
    assert r.executor == "gpu" and r.stats["device"] != "CPU"
    assert r.outputs["y_host"].tobytes() == want.tobytes()
    assert r.checksums["save"] == summary["outputs"][0]["checksum"]
    host = p.run(outputs=["y_host"], executor="host")
    assert host.outputs["y_host"].tobytes() == want.tobytes()


@pytest.mark.parametrize("graphs", ["auto", "segment", "stage", "none"])
def test_memory_input_on_gpu_as_file(tmp_path, graphs):
    data = np.random.default_rng(5).standard_normal((12, 1 << 18), dtype=np.float32)
    np.save(tmp_path / "x.npy", data)
    text = (
        "pipeline: g\nrun: {batches: 12, depth: 3}\nbuffers:\n"
        "  x: {where: host, dtype: f32, shape: [262144]}\n"
        "  x_dev: {where: device, dtype: f32, shape: [262144]}\n"
        "  y_dev: {where: device, dtype: f32, shape: [262144]}\n"
        "  y: {where: host, dtype: f32, shape: [262144]}\nstages:\n"
        "  - {name: load, kind: source, to: x, file: x.npy}\n"
        "  - {name: up, kind: h2d, from: x, to: x_dev}\n"
        "  - {name: twice, kind: kernel, op: scale, alpha: 2, reads: [x_dev], writes: [y_dev]}\n"
        "  - {name: down, kind: d2h, from: y_dev, to: y}\n"
        "  - {name: save, kind: sink, from: y, to: out/y.npy}\n")
    p = pipectl.loads(text, dir=tmp_path)
    from_file = p.run(executor="gpu", graphs=graphs)
    from_mem = p.run(inputs={"x": data}, outputs=["y"], executor="gpu", graphs=graphs)
    assert from_mem.checksums == from_file.checksums
    np.testing.assert_array_equal(from_mem.outputs["y"], 2 * data)
    np.testing.assert_array_equal(np.load(tmp_path / "out" / "y.npy"), 2 * data)


def test_ctrl_c_on_gpu(tmp_path):
    child = (
        "import sys, pipectl\n"
        "p = pipectl.loads(sys.stdin.read(), dir=sys.argv[1])\n"
        "print('running', flush=True)\n"
        "try:\n"
        "    p.run(executor='gpu')\n"
        "except KeyboardInterrupt as e:\n"
        "    print('interrupted', e.result.batches, e.result.files[0].batches, flush=True)\n"
        "    sys.exit(130)\n")
    text = ("pipeline: long\nrun: {batches: 10000000, depth: 3}\nbuffers:\n"
            "  a: {where: host, dtype: f32, shape: [4096]}\n"
            "  a_dev: {where: device, dtype: f32, shape: [4096]}\n"
            "  b: {where: host, dtype: f32, shape: [4096]}\nstages:\n"
            "  - {name: gen, kind: source, to: a, generator: range}\n"
            "  - {name: up, kind: h2d, from: a, to: a_dev}\n"
            "  - {name: down, kind: d2h, from: a_dev, to: b}\n"
            "  - {name: save, kind: sink, from: b, to: out/b.npy}\n")
    proc = subprocess.Popen([sys.executable, "-c", child, str(tmp_path)], stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            env=env_for_child())
    proc.stdin.write(text)
    proc.stdin.close()
    proc.stdin = None
    assert proc.stdout.readline().strip() == "running"
    wait_for_a_batch(tmp_path / "out" / "b.npy.partial", lambda: proc.poll() is None, 300)
    proc.send_signal(signal.SIGINT)
    out, err = proc.communicate(timeout=120)
    assert proc.returncode == 130, err
    words = out.split()
    assert words[0] == "interrupted" and int(words[1]) == int(words[2]) > 0
    assert np.load(tmp_path / "out" / "b.npy").shape == (int(words[2]), 4096)


def test_gpt2_example_on_gpu(repo):
    proc = subprocess.run([sys.executable, str(repo / "python" / "examples" /
                                               "gpt2_greedy_numpy.py"), "--executor", "gpu",
                           "--batches", "4", "--steps", "1"],
                          capture_output=True, text=True, env=env_for_child(), timeout=900)
    assert proc.returncode == 0, proc.stderr
    assert "on gpu" in proc.stdout
