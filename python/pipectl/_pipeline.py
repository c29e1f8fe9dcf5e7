"""Pipelines, runs and their results over the C API (pipectl.h), with numpy arrays in and out."""

import ctypes
import json
import threading

import numpy as np

from . import _errors, _lib
from ._lib import lib, s

EXECUTORS = {"auto": 0, "host": 1, "gpu": 2}
GRAPHS = {"auto": 0, "stage": 1, "segment": 2, "none": 3}
TIMING = {"sample": 0, "all": 1, "off": 2}
PLAN_FORMATS = {"text": 0, "dot": 1, "json": 2}


def _bf16():
    try:
        import ml_dtypes  # noqa: PLC0415 (optional)
        return np.dtype(ml_dtypes.bfloat16)
    except ImportError:
        return np.dtype(np.uint16)  # the raw bits


# pipectl.h's PIPECTL_U8 ... PIPECTL_F64, as numpy dtypes (bf16: ml_dtypes' if installed, else the
# bits as uint16).
_NP = [np.dtype(np.uint8), np.dtype(np.int32), np.dtype(np.int64), np.dtype(np.float16), None,
       np.dtype(np.float32), np.dtype(np.float64)]


def _np_dtype(code):
    return _bf16() if code == 4 else _NP[code]


class _Handle:
    """A pipectl handle for one call or one run (handles are cheap: each run has its own, so
    runs from several threads never share one)."""

    def __enter__(self):
        self.h = ctypes.c_void_p()
        if lib.pipectl_open(ctypes.byref(self.h)) != 0:
            raise MemoryError("pipectl: out of memory opening a handle")
        return self.h

    def __exit__(self, *exc):
        lib.pipectl_close(self.h)


def _choice(what, value, table):
    if value not in table:
        raise _errors.check_error(
            f"error: {what} must be {', '.join(repr(k) for k in table)}, got {value!r}")
    return table[value]


class Buffer:
    """One buffer of a pipeline as declared: ``name``, ``device`` (bool), ``persistent``,
    ``dtype`` (numpy's), ``dtype_name`` ("f32"), ``shape`` (one batch's), ``nbytes`` (of one
    batch), ``source`` and ``sink`` (the stage an input or output in memory replaces, or None)."""

    __slots__ = ("name", "device", "persistent", "dtype", "dtype_name", "shape", "nbytes",
                 "source", "sink")

    def __init__(self, info):
        self.name = s(info.name)
        self.device = bool(info.device)
        self.persistent = bool(info.persistent)
        self.dtype = _np_dtype(info.dtype)
        self.dtype_name = s(info.dtype_name)
        self.shape = tuple(info.shape[i] for i in range(info.rank))
        self.nbytes = info.bytes
        self.source = s(info.source)
        self.sink = s(info.sink)

    def __repr__(self):
        where = "device" if self.device else "host"
        return f"Buffer({self.name!r}, {where}, {self.dtype_name}, {list(self.shape)})"


def _yaml_value(v):
    """A Python value as the YAML --set takes (JSON is YAML)."""
    if isinstance(v, str):
        return v
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, (list, tuple, dict, int, float)) or v is None:
        return json.dumps(list(v) if isinstance(v, tuple) else v)
    return str(v)


def _load_options(set, out_dir, confine, name=None, dir=None, lua=False):
    pairs = []
    if isinstance(set, dict):
        pairs = [f"{k}={_yaml_value(v)}" for k, v in set.items()]
    elif set:
        pairs = [x if isinstance(x, str) else f"{x[0]}={_yaml_value(x[1])}" for x in set]
    arr = (ctypes.c_char_p * max(len(pairs), 1))(*[p.encode() for p in pairs])
    o = _lib.LoadOptions()
    o.size = ctypes.sizeof(o)
    o.set = ctypes.cast(arr, ctypes.POINTER(ctypes.c_char_p)) if pairs else None
    o.n_set = len(pairs)
    o.out_dir = str(out_dir).encode() if out_dir is not None else None
    o.confine = 1 if confine else 0
    o.name = name.encode() if name else None
    o.dir = str(dir).encode() if dir is not None else None
    o.lua = 1 if lua else 0
    return o, arr


