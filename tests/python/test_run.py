"""Runs from Python: the quickstart's outputs byte for byte the CLI's, in-memory inputs the same as
the file they would come from, outputs into arrays and callbacks, plans, statistics, progress."""

import json

import numpy as np
import pytest

import pipectl
from conftest import run_cli


def cli_run(cli, path, *args):
    """`pipectl run --executor host --json`: the summary object."""
    proc = run_cli(cli, "run", "--executor", "host", "--json", *args, path)
    return json.loads(proc.stdout)


def test_quickstart_byte_identical_to_cli(cli, quickstart):
    summary = cli_run(cli, quickstart)
    want = np.load(quickstart.parent / "out" / "quickstart.npy")
    (quickstart.parent / "out" / "quickstart.npy").unlink()
    p = pipectl.load(quickstart)
    r = p.run(outputs=["y_host"], executor="host")
    got = r.outputs["y_host"]
    assert got.dtype == want.dtype and got.shape == want.shape == (16, 262144)
    assert got.tobytes() == want.tobytes()
    assert r.checksums["save"] == summary["outputs"][0]["checksum"]
    assert not (quickstart.parent / "out" / "quickstart.npy").exists()  # no file written
    assert r.files[0].in_memory and r.files[0].path is None and r.files[0].batches == 16


def test_quickstart_file_as_cli(cli, quickstart):
    """Without outputs the sinks write their files, as `pipectl run` does."""
    summary = cli_run(cli, quickstart)
    r = pipectl.load(quickstart).run(executor="host")
    assert r.checksums["save"] == summary["outputs"][0]["checksum"]
    assert r.files[0].path.endswith("out/quickstart.npy") and r.files[0].complete
    assert r.batches == 16 and r.executor == "host" and r.outputs == {}


PIPE = """
pipeline: mem
run: {batches: 6, depth: 2}
buffers:
  x: {where: host, dtype: f32, shape: [4, 8]}
  x_dev: {where: device, dtype: f32, shape: [4, 8]}
  y_dev: {where: device, dtype: f32, shape: [4, 8]}
  y: {where: host, dtype: f32, shape: [4, 8]}
stages:
  - {name: load, kind: source, to: x, file: x.npy}
  - {name: up, kind: h2d, from: x, to: x_dev}
  - {name: scale, kind: kernel, op: scale, alpha: 3, reads: [x_dev], writes: [y_dev]}
  - {name: down, kind: d2h, from: y_dev, to: y}
  - {name: save, kind: sink, from: y, to: out/y.npy}
"""


def test_memory_inputs_equal_file_inputs(tmp_path):
    data = np.random.default_rng(3).standard_normal((6, 4, 8)).astype(np.float32)
    np.save(tmp_path / "x.npy", data)
    p = pipectl.loads(PIPE, dir=tmp_path)
    from_file = p.run(executor="host")
    file_bytes = np.load(tmp_path / "out" / "y.npy")
    (tmp_path / "x.npy").unlink()  # a bound input does not read it
    from_mem = p.run(inputs={"x": data}, outputs=["y"], executor="host")
    assert from_mem.outputs["y"].tobytes() == file_bytes.tobytes()
    assert from_mem.checksums == from_file.checksums
    np.testing.assert_array_equal(from_mem.outputs["y"], 3 * data)


def test_memory_input_layouts(tmp_path):
    """(batches, *shape), the same rows (batches * B, *rest), any strides (copied)."""
    data = np.arange(6 * 32, dtype=np.float32).reshape(6, 4, 8)
    p = pipectl.loads(PIPE, dir=tmp_path)
    want = p.run(inputs={"x": data}, outputs=["y"], executor="host").outputs["y"]
    rows = p.run(inputs={"x": data.reshape(24, 8)}, outputs=["y"], executor="host")
    assert rows.outputs["y"].tobytes() == want.tobytes()
    fortran = np.asfortranarray(data)
    strided = p.run(inputs={"x": fortran}, outputs=["y"], executor="host")
    assert strided.outputs["y"].tobytes() == want.tobytes()
    # The inputs say how many batches run; batches= runs fewer.
    few = p.run(inputs={"x": data}, outputs=["y"], executor="host", batches=2)
    assert few.batches == 2 and few.outputs["y"].shape == (2, 4, 8)
    more = np.concatenate([data, data])
    assert p.run(inputs={"x": more}, outputs=["y"], executor="host").batches == 12


def test_output_into_given_array_and_callback(tmp_path):
    data = np.arange(6 * 32, dtype=np.float32).reshape(6, 4, 8)
    p = pipectl.loads(PIPE, dir=tmp_path)
    room = np.full((6, 4, 8), -1, np.float32)
    r = p.run(inputs={"x": data}, outputs={"y": room}, executor="host")
    np.testing.assert_array_equal(room, 3 * data)
    assert r.outputs["y"].base is room or r.outputs["y"].base is room.base
    seen = []

    def take(batch, arr):
        assert arr.shape == (4, 8) and arr.dtype == np.float32
        seen.append((batch, arr.copy()))

    r = p.run(inputs={"x": data}, outputs={"y": take}, executor="host")
    assert [b for b, _ in seen] == list(range(6))
    np.testing.assert_array_equal(np.stack([a for _, a in seen]), 3 * data)
    assert "y" not in r.outputs


