"""The exceptions: one class per status of pipectl.h, each carrying the error record."""

from . import _lib


class Error(Exception):
    """A pipectl error: the record of the call that failed (pipectl.h, "Errors").

    Attributes: ``status`` ("EINPUT", "ELUA", ...), ``code`` (its number), ``message`` (the whole
    text, as ``pipectl`` prints it), ``file``, ``line``, ``column`` (where in the pipeline file;
    None and 0 without a position), ``stage`` and ``batch`` (where in the run; None and -1), and
    ``result`` (a :class:`pipectl.Result` of the batches that completed, for a run that started;
    else None). ``exit_code`` is what the ``pipectl`` command would exit with.
    """

    status = "ERUNTIME"

    def __init__(self, message, *, code=2, file=None, line=0, column=0, stage=None, batch=-1,
                 result=None):
        super().__init__(message)
        self.message = message
        self.code = code
        self.file = file
        self.line = line
        self.column = column
        self.stage = stage
        self.batch = batch
        self.result = result

    @property
    def col(self):
        return self.column

    @property
    def exit_code(self):
        return _lib.lib.pipectl_exit_code(self.code)

    def __str__(self):
        return self.message


class CheckError(Error, ValueError):
    """Bad input (EINPUT, exit code 2): the pipeline, a --set, an argument or a binding."""
    status = "EINPUT"


class RunError(Error, RuntimeError):
    """A runtime failure (ERUNTIME, exit code 1); the base of the classes below."""
    status = "ERUNTIME"


class OutOfMemoryError(RunError, MemoryError):
    status = "ENOMEM"


class FileError(RunError, OSError):
    """Reading or writing a file failed (EIO)."""
    status = "EIO"


class CudaError(RunError):
    status = "ECUDA"


class NoDeviceError(RunError):
    """The GPU executor was asked for and there is no usable GPU (ENODEV)."""
    status = "ENODEV"


class LuaError(RunError):
    """Lua code failed: an error, its instruction budget or its memory cap (ELUA)."""
    status = "ELUA"


class Interrupted(RunError):
    """The run was interrupted (EINTR) by Pipeline.interrupt(); Ctrl-C raises KeyboardInterrupt."""
    status = "EINTR"


_BY_STATUS = {c.status: c for c in (CheckError, RunError, OutOfMemoryError, FileError, CudaError,
                                    NoDeviceError, LuaError, Interrupted)}


def from_handle(h, code, result=None):
    """The exception for the handle's record of a call that returned `code`."""
    lib, s = _lib.lib, _lib.s
    status = s(lib.pipectl_errname(code))
    cls = _BY_STATUS.get(status, RunError)
    return cls(s(lib.pipectl_errmsg(h)), code=code, file=s(lib.pipectl_errfile(h)),
               line=lib.pipectl_errline(h), column=lib.pipectl_errcol(h),
               stage=s(lib.pipectl_errstage(h)), batch=lib.pipectl_errbatch(h), result=result)


def check_error(message, **kw):
    """A CheckError the package itself raises (a numpy array that does not fit a buffer)."""
    return CheckError(message, code=1, **kw)
