"""Ctrl-C from Python (a child Python sent SIGINT while it runs a pipeline): KeyboardInterrupt once
the run has drained, every completed batch kept; and runs of one pipeline from two threads."""

import signal
import subprocess
import sys
import threading

import numpy as np

import pipectl
from conftest import env_for_child, wait_for_a_batch

LONG = """pipeline: long
run: {batches: 100000000, depth: 3}
buffers:
  a: {where: host, dtype: i64, shape: [8]}
stages:
  - {name: gen, kind: source, to: a, generator: range}
  - {name: save, kind: sink, from: a, to: out/a.npy}
"""

CHILD = r"""
import sys, pipectl
p = pipectl.loads(sys.stdin.read(), dir=sys.argv[1])
print("running", flush=True)
try:
    p.run(executor="host")
    print("finished", flush=True)
except KeyboardInterrupt as e:
    f = e.result.files[0]
    print("interrupted", e.result.batches, f.batches, int(f.complete), f.path, flush=True)
    sys.exit(130)
"""


def test_ctrl_c_raises_keyboard_interrupt_after_the_drain(tmp_path):
    proc = subprocess.Popen([sys.executable, "-c", CHILD, str(tmp_path)], stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            env=env_for_child())
    proc.stdin.write(LONG)
    proc.stdin.close()
    proc.stdin = None  # written: communicate() has nothing to send
    assert proc.stdout.readline().strip() == "running"
    wait_for_a_batch(tmp_path / "out" / "a.npy.partial", lambda: proc.poll() is None)
    proc.send_signal(signal.SIGINT)
    try:
        out, err = proc.communicate(timeout=60)
    except subprocess.TimeoutExpired:
        proc.kill()
        raise AssertionError("the run did not stop on SIGINT")
    assert proc.returncode == 130, err
    words = out.split()
    assert words[0] == "interrupted", out
    batches, written, complete, path = int(words[1]), int(words[2]), words[3], words[4]
    assert 0 < batches < 100000000 and written == batches and complete == "1"
    saved = np.load(path)  # finalized under its final name: the header says the batches kept
    assert saved.shape == (written, 8)
    np.testing.assert_array_equal(saved[:, 0], np.arange(written) * 8)
    assert not list(tmp_path.glob("out/*.partial*"))


def test_two_threads_run_one_pipeline_at_once(quickstart):
    p = pipectl.load(quickstart, set={"run.batches": 8})
    want = p.run(outputs=["y_host"], executor="host")
    results, errors = [None, None], []
    inputs = [np.full((8, 262144), k + 1, np.float32) for k in range(2)]

    def work(k):
        try:
            results[k] = (p.run(outputs=["y_host"], executor="host"),
                          p.run(inputs={"x_host": inputs[k]}, outputs=["y_host"],
                                executor="host"))
        except Exception as e:  # noqa: BLE001 (reported below)
            errors.append(e)

    threads = [threading.Thread(target=work, args=(k,)) for k in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors, errors
    for k in range(2):
        gen, mem = results[k]
        assert gen.outputs["y_host"].tobytes() == want.outputs["y_host"].tobytes()
        np.testing.assert_array_equal(mem.outputs["y_host"], 2 * inputs[k])