def load(path, *, set=None, out_dir=None, confine=False):
    """Loads and checks a pipeline file (YAML, or Lua for a .lua name).

    ``set``: keys to change as ``pipectl run --set`` does, a dict ``{"run.batches": 4,
    "forward.weights": "/models/gpt2"}`` (values as YAML: numbers, strings, lists) or a list of
    "KEY=VALUE" strings. ``out_dir`` and ``confine`` are ``--out-dir`` and ``--confine``.
    Raises :class:`CheckError` with the position of the first error."""
    opts, keep = _load_options(set, out_dir, confine)
    with _Handle() as h:
        p = ctypes.c_void_p()
        rc = lib.pipectl_load_with(h, str(path).encode(), ctypes.byref(opts), ctypes.byref(p))
        if rc:
            raise _errors.from_handle(h, rc)
    del keep
    return Pipeline(p)


def loads(text, *, name=None, dir=None, lua=False, set=None, out_dir=None, confine=False):
    """Loads and checks a pipeline from text (YAML; Lua with ``lua=True``). ``name`` is what
    error positions call it ("<string>"), ``dir`` the folder its relative paths resolve against
    (the working directory)."""
    data = text.encode() if isinstance(text, str) else bytes(text)
    opts, keep = _load_options(set, out_dir, confine, name, dir, lua)
    with _Handle() as h:
        p = ctypes.c_void_p()
        rc = lib.pipectl_loads(h, data, len(data), ctypes.byref(opts), ctypes.byref(p))
        if rc:
            raise _errors.from_handle(h, rc)
    del keep
    return Pipeline(p)


class Output:
    """What one sink wrote: ``stage``, ``buffer``, ``path`` (None in memory or checksums only),
    ``batches``, ``checksum`` (the 64-bit value ``pipectl run`` prints as 0x%016x), ``complete``
    (the file was finalized), ``in_memory``; ``batch_checksum(b)`` for one of the first 65536
    batches."""

    def __init__(self, result, i):
        r = result._r
        self._result, self._i = result, i
        self.stage = s(lib.pipectl_output_stage(r, i))
        self.buffer = s(lib.pipectl_output_buffer(r, i))
        self.path = s(lib.pipectl_output_path(r, i))
        self.batches = lib.pipectl_output_batches(r, i)
        self.checksum = lib.pipectl_output_checksum(r, i)
        self.complete = bool(lib.pipectl_output_complete(r, i))
        self.in_memory = bool(lib.pipectl_output_in_memory(r, i))

    @property
    def checksum_hex(self):
        return f"0x{self.checksum:016x}"

    def batch_checksum(self, b):
        return lib.pipectl_output_batch_checksum(self._result._r, self._i, b)

    def __repr__(self):
        where = "memory" if self.in_memory else self.path or "checksums only"
        return f"Output({self.stage!r}: {self.batches} batches, {where}, {self.checksum_hex})"