def test_callback_exception_fails_the_run(tmp_path):
    data = np.zeros((6, 4, 8), np.float32)
    p = pipectl.loads(PIPE, dir=tmp_path)

    def boom(batch, arr):
        if batch == 2:
            raise ValueError("no thanks")

    with pytest.raises(ValueError, match="no thanks") as e:
        p.run(inputs={"x": data}, outputs={"y": boom}, executor="host")
    cause = e.value.__cause__
    assert isinstance(cause, pipectl.RunError) and cause.stage == "save" and cause.batch == 2
    assert cause.result.files[0].batches == 2


def test_persistent_input(tmp_path):
    """A persistent buffer's contents from numpy, in place of its init (a corpus)."""
    text = """
pipeline: w
run: {batches: 3}
buffers:
  w: {where: host, dtype: i32, shape: [2, 2], persistent: true, init: zeros}
  w_dev: {where: device, dtype: i32, shape: [2, 2]}
  y: {where: host, dtype: i32, shape: [2, 2]}
stages:
  - {name: up, kind: h2d, from: w, to: w_dev}
  - {name: down, kind: d2h, from: w_dev, to: y}
  - {name: save, kind: sink, from: y}
"""
    w = np.array([[1, 2], [3, 4]], np.int32)
    r = pipectl.loads(text).run(inputs={"w": w}, outputs=["y"], executor="host")
    np.testing.assert_array_equal(r.outputs["y"], np.stack([w] * 3))


def test_plan_formats(quickstart):
    p = pipectl.load(quickstart, set={"run.batches": 4})
    text = p.plan()
    assert text.startswith("plan for pipeline 'quickstart'") and "4 batches" in text
    assert p.plan(format="dot").startswith("digraph")
    plan = json.loads(p.plan(format="json"))
    assert "streams" in plan and "stages" in plan
    assert "depth 2" in p.plan(depth=2)
    with pytest.raises(pipectl.CheckError, match="format must be"):
        p.plan(format="svg")


def test_buffers_and_set(quickstart):
    p = pipectl.load(quickstart, set={"run.batches": 3, "double.alpha": 5})
    assert p.name == "quickstart" and p.stages == 5
    x = p.buffers["x_host"]
    assert (x.dtype, x.shape, x.nbytes, x.device, x.source) == (np.float32, (262144,),
                                                               1048576, False, "gen")
    assert p.buffers["y_host"].sink == "save" and p.buffers["x_dev"].device
    r = p.run(outputs=["y_host"], executor="host")
    assert r.batches == 3
    plain = pipectl.load(quickstart, set=["run.batches=1"]).run(outputs=["y_host"],
                                                                executor="host")
    np.testing.assert_allclose(r.outputs["y_host"][0], plain.outputs["y_host"][0] * 2.5)


def test_stats(quickstart):
    r = pipectl.load(quickstart).run(outputs=["y_host"], executor="host", workers=3)
    st = r.stats
    assert st["executor"] == "host" and st["batches"] == 16 and st["workers"] == 3
    assert st["wall_s"] > 0 and st["per_batch_s"] > 0 and st["depth"] == 4
    assert list(st["stages"]) == ["gen", "up", "double", "down", "save"]
    assert st["stages"]["up"]["engine"] == "h2d" and st["stages"]["up"]["count"] == 16
    assert st["bound_s"] > 0 and st["bound_engine"] in st["engines"]
    assert st["bound_stage"] in st["stages"] and 0 < st["achieved"]
    assert st["bytes_in_per_batch"] == 1048576


def test_progress_plain_line(quickstart, capsys, monkeypatch):
    import builtins
    real = builtins.__import__

    def no_tqdm(name, *a, **k):
        if name == "tqdm":
            raise ImportError("no tqdm here")
        return real(name, *a, **k)

    monkeypatch.setattr(builtins, "__import__", no_tqdm)
    pipectl.load(quickstart, set={"run.batches": 4}).run(outputs=["y_host"], executor="host",
                                                         progress=True)
    err = capsys.readouterr().err
    assert "quickstart: 4/4 batches" in err and err.endswith("\n")


def test_loads_lua(tmp_path, repo):
    text = (repo / "pipelines" / "quickstart.lua").read_text()
    p = pipectl.loads(text, lua=True, name="q.lua", dir=tmp_path)
    assert p.stages == 5
    r = p.run(outputs=["y_host"], executor="host", batches=2)
    assert r.outputs["y_host"].shape == (2, 262144)


def test_trace(quickstart, tmp_path):
    trace = tmp_path / "run.json"
    pipectl.load(quickstart, set={"run.batches": 2}).run(executor="host", trace=trace)
    assert "traceEvents" in json.loads(trace.read_text())


def test_pyproject_version_is_the_library_s(repo):
    text = (repo / "python" / "pyproject.toml").read_text()
    assert f'version = "{pipectl.__version__}"' in text
