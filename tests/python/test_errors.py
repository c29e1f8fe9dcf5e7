"""Every error class the package raises, each with the record's fields: the position in the
pipeline file (file, line, column) or in the run (stage, batch), the status and exit code."""

import re
import threading

import numpy as np
import pytest

import pipectl
from conftest import gpu_available, wait_for_a_batch


def position_of(message):
    m = re.match(r"([^:]+):(\d+):(\d+): error: ", message)
    return (m[1], int(m[2]), int(m[3])) if m else None


def test_check_error_has_the_position(tmp_path):
    bad = tmp_path / "bad.yaml"
    bad.write_text("pipeline: b\nbuffers:\n  a: {dtype: f32, shape: [4]}\nstages:\n"
                   "  - {name: s, kind: sink, from: aa}\n")
    with pytest.raises(pipectl.CheckError) as e:
        pipectl.load(bad)
    err = e.value
    assert isinstance(err, ValueError) and err.status == "EINPUT" and err.exit_code == 2
    assert (err.file, err.line, err.column) == position_of(err.message)
    assert err.file == str(bad) and err.line == 5 and err.col == err.column
    assert "reads unknown buffer 'aa'" in str(err)
    assert err.result is None


def test_check_error_from_text_and_set():
    with pytest.raises(pipectl.CheckError) as e:
        pipectl.loads("pipeline: x\nrun: {batches: -3}\n", name="inline.yaml")
    assert e.value.file == "inline.yaml" and e.value.line == 2
    with pytest.raises(pipectl.CheckError, match=r"^--set run\.depth=lots: "):
        pipectl.loads("pipeline: x\n", set={"run.depth": "lots"})


def test_check_files_error(tmp_path):
    p = pipectl.loads("pipeline: f\nbuffers:\n  a: {where: host, dtype: u8, shape: [8]}\n"
                      "stages:\n  - {name: load, kind: source, to: a, file: missing.raw}\n"
                      "  - {name: s, kind: sink, from: a}\n", name="f.yaml", dir=tmp_path)
    with pytest.raises(pipectl.CheckError) as e:
        p.check()
    assert (e.value.file, e.value.line) == ("f.yaml", 5) and "missing.raw" in e.value.message


def test_bindings_are_check_errors(quickstart):
    p = pipectl.load(quickstart, set={"run.batches": 2})
    with pytest.raises(pipectl.CheckError, match=r"no buffer 'x_hots' \(did you mean 'x_host'"):
        p.run(inputs={"x_hots": np.zeros((2, 262144), np.float32)}, executor="host")
    with pytest.raises(pipectl.CheckError, match="a float64 array, but buffer 'x_host' is f32"):
        p.run(inputs={"x_host": np.zeros((2, 262144))}, executor="host")
    with pytest.raises(pipectl.CheckError, match=r"an array of shape \(2, 5\)"):
        p.run(inputs={"x_host": np.zeros((2, 5), np.float32)}, executor="host")
    with pytest.raises(pipectl.CheckError, match="no sink writes buffer 'x_host'"):
        p.run(outputs=["x_host"], executor="host")
    with pytest.raises(pipectl.CheckError, match="is on the device"):
        p.run(outputs=["y_dev"], executor="host")
    with pytest.raises(pipectl.CheckError, match="executor must be"):
        p.run(executor="cpu")


def test_run_error_names_stage_and_batch(quickstart):
    p = pipectl.load(quickstart, set={"run.batches": 6})
    with pytest.raises(pipectl.RunError) as e:
        p.run(outputs=["y_host"], executor="host", fail_at=("double", 3))
    err = e.value
    assert type(err) is pipectl.RunError and err.status == "ERUNTIME" and err.exit_code == 1
    assert (err.stage, err.batch, err.file) == ("double", 3, None)
    assert err.message.startswith("error: stage 'double', batch 3: ")
    assert err.result.batches <= 3 and err.result.outputs["y_host"].shape[0] <= 3


def test_lua_error(tmp_path):
    p = pipectl.loads(
        "pipeline: l\nrun: {batches: 5, depth: 1}\nbuffers:\n  a: {dtype: i32, shape: [2]}\n"
        "stages:\n  - {name: gen, kind: lua, writes: [a], code: \"function run(batch, opts, "
        "bufs) if batch == 2 then error('boom') end bufs.a:fill(batch) end\"}\n"
        "  - {name: s, kind: sink, from: a}\n")
    with pytest.raises(pipectl.LuaError) as e:
        p.run(outputs=["a"], executor="host")
    assert e.value.status == "ELUA" and (e.value.stage, e.value.batch) == ("gen", 2)
    assert "boom" in e.value.message
    np.testing.assert_array_equal(e.value.result.outputs["a"], [[0, 0], [1, 1]])


def test_file_error_has_position_and_stage(tmp_path):
    (tmp_path / "a_file").write_text("not a folder")
    p = pipectl.loads("pipeline: io\nrun: {batches: 2}\nbuffers:\n"
                      "  a: {where: host, dtype: u8, shape: [8]}\nstages:\n"
                      "  - {name: gen, kind: source, to: a, generator: constant}\n"
                      "  - {name: save, kind: sink, from: a, to: a_file/x.raw}\n",
                      name="io.yaml", dir=tmp_path)
    with pytest.raises(pipectl.FileError) as e:
        p.run(executor="host")
    err = e.value
    assert isinstance(err, OSError) and err.status == "EIO"
    assert (err.file, err.line, err.stage, err.batch) == ("io.yaml", 7, "save", -1)


def test_no_device_error():
    if gpu_available():
        pytest.skip("a GPU is present: the GPU executor runs")
    p = pipectl.loads("pipeline: g\nrun: {batches: 1}\nbuffers:\n"
                      "  a: {where: host, dtype: u8, shape: [8]}\nstages:\n"
                      "  - {name: gen, kind: source, to: a, generator: constant}\n"
                      "  - {name: s, kind: sink, from: a}\n")
    with pytest.raises(pipectl.NoDeviceError) as e:
        p.run(executor="gpu")
    assert e.value.status == "ENODEV" and e.value.result is None and e.value.exit_code == 1


def test_interrupted_from_another_thread(tmp_path):
    """Pipeline.interrupt(): the run drains and raises Interrupted with what completed."""
    p = pipectl.loads("pipeline: long\nrun: {batches: 1000000, depth: 2}\nbuffers:\n"
                      "  a: {where: host, dtype: i64, shape: [4]}\nstages:\n"
                      "  - {name: gen, kind: source, to: a, generator: range}\n"
                      "  - {name: save, kind: sink, from: a, to: out/a.npy}\n", dir=tmp_path)
    out = {}

    def work():
        try:
            p.run(executor="host")
        except pipectl.Interrupted as e:
            out["err"] = e

    t = threading.Thread(target=work)
    t.start()
    # a run stopped before its first batch leaves no file, a different promise than this one
    wait_for_a_batch(tmp_path / "out" / "a.npy.partial", t.is_alive)
    for _ in range(200):
        p.interrupt()
        if out or not t.is_alive():
            break
        t.join(0.05)
    t.join(60)
    err = out["err"]
    assert err.status == "EINTR" and err.exit_code == 130
    assert err.result.batches < 1000000
    saved = np.load(tmp_path / "out" / "a.npy")
    assert saved.shape[0] == err.result.files[0].batches and err.result.files[0].complete
    np.testing.assert_array_equal(saved[:, 0], np.arange(saved.shape[0]) * 4)