def _stats(r):
    st = _lib.Stats()
    st.size = ctypes.sizeof(st)
    if lib.pipectl_result_stats(r, ctypes.byref(st)) != 0:
        return {}

    def num(x):
        return None if x < 0 else x

    out = {
        "executor": s(st.executor), "device": s(st.device), "graph_mode": s(st.graph_mode),
        "depth": st.depth, "workers": st.workers,
        "batches": st.batches, "batches_planned": st.batches_planned,
        "wall_s": st.wall_s, "per_batch_s": num(st.per_batch_s),
        "steady_per_batch_s": num(st.steady_per_batch_s), "batches_per_s": st.batches_per_s,
        "bytes_in_per_batch": st.bytes_in_per_batch, "bytes_out_per_batch": st.bytes_out_per_batch,
        "bound_s": num(st.bound_s), "bound_engine": s(st.bound_engine),
        "bound_stage": s(st.bound_stage), "achieved": num(st.achieved),
        "stages": {}, "engines": {},
    }
    for i in range(st.stages):
        x = _lib.StageStats()
        x.size = ctypes.sizeof(x)
        if lib.pipectl_result_stage_stats(r, i, ctypes.byref(x)) == 0:
            out["stages"][s(x.name)] = {
                "kind": s(x.kind), "engine": s(x.engine), "stream": s(x.stream),
                "count": x.count, "mean_s": x.mean_s, "p50_s": x.p50_s, "p99_s": x.p99_s,
                "min_s": x.min_s, "max_s": x.max_s, "total_s": x.total_s, "busy": x.busy}
    for i in range(st.engines):
        x = _lib.EngineStats()
        x.size = ctypes.sizeof(x)
        if lib.pipectl_result_engine_stats(r, i, ctypes.byref(x)) == 0:
            out["engines"][s(x.name)] = {
                "engine": s(x.engine), "stages": x.stages, "timed_batches": x.timed_batches,
                "busy_s": x.busy_s, "busy_per_batch_s": x.busy_per_batch_s,
                "occupancy": x.occupancy}
    return out


class Result:
    """A run: ``executor`` ("host" or "gpu"), ``note`` (what executor="auto" picked), ``batches``
    (completed), ``batches_planned``, ``seconds`` (wall), ``outputs`` (buffer name -> numpy array
    of shape (batches, *shape), for each output asked for in memory), ``files`` (one
    :class:`Output` per sink), ``stats`` (the figures ``pipectl run`` prints: a dict with wall_s,
    per_batch_s, steady_per_batch_s, bound_s, bound_engine, bound_stage, achieved, and "stages"
    and "engines" dicts; docs/python.md lists them)."""

    def __init__(self, r, batches_planned, arrays):
        self._r = r
        self.executor = s(lib.pipectl_result_executor(r))
        self.note = s(lib.pipectl_result_note(r))
        self.batches = lib.pipectl_result_batches(r)
        self.batches_planned = batches_planned
        self.seconds = lib.pipectl_result_seconds(r)
        self.files = [Output(self, i) for i in range(lib.pipectl_result_outputs(r))]
        self.stats = _stats(r)
        self.outputs = {}
        for name, arr in arrays.items():
            done = next((o.batches for o in self.files if o.in_memory and o.buffer == name), 0)
            self.outputs[name] = arr[:max(done, 0)]

    @property
    def checksums(self):
        """Each sink's checksum by stage name, as ``pipectl run`` prints it ("0x...")."""
        return {o.stage: o.checksum_hex for o in self.files}

    def __del__(self):
        r, self._r = getattr(self, "_r", None), None
        if r is not None and lib is not None:
            lib.pipectl_result_free(r)

    def __repr__(self):
        return (f"Result({self.batches} of {self.batches_planned} batches on {self.executor}, "
                f"{self.seconds * 1e3:.2f} ms, outputs {list(self.outputs)})")


def _fit(what, name, buf, a, batches=None):
    """A numpy array for buffer `buf`: its dtype, shape (batches, *shape) or the same rows
    (batches * B, *shape[1:]), C order (copied when it is not). Returns (array, batches)."""
    if a.dtype != buf.dtype:
        raise _errors.check_error(
            f"error: {what} '{name}': a {a.dtype} array, but buffer '{name}' is {buf.dtype_name} "
            f"(numpy {buf.dtype}); convert it: arr.astype(np.{buf.dtype})")
    shape = buf.shape
    if a.ndim == len(shape) + 1 and tuple(a.shape[1:]) == shape:
        n = a.shape[0]
    elif (a.ndim == len(shape) and tuple(a.shape[1:]) == shape[1:] and shape[0] > 0
          and a.shape[0] % shape[0] == 0):
        n = a.shape[0] // shape[0]
    else:
        dims = ", ".join(map(str, shape))
        raise _errors.check_error(
            f"error: {what} '{name}': an array of shape {tuple(a.shape)}, but a batch of buffer "
            f"'{name}' is [{dims}]: give shape (batches, {dims})")
    if n == 0:
        raise _errors.check_error(f"error: {what} '{name}': the array holds no batch")
    if not a.flags.c_contiguous:
        a = np.ascontiguousarray(a)  # numpy's strides are not batches one after the other
    return a, n


