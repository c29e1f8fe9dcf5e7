"""pipectl from Python: load a pipeline, run it with numpy arrays in and out, read its figures.

    import numpy as np, pipectl
    p = pipectl.load("pipelines/quickstart.yaml", set={"run.batches": 4})
    r = p.run(inputs={"x_host": np.ones((4, 262144), np.float32)}, outputs=["y_host"])
    r.outputs["y_host"]        # (4, 262144) float32, no file written
    r.stats["per_batch_s"]     # the figures `pipectl run` prints

Pure Python over libpipectl.so (ctypes; pipectl.h is the reference). docs/python.md has the
whole story: finding the library, in-memory buffers (which memory is used in place, which is
copied), threads, Ctrl-C, errors.
"""

from . import _lib
from ._bundle import Bundle, Replay, capture, replay
from ._errors import (CheckError, CudaError, Error, FileError, Interrupted, LuaError,
                      NoDeviceError, OutOfMemoryError, RunError)
from ._pipeline import Buffer, Output, Pipeline, Result, load, loads

__version__ = _lib.version  # the library's: the package is versioned with it
library = _lib.path  # the libpipectl.so in use

__all__ = ["load", "loads", "Pipeline", "Result", "Output", "Buffer", "capture", "replay",
           "Bundle", "Replay", "Error", "CheckError", "RunError", "OutOfMemoryError",
           "FileError", "CudaError", "NoDeviceError", "LuaError", "Interrupted", "library"]
