"""capture() and replay(): bundles (docs/bundles.md), through the ``pipectl`` command that comes
with the library (its capture and replay keep the bundle's format in one place)."""

import json
import os
import re
import shutil
import subprocess
from pathlib import Path

from . import _errors, _lib


def cli():
    """The ``pipectl`` command: ``PIPECTL_CLI``, else the one beside the library (``PREFIX/bin``
    of an install, the build folder of a checkout), else the first on PATH."""
    env = os.environ.get("PIPECTL_CLI")
    if env:
        return env
    libdir = Path(_lib.path).resolve().parent if "/" in _lib.path else None
    if libdir is not None:
        for c in (libdir / "pipectl", libdir.parent / "bin" / "pipectl",
                  libdir.parent.parent / "bin" / "pipectl"):
            if c.is_file() and os.access(c, os.X_OK):
                return str(c)
    found = shutil.which("pipectl")
    if not found:
        raise FileNotFoundError(
            "pipectl: the pipectl command is not found beside libpipectl.so nor on PATH; set "
            "PIPECTL_CLI to it (capture and replay run it)")
    return found


_POS = re.compile(r"^(?P<file>[^:\n]+):(?P<line>\d+):(?P<col>\d+): error: ", re.M)


def _fail(proc, what):
    text = (proc.stderr or "").strip() or f"error: pipectl {what} exited {proc.returncode}"
    m = _POS.search(text)
    kw = dict(file=m["file"], line=int(m["line"]), column=int(m["col"])) if m else {}
    if proc.returncode == 2:
        return _errors.CheckError(text, code=1, **kw)
    if proc.returncode >= 128:
        return _errors.Interrupted(text, code=8, **kw)
    return _errors.RunError(text, code=2, **kw)


def _opts(batches, depth, executor, workers, set):
    args = []
    if batches is not None:
        args += ["--batches", str(batches)]
    if depth is not None:
        args += ["--depth", str(depth)]
    if executor is not None:
        args += ["--executor", executor]
    if workers:
        args += ["--workers", str(workers)]
    for k, v in (set.items() if isinstance(set, dict) else ((x, None) for x in set or ())):
        from ._pipeline import _yaml_value  # noqa: PLC0415
        args += ["--set", k if v is None else f"{k}={_yaml_value(v)}"]
    return args


class Bundle:
    """A bundle folder: ``path``, and ``manifest`` (its manifest.json as a dict)."""

    def __init__(self, path):
        self.path = Path(path)
        with open(self.path / "manifest.json") as f:
            self.manifest = json.load(f)

    def __repr__(self):
        return f"Bundle({str(self.path)!r})"


class Replay:
    """What ``pipectl replay --json`` said: ``ok`` (every batch's checksum matches), ``verdict``,
    ``report`` (the whole object: sinks, stages against their noise, environment changes)."""

    def __init__(self, report):
        self.report = report
        self.verdict = report.get("verdict")
        self.ok = report.get("exit_code") == 0

    def __bool__(self):
        return self.ok

    def __repr__(self):
        return f"Replay({self.verdict!r})"


def capture(pipeline, out, *, reps=3, batches=None, depth=None, executor="auto", workers=0,
            set=None, copy_inputs=False, copy_outputs=False):
    """Runs a pipeline file ``reps`` times and writes a bundle into the folder ``out``
    (``pipectl capture FILE -o OUT``); returns the :class:`Bundle`."""
    args = [cli(), "capture", "--quiet", "-o", str(out), "--reps", str(reps)]
    args += _opts(batches, depth, executor, workers, set)
    args += ["--copy-inputs"] * bool(copy_inputs) + ["--copy-outputs"] * bool(copy_outputs)
    proc = subprocess.run(args + ["--", str(pipeline)], capture_output=True, text=True)
    if proc.returncode != 0:
        raise _fail(proc, "capture")
    return Bundle(out)


def replay(bundle, *, executor=None, reps=None, workers=0, out=None,
           allow_changed_inputs=False):
    """Runs a bundle again (``pipectl replay --json``) and returns a :class:`Replay`; a bundle
    whose outputs differ is a Replay with ``ok`` False, a bad bundle or a changed input raises
    :class:`CheckError`."""
    path = bundle.path if isinstance(bundle, Bundle) else bundle
    args = [cli(), "replay", "--json"]
    if executor is not None:
        args += ["--executor", executor]
    if reps is not None:
        args += ["--reps", str(reps)]
    if workers:
        args += ["--workers", str(workers)]
    if out is not None:
        args += ["--out", str(out)]
    if allow_changed_inputs:
        args += ["--allow-changed-inputs"]
    proc = subprocess.run(args + ["--", str(path)], capture_output=True, text=True)
    try:
        report = json.loads(proc.stdout)
    except json.JSONDecodeError:
        raise _fail(proc, "replay") from None
    if proc.returncode not in (0, 1):
        err = _fail(proc, "replay")
        err.report = report
        raise err
    return Replay(report)