def _fit_whole(name, buf, a):
    """A numpy array for the whole of persistent buffer `buf` (its contents for the run)."""
    if a.dtype != buf.dtype or a.size * a.itemsize != buf.nbytes:
        dims = ", ".join(map(str, buf.shape))
        raise _errors.check_error(
            f"error: input '{name}': a {a.dtype} array of shape {tuple(a.shape)}, but persistent "
            f"buffer '{name}' is {buf.dtype_name} [{dims}] (numpy {buf.dtype}, shape ({dims})): "
            "give its whole contents")
    return np.ascontiguousarray(a)


class _Callback:
    """A Python function as a pipectl_batch_fn: fn(batch, array) with a view valid during the
    call; an exception fails the run and is raised again after it."""

    def __init__(self, fn, buf):
        self.fn, self.buf, self.error = fn, buf, None
        self.c = _lib.BATCH_FN(self._call)

    def _call(self, user, name, batch, data, n):
        try:
            raw = (ctypes.c_char * n).from_address(data)
            arr = np.frombuffer(raw, dtype=self.buf.dtype if self.buf else np.uint8)
            if self.buf is not None and n == self.buf.nbytes:
                arr = arr.reshape(self.buf.shape)
            self.fn(batch, arr)
            return 0
        except BaseException as e:  # noqa: BLE001 (KeyboardInterrupt too: raised after the run)
            self.error = self.error or e
            return 1


def _run_interruptible(h, call):
    """Runs call() (a C run on handle h). On the main thread it runs on a thread of its own, so
    Ctrl-C reaches Python while it runs: the run is then interrupted (pipectl_interrupt), drains
    as `pipectl run` does (the batches in flight finish, every sink finalizes), and the caller
    raises KeyboardInterrupt. Returns (status, interrupted by Ctrl-C)."""
    if threading.current_thread() is not threading.main_thread():
        return call(), False
    box, done = {}, threading.Event()

    def work():
        try:
            box["rc"] = call()
        except BaseException as e:  # noqa: BLE001 (raised again on the calling thread)
            box["exc"] = e
        finally:
            done.set()

    t = threading.Thread(target=work, name="pipectl-run", daemon=True)
    interrupted = False
    # An Event, not t.join(): a KeyboardInterrupt inside Thread.join can mark the thread stopped
    # while it still runs (CPython's bpo-45274 handling), and the run's memory must outlive it.
    while not done.is_set():
        try:
            if t.ident is None:
                t.start()
            done.wait()
        except KeyboardInterrupt:
            if t.ident is None:
                raise  # nothing started
            interrupted = True
            lib.pipectl_interrupt(h)  # async-signal-safe and thread-safe: a request made
            # before the run starts stops it at once
    t.join()
    if "exc" in box:
        raise box["exc"]
    return box["rc"], interrupted


