"""Finding libpipectl.so and declaring the C API (pipectl.h) to ctypes.

The library is looked for, in this order:

1. ``PIPECTL_LIBRARY``: the library file, or a folder holding ``libpipectl.so``;
2. the install prefix this package sits in (``cmake --install`` puts it in
   ``PREFIX/lib/python3/site-packages``, the library in ``PREFIX/lib``), or a build folder beside
   a source checkout (``python/pipectl`` next to ``build/libpipectl.so``);
3. ``sys.prefix`` (``pip install ./python`` into the prefix pipectl was installed in);
4. ``pkg-config --variable=libdir pipectl`` (``PKG_CONFIG_PATH`` as for C programs);
5. the dynamic loader's own search (``ldconfig``, ``LD_LIBRARY_PATH``).
"""

import ctypes
import os
import shutil
import subprocess
import sys
import sysconfig
from pathlib import Path

# What the package needs: pipectl.h's PIPECTL_VERSION_NUMBER of the 0.2 additions.
NEEDED = (0, 2, 0)

_NAMES = ("libpipectl.so", "libpipectl.so.0")


def _prefix_dirs(root):
    multiarch = sysconfig.get_config_var("MULTIARCH") or ""
    subs = ["lib", "lib64"] + ([f"lib/{multiarch}"] if multiarch else [])
    return [root / s for s in subs]


def candidates():
    """The places the library is looked for, in order (paths or bare names for the loader)."""
    out = []
    env = os.environ.get("PIPECTL_LIBRARY")
    if env:
        p = Path(env)
        out += [p / n for n in _NAMES] if p.is_dir() else [p]
        return out  # asked for: nothing else is tried
    here = Path(__file__).resolve().parent
    for anc in list(here.parents)[:5]:
        for d in [anc, anc / "build"] + _prefix_dirs(anc):
            out += [d / n for n in _NAMES]
    for d in _prefix_dirs(Path(sys.prefix)):
        out += [d / n for n in _NAMES]
    if shutil.which("pkg-config"):
        try:
            libdir = subprocess.run(
                ["pkg-config", "--variable=libdir", "pipectl"],
                capture_output=True, text=True, timeout=10).stdout.strip()
        except (OSError, subprocess.SubprocessError):
            libdir = ""
        if libdir:
            out += [Path(libdir) / n for n in _NAMES]
    out += list(_NAMES)
    return out


def _load():
    tried = []
    for c in candidates():
        if isinstance(c, Path) and not c.exists():
            tried.append(str(c))
            continue
        try:
            return ctypes.CDLL(str(c)), str(c)
        except OSError as e:
            tried.append(f"{c} ({e})")
    raise ImportError(
        "pipectl: cannot find libpipectl.so; set PIPECTL_LIBRARY to its path, install pipectl "
        "(cmake --install build --prefix P) where the loader or pkg-config finds it, or build it "
        "(cmake --build build). Tried: " + "; ".join(tried[:8]) +
        (f" and {len(tried) - 8} more" if len(tried) > 8 else ""))


lib, path = _load()

c_int, c_ll, c_ull, c_size, c_double = (ctypes.c_int, ctypes.c_longlong, ctypes.c_ulonglong,
                                        ctypes.c_size_t, ctypes.c_double)
c_char_p, c_void_p, POINTER = ctypes.c_char_p, ctypes.c_void_p, ctypes.POINTER


class LoadOptions(ctypes.Structure):
    _fields_ = [("size", c_size), ("set", POINTER(c_char_p)), ("n_set", c_int),
                ("out_dir", c_char_p), ("confine", c_int), ("name", c_char_p),
                ("dir", c_char_p), ("lua", c_int)]


ON_BATCH = ctypes.CFUNCTYPE(None, c_void_p, c_ll, c_ll)
ON_NOTE = ctypes.CFUNCTYPE(None, c_void_p, c_char_p)
BATCH_FN = ctypes.CFUNCTYPE(c_int, c_void_p, c_char_p, c_ll, c_void_p, c_size)


class RunOptions(ctypes.Structure):
    _fields_ = [("size", c_size), ("executor", c_int), ("workers", c_int), ("graphs", c_int),
                ("timing", c_int), ("on_batch", ON_BATCH), ("user", c_void_p),
                ("on_note", ON_NOTE), ("trace", c_char_p), ("fail_stage", c_char_p),
                ("fail_batch", c_ll)]


class BufferInfo(ctypes.Structure):
    _fields_ = [("size", c_size), ("name", c_char_p), ("device", c_int), ("persistent", c_int),
                ("dtype", c_int), ("dtype_name", c_char_p), ("rank", c_int),
                ("shape", c_ll * 8), ("bytes", c_ull), ("source", c_char_p), ("sink", c_char_p)]


class Stats(ctypes.Structure):
    _fields_ = [("size", c_size), ("batches", c_ll), ("batches_planned", c_ll), ("depth", c_int),
                ("workers", c_int), ("executor", c_char_p), ("graph_mode", c_char_p),
                ("device", c_char_p), ("wall_s", c_double), ("per_batch_s", c_double),
                ("steady_per_batch_s", c_double), ("batches_per_s", c_double),
                ("bytes_in_per_batch", c_ull), ("bytes_out_per_batch", c_ull),
                ("bound_s", c_double), ("bound_engine", c_char_p), ("bound_stage", c_char_p),
                ("achieved", c_double), ("stages", c_int), ("engines", c_int)]