class Pipeline:
    """A loaded, checked pipeline (:func:`load`, :func:`loads`). Runs of one pipeline may go on in
    several threads at once, each with its own memory."""

    def __init__(self, ptr):
        self._p = ptr
        self._lock = threading.Lock()
        self._active = set()
        self.name = s(lib.pipectl_pipeline_name(ptr))
        self.stages = lib.pipectl_pipeline_stages(ptr)
        self.buffers = {}
        for i in range(lib.pipectl_pipeline_buffers(ptr)):
            info = _lib.BufferInfo()
            info.size = ctypes.sizeof(info)
            if lib.pipectl_pipeline_buffer(ptr, i, ctypes.byref(info)) == 0:
                b = Buffer(info)
                self.buffers[b.name] = b

    def _ptr(self):
        if self._p is None:
            raise ValueError("pipectl: the pipeline is closed")
        return self._p

    def close(self):
        """Frees the pipeline (also when it is garbage-collected)."""
        with self._lock:
            if self._active:
                raise RuntimeError("pipectl: close() while a run of the pipeline is going on")
            p, self._p = self._p, None
        if p is not None:
            lib.pipectl_pipeline_free(p)

    def __del__(self):
        p, self._p = getattr(self, "_p", None), None
        if p is not None and lib is not None:
            lib.pipectl_pipeline_free(p)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def __repr__(self):
        return f"Pipeline({self.name!r}, {self.stages} stages, buffers {list(self.buffers)})"

    def check(self, batches=None):
        """Checks the files a run of ``batches`` batches (the pipeline's run.batches) would
        touch, as ``pipectl check`` does: inputs exist and hold enough whole batches of the
        right dtype and shape, sinks can write. Raises :class:`CheckError` with the position."""
        with _Handle() as h:
            rc = lib.pipectl_check(h, self._ptr(), batches or 0)
            if rc:
                raise _errors.from_handle(h, rc)

    def _compile(self, h, batches, depth):
        d = -1 if depth == "auto" else (depth or 0)
        plan = ctypes.c_void_p()
        rc = lib.pipectl_compile(h, self._ptr(), batches or 0, d, ctypes.byref(plan))
        if rc:
            raise _errors.from_handle(h, rc)
        return plan

    def plan(self, format="text", *, batches=None, depth=None):
        """The compiled plan as text: ``pipectl plan``'s listing, Graphviz DOT (``"dot"``) or
        JSON (``"json"``: the "plan" object of ``pipectl plan --json``)."""
        fmt = _choice("format", format, PLAN_FORMATS)
        with _Handle() as h:
            plan = self._compile(h, batches, depth)
            try:
                out = ctypes.c_void_p()
                rc = lib.pipectl_plan_dump(h, plan, fmt, ctypes.byref(out))
                if rc:
                    raise _errors.from_handle(h, rc)
                text = ctypes.string_at(out).decode()
                lib.pipectl_free(out)
                return text
            finally:
                lib.pipectl_plan_free(plan)

    def interrupt(self):
        """Interrupts every run of this pipeline in progress (from any thread): each drains
        and raises :class:`Interrupted` with the completed batches' result."""
        with self._lock:
            for h in list(self._active):
                lib.pipectl_interrupt(h)

    def run(self, inputs=None, outputs=None, *, executor="auto", batches=None, depth=None,
            workers=0, graphs="auto", timing="sample", progress=False, trace=None,
            fail_at=None):
        """Runs the pipeline and returns a :class:`Result`.

        ``inputs``: {host buffer: numpy array}: the batches of a buffer a source fills, shape
        (batches, *shape) in the buffer's dtype, instead of the source's file or generator; the
        run takes as many batches as they hold unless ``batches`` says fewer. ``outputs``: names
        of host buffers a sink writes (or {name: None | array to fill | fn(batch, array)}):
        their batches come back in ``result.outputs[name]`` instead of the sink's file (a
        function gets each batch in order, on a worker thread, the array valid during the call).
        ``executor``: "auto", "host" or "gpu"; ``batches`` and ``depth`` ("auto" or a number)
        replace run.batches and run.depth; ``workers``, ``graphs`` ("auto", "stage", "segment",
        "none"), ``timing`` ("sample", "all", "off") and ``trace`` (a file for the timeline) are
        ``pipectl run``'s options; ``progress=True`` shows a bar (tqdm if installed);
        ``fail_at=("stage", batch)`` is ``--fail-at``, for tests.

        Raises a :class:`pipectl.Error` subclass carrying the record (the ``result`` attribute
        holds what completed), or KeyboardInterrupt after Ctrl-C, once the run has drained."""
        ex = _choice("executor", executor, EXECUTORS)
        gr = _choice("graphs", graphs, GRAPHS)
        tm = _choice("timing", timing, TIMING)
        if isinstance(outputs, str):
            outputs = [outputs]
        outs = dict(outputs) if isinstance(outputs, dict) else {n: None for n in outputs or ()}
        ins, counts = {}, {}
        for name, arr in (inputs or {}).items():
            buf = self.buffers.get(name)
            a = np.asarray(arr)
            if buf is not None and not buf.device and buf.persistent:
                a = _fit_whole(name, buf, a)
            elif buf is not None and not buf.device:
                a, counts[name] = _fit("input", name, buf, a)
            ins[name] = a
        if batches is None and counts:
            n = set(counts.values())
            if len(n) > 1:
                raise _errors.check_error(
                    "error: the inputs hold different numbers of batches ("
                    + ", ".join(f"{k}: {v}" for k, v in counts.items())
                    + "); give batches= to run fewer")
            batches = n.pop()
        with _Handle() as h:
            plan = self._compile(h, batches, depth)
            try:
                return self._run(h, plan, ins, outs, ex, gr, tm, workers, progress, trace,
                                 fail_at)
            finally:
                lib.pipectl_plan_free(plan)

    def _run(self, h, plan, ins, outs, ex, gr, tm, workers, progress, trace, fail_at):
        nb = lib.pipectl_plan_batches(plan)
        arrays, callbacks = {}, []
        for name, a in ins.items():
            rc = lib.pipectl_bind_input(h, name.encode(), a.ctypes.data, a.nbytes)
            if rc:
                raise _errors.from_handle(h, rc)
        for name, want in outs.items():
            buf = self.buffers.get(name)
            if callable(want):
                cb = _Callback(want, buf)
                callbacks.append(cb)
                rc = lib.pipectl_bind_output_fn(h, name.encode(), cb.c, None)
            else:
                if want is None and buf is not None and not buf.device:
                    want = np.zeros((nb, *buf.shape), dtype=buf.dtype)
                elif want is None:
                    want = np.zeros(1, np.uint8)  # the library names what is wrong
                elif buf is not None:
                    if not isinstance(want, np.ndarray) or not want.flags.c_contiguous \
                            or not want.flags.writeable:
                        raise _errors.check_error(
                            f"error: output '{name}': give a writable C-order numpy array")
                    _fit("output", name, buf, want)
                arrays[name] = want
                rc = lib.pipectl_bind_output(h, name.encode(), want.ctypes.data, want.nbytes)
            if rc:
                raise _errors.from_handle(h, rc)
        o = _lib.RunOptions()
        o.size = ctypes.sizeof(o)
        o.executor, o.workers, o.graphs, o.timing = ex, workers or 0, gr, tm
        bar = None
        if progress:
            from ._progress import Progress  # noqa: PLC0415
            bar = Progress(self.name, nb)

            def on_batch(user, done, total):
                try:
                    bar.update(done, total)
                except Exception:  # noqa: BLE001 (a display problem never fails the run)
                    pass

            o.on_batch = _lib.ON_BATCH(on_batch)
        o.trace = str(trace).encode() if trace is not None else None
        if fail_at is not None:
            o.fail_stage, o.fail_batch = fail_at[0].encode(), int(fail_at[1])
        r = ctypes.c_void_p()
        with self._lock:
            self._active.add(h.value)
        try:
            rc, ctrl_c = _run_interruptible(
                h, lambda: lib.pipectl_run_with(h, plan, ctypes.byref(o), ctypes.byref(r)))
        finally:
            with self._lock:
                self._active.discard(h.value)
            if bar is not None:
                bar.close()
        err = _errors.from_handle(h, rc) if rc else None
        result = Result(r.value, nb, arrays) if r.value else None
        if err is not None:
            err.result = result
        failed_cb = next((c.error for c in callbacks if c.error is not None), None)
        if ctrl_c or isinstance(failed_cb, KeyboardInterrupt):
            e = KeyboardInterrupt(
                f"pipectl: interrupted; {result.batches if result else 0} of {nb} batches "
                "completed, every output kept")
            e.result = result
            raise e from failed_cb
        if failed_cb is not None:
            raise failed_cb from err
        if err is not None:
            raise err
        return result