class StageStats(ctypes.Structure):
    _fields_ = [("size", c_size), ("name", c_char_p), ("kind", c_char_p), ("engine", c_char_p),
                ("stream", c_char_p), ("count", c_ll), ("mean_s", c_double),
                ("p50_s", c_double), ("p99_s", c_double), ("min_s", c_double),
                ("max_s", c_double), ("total_s", c_double), ("busy", c_double)]


class EngineStats(ctypes.Structure):
    _fields_ = [("size", c_size), ("name", c_char_p), ("engine", c_char_p), ("stages", c_int),
                ("timed_batches", c_ll), ("busy_s", c_double), ("busy_per_batch_s", c_double),
                ("occupancy", c_double)]


def _fn(name, res, *args):
    f = getattr(lib, name)
    f.restype = res
    f.argtypes = list(args)
    return f


def _declare():
    pp = POINTER(c_void_p)
    _fn("pipectl_version", c_char_p)
    _fn("pipectl_errname", c_char_p, c_int)
    _fn("pipectl_exit_code", c_int, c_int)
    _fn("pipectl_open", c_int, pp)
    _fn("pipectl_close", None, c_void_p)
    _fn("pipectl_errcode", c_int, c_void_p)
    _fn("pipectl_errmsg", c_char_p, c_void_p)
    _fn("pipectl_errfile", c_char_p, c_void_p)
    _fn("pipectl_errline", c_int, c_void_p)
    _fn("pipectl_errcol", c_int, c_void_p)
    _fn("pipectl_errstage", c_char_p, c_void_p)
    _fn("pipectl_errbatch", c_ll, c_void_p)
    _fn("pipectl_load_with", c_int, c_void_p, c_char_p, POINTER(LoadOptions), pp)
    _fn("pipectl_loads", c_int, c_void_p, c_char_p, c_size, POINTER(LoadOptions), pp)
    _fn("pipectl_pipeline_free", None, c_void_p)
    _fn("pipectl_pipeline_name", c_char_p, c_void_p)
    _fn("pipectl_pipeline_stages", c_int, c_void_p)
    _fn("pipectl_check", c_int, c_void_p, c_void_p, c_ll)
    _fn("pipectl_pipeline_buffers", c_int, c_void_p)
    _fn("pipectl_pipeline_buffer", c_int, c_void_p, c_int, POINTER(BufferInfo))
    _fn("pipectl_compile", c_int, c_void_p, c_void_p, c_ll, c_int, pp)
    _fn("pipectl_plan_free", None, c_void_p)
    _fn("pipectl_plan_batches", c_ll, c_void_p)
    _fn("pipectl_plan_depth", c_int, c_void_p)
    _fn("pipectl_plan_dump", c_int, c_void_p, c_void_p, c_int, POINTER(c_void_p))
    _fn("pipectl_free", None, c_void_p)
    _fn("pipectl_bind_input", c_int, c_void_p, c_char_p, c_void_p, c_size)
    _fn("pipectl_bind_output", c_int, c_void_p, c_char_p, c_void_p, c_size)
    _fn("pipectl_bind_output_fn", c_int, c_void_p, c_char_p, BATCH_FN, c_void_p)
    _fn("pipectl_unbind", None, c_void_p)
    _fn("pipectl_run_with", c_int, c_void_p, c_void_p, POINTER(RunOptions), pp)
    _fn("pipectl_interrupt", None, c_void_p)
    _fn("pipectl_result_free", None, c_void_p)
    _fn("pipectl_result_executor", c_char_p, c_void_p)
    _fn("pipectl_result_note", c_char_p, c_void_p)
    _fn("pipectl_result_batches", c_ll, c_void_p)
    _fn("pipectl_result_seconds", c_double, c_void_p)
    _fn("pipectl_result_outputs", c_int, c_void_p)
    _fn("pipectl_output_stage", c_char_p, c_void_p, c_int)
    _fn("pipectl_output_path", c_char_p, c_void_p, c_int)
    _fn("pipectl_output_batches", c_ll, c_void_p, c_int)
    _fn("pipectl_output_checksum", c_ull, c_void_p, c_int)
    _fn("pipectl_output_batch_checksum", c_ull, c_void_p, c_int, c_ll)
    _fn("pipectl_output_complete", c_int, c_void_p, c_int)
    _fn("pipectl_output_buffer", c_char_p, c_void_p, c_int)
    _fn("pipectl_output_in_memory", c_int, c_void_p, c_int)
    _fn("pipectl_result_stats", c_int, c_void_p, POINTER(Stats))
    _fn("pipectl_result_stage_stats", c_int, c_void_p, c_int, POINTER(StageStats))
    _fn("pipectl_result_engine_stats", c_int, c_void_p, c_int, POINTER(EngineStats))


def _check_version():
    v = lib.pipectl_version
    v.restype = c_char_p
    text = v().decode()
    have = tuple(int(x) for x in text.split(".")[:3])
    if have < NEEDED:
        raise ImportError(
            f"pipectl: {path} is version {text}; this package needs "
            f"{'.'.join(map(str, NEEDED))} or newer (rebuild pipectl, or point PIPECTL_LIBRARY "
            "at a newer libpipectl.so)")
    return text


version = _check_version()
_declare()


def s(b):
    """A C string from the library as str (None stays None)."""
    return None if b is None else b.decode("utf-8", "replace")
