"""arfusion from Python: the fused tensor-parallel allreduce + residual add + RMSNorm.

A ctypes binding of the C ABI (include/arfusion/arfusion_c.h): no compiled extension, so nothing to
build beyond the library itself, and no dependency at import. Tensors are torch tensors or any
object with ``__cuda_array_interface__`` (then pass ``dtype``); with torch, calls run on
``torch.cuda.current_stream()`` and ``arfusion.torch_ops`` registers them as torch custom ops
(torch.compile, CUDA graphs).

    import arfusion
    uid = arfusion.get_unique_id() if rank == 0 else None      # broadcast it with your process group
    comm = arfusion.Communicator(uid, world_size, rank)         # this rank's CUDA device current
    comm.allreduce_add_rmsnorm(x, residual, residual, gamma, normed, eps=1e-6)

Errors raise ``arfusion.Error`` carrying the status and ``lastError()``'s message.
"""
import ctypes
import os

__all__ = [
    "Error", "Communicator", "NormArgs", "get_unique_id", "quant_buffer_bytes", "version", "library",
    "add_rmsnorm", "allreduce", "allreduce_add", "allreduce_add_rmsnorm",
    "FLOAT16", "BFLOAT16", "FLOAT32", "STRATEGIES", "SYNC_MODES", "QUANT_FORMATS", "SCALE_LAYOUTS",
]

FLOAT16, BFLOAT16, FLOAT32 = 0, 1, 2
STRATEGIES = {"auto": 0, "oneshot": 1, "twoshot": 2, "nccl": 3}
SYNC_MODES = {"auto": 0, "griddep": 1, "flag": 2}
OPS = {"allreduce": 0, "allreduce_add": 1, "allreduce_add_rmsnorm": 2}
QUANT_FORMATS = {"none": 0, "fp8": 1, "fp8-token": 2, "fp8-group": 3, "nvfp4": 4}
SCALE_LAYOUTS = {"linear": 0, "column-major": 1, "ue8m0-packed": 2, "swizzled-128x4": 3}
_ELEMENT_SIZE = {FLOAT16: 2, BFLOAT16: 2, FLOAT32: 4}
_UNIQUE_ID_BYTES = 128
_SUCCESS, _INVALID_ARGUMENT = 0, 1


class Error(RuntimeError):
    """A failed arfusion call: ``status`` (arfusion::Status value), ``name`` and the message."""

    def __init__(self, status, name, message):
        super().__init__(f"{name}: {message}")
        self.status, self.name, self.message = status, name, message


class _Config(ctypes.Structure):
    _fields_ = [("version", ctypes.c_uint), ("strategy", ctypes.c_int), ("sync_mode", ctypes.c_int),
                ("workspace_bytes", ctypes.c_size_t), ("timeout_seconds", ctypes.c_double),
                ("tuning_file", ctypes.c_char_p), ("self_check", ctypes.c_int), ("max_blocks", ctypes.c_int),
                ("read_env", ctypes.c_int)]


class _Plan(ctypes.Structure):
    _fields_ = [("strategy", ctypes.c_int), ("sync_mode", ctypes.c_int), ("blocks", ctypes.c_int),
                ("rows_per_step", ctypes.c_int), ("lamport", ctypes.c_int), ("row_blocks", ctypes.c_int),
                ("reason", ctypes.c_char * 256)]


class _NormArgs(ctypes.Structure):
    _fields_ = [("version", ctypes.c_uint), ("input", ctypes.c_void_p), ("residual_in", ctypes.c_void_p),
                ("residual_out", ctypes.c_void_p), ("gamma", ctypes.c_void_p), ("norm_out", ctypes.c_void_p),
                ("tokens", ctypes.c_int64), ("hidden", ctypes.c_int64), ("dtype", ctypes.c_int), ("eps", ctypes.c_float),
                ("gemma", ctypes.c_int), ("quant_format", ctypes.c_int), ("quant_layout", ctypes.c_int),
                ("quant_values", ctypes.c_void_p), ("quant_scales", ctypes.c_void_p), ("quant_scale", ctypes.c_void_p),
                ("quant_pow2_scales", ctypes.c_int)]


def _find_library():
    """ARFUSION_LIBRARY, else the library two folders up (lib/python/arfusion -> lib/, and the build
    tree's python/arfusion -> build/), else the loader's search path."""
    explicit = os.environ.get("ARFUSION_LIBRARY")
    if explicit:
        return explicit
    here = os.path.dirname(os.path.abspath(__file__))
    up = os.path.normpath(os.path.join(here, "..", ".."))
    for name in ("libarfusion.so", "libarfusion.so.0.5"):
        path = os.path.join(up, name)
        if os.path.exists(path):
            return path
    return "libarfusion.so.0.5"


def _load():
    lib = ctypes.CDLL(_find_library())
    S, P, I, I64 = ctypes.c_int, ctypes.c_void_p, ctypes.c_int, ctypes.c_int64
    sigs = {
        "arfusion_status_string": (ctypes.c_char_p, [S]),
        "arfusion_last_error": (ctypes.c_char_p, []),
        "arfusion_version": (None, [ctypes.POINTER(I)] * 3),
        "arfusion_config_init": (None, [ctypes.POINTER(_Config)]),
        "arfusion_get_unique_id": (S, [P]),
        "arfusion_comm_create": (S, [P, I, I, ctypes.POINTER(_Config), ctypes.POINTER(P)]),
        "arfusion_comm_create_nccl": (S, [P, ctypes.POINTER(_Config), ctypes.POINTER(P)]),
        "arfusion_comm_destroy": (S, [P]),
        "arfusion_comm_abort": (S, [P]),
        "arfusion_comm_get_async_error": (S, [P, ctypes.POINTER(ctypes.c_char_p)]),
        "arfusion_comm_info": (S, [P, ctypes.POINTER(I), ctypes.POINTER(I), ctypes.POINTER(I)]),
        "arfusion_comm_set_strategy": (S, [P, I, I]),
        "arfusion_plan": (S, [P, I64, I64, I, I, I, ctypes.POINTER(_Plan)]),
        "arfusion_allreduce": (S, [P, P, P, I64, I64, I, P]),
        "arfusion_allreduce_add": (S, [P, P, P, P, I64, I64, I, P]),
        "arfusion_allreduce_add_rmsnorm": (S, [P, P, P, P, P, P, I64, I64, I, ctypes.c_float, P]),
        "arfusion_norm_args_init": (None, [ctypes.POINTER(_NormArgs)]),
        "arfusion_allreduce_add_rmsnorm_ex": (S, [P, ctypes.POINTER(_NormArgs), P]),
        "arfusion_add_rmsnorm": (S, [ctypes.POINTER(_NormArgs), P]),
        "arfusion_quant_buffer_bytes": (S, [I, I, I64, I64, ctypes.POINTER(ctypes.c_size_t), ctypes.POINTER(ctypes.c_size_t)]),
    }
    if hasattr(lib, "arfusion_testing_create_group"):  # libarfusion_testkit.so only (arfusion.testing)
        sigs["arfusion_testing_create_group"] = (S, [I, ctypes.POINTER(I), ctypes.POINTER(_Config), I, ctypes.POINTER(P)])
    for name, (res, args) in sigs.items():
        f = getattr(lib, name)
        f.restype, f.argtypes = res, args
    return lib


library = _load()


def _check(status):
    if status != _SUCCESS:
        name = library.arfusion_status_string(status).decode()
        raise Error(status, name, library.arfusion_last_error().decode())


def version():
    """(major, minor, patch) of the loaded library."""
    v = [ctypes.c_int() for _ in range(3)]
    library.arfusion_version(*[ctypes.byref(x) for x in v])
    return tuple(x.value for x in v)


def get_unique_id():
    """128 bytes naming a new NCCL communicator; rank 0 makes it, the process group broadcasts it."""
    buf = ctypes.create_string_buffer(_UNIQUE_ID_BYTES)
    _check(library.arfusion_get_unique_id(buf))
    return buf.raw


def quant_buffer_bytes(format, layout, tokens, hidden):
    """(values_bytes, scale_bytes) of a quantized output: format in QUANT_FORMATS, layout in SCALE_LAYOUTS."""
    values, scales = ctypes.c_size_t(), ctypes.c_size_t()
    _check(library.arfusion_quant_buffer_bytes(_lookup(QUANT_FORMATS, format, "format"), _lookup(SCALE_LAYOUTS, layout, "layout"),
                                               int(tokens), int(hidden), ctypes.byref(values), ctypes.byref(scales)))
    return values.value, scales.value


def _lookup(table, key, what):
    if isinstance(key, int):
        return key
    if key not in table:
        raise ValueError(f"{what} {key!r} is not one of {sorted(table)}")
    return table[key]


# ---- tensors: torch tensors, or __cuda_array_interface__ objects with an explicit dtype

def _torch_dtype_code(t):
    import torch  # only reached for a torch tensor
    codes = {torch.float16: FLOAT16, torch.bfloat16: BFLOAT16, torch.float32: FLOAT32}
    if t.dtype not in codes:
        raise TypeError(f"dtype {t.dtype} is not float16, bfloat16 or float32")
    return codes[t.dtype]


def _is_torch(t):
    return hasattr(t, "data_ptr") and hasattr(t, "is_cuda")


def _cuda_pointer(t, name):
    """The device pointer of a torch tensor or __cuda_array_interface__ object, checked to be on
    the GPU and contiguous; None stays None."""
    if t is None:
        return None
    if _is_torch(t):
        if not t.is_cuda:
            raise ValueError(f"{name} is not a CUDA tensor")
        if not t.is_contiguous():
            raise ValueError(f"{name} is not contiguous")
        return t.data_ptr()
    cai = getattr(t, "__cuda_array_interface__", None)
    if cai is None:
        raise TypeError(f"{name} is neither a torch tensor nor has __cuda_array_interface__")
    if cai.get("strides") is not None:
        raise ValueError(f"{name} is not contiguous (strides given)")
    return cai["data"][0]


def _describe(t, name, dtype=None):
    """(pointer, shape, dtype code) of a CUDA tensor; None stays None. Checks contiguity and device."""
    ptr = _cuda_pointer(t, name)
    if ptr is None:
        return None
    if _is_torch(t):
        return ptr, tuple(t.shape), _torch_dtype_code(t)
    cai = t.__cuda_array_interface__
    typestr = cai["typestr"]
    code = dtype if dtype is not None else {"<f2": FLOAT16, "<f4": FLOAT32}.get(typestr)
    if code is None:
        raise TypeError(f"{name}: typestr {typestr!r} needs an explicit dtype (bf16 has no typestr)")
    return ptr, tuple(cai["shape"]), code


def _ptr(desc):
    return desc[0] if desc else None


def _rows(desc, name):
    shape = desc[1]
    if len(shape) < 1:
        raise ValueError(f"{name} must have at least one dimension")
    hidden = shape[-1]
    tokens = 1
    for s in shape[:-1]:
        tokens *= s
    return tokens, hidden


def _same(desc, ref, name, ref_name):
    if desc is not None and (desc[1] != ref[1] or desc[2] != ref[2]):
        raise ValueError(f"{name} has shape {desc[1]} and dtype {desc[2]}, {ref_name} {ref[1]} and {ref[2]}: they must match")


def _stream(stream):
    if stream is not None:
        return ctypes.c_void_p(int(stream))
    try:
        import torch
        return ctypes.c_void_p(torch.cuda.current_stream().cuda_stream)
    except ImportError:
        return ctypes.c_void_p(0)


class NormArgs:
    """The fused op's options: a quantized output (format, layout, values, scales, scale), Gemma weights."""

    def __init__(self, quant="none", layout="linear", values=None, scales=None, scale=None, pow2_scales=False, gemma=False):
        self.quant, self.layout, self.values, self.scales, self.scale = quant, layout, values, scales, scale
        self.pow2_scales, self.gemma = pow2_scales, gemma


def _nbytes(t):
    if hasattr(t, "element_size"):  # torch
        return t.numel() * t.element_size()
    cai = t.__cuda_array_interface__
    n = int(cai["typestr"][2:])
    for d in cai["shape"]:
        n *= d
    return n


def _buffer(t, name, need):
    """The pointer of a quantized output or scale buffer: CUDA, contiguous, at least `need` bytes."""
    ptr = _cuda_pointer(t, name)
    if ptr is not None and (have := _nbytes(t)) < need:
        raise ValueError(f"{name} holds {have} bytes, the output needs {need} (quant_buffer_bytes)")
    return ptr


def _norm_args(input, residual_in, residual_out, gamma, norm_out, eps, options, dtype):
    x = _describe(input, "input", dtype)
    tokens, hidden = _rows(x, "input")
    d = {n: _describe(t, n, dtype) for t, n in ((residual_in, "residual_in"), (residual_out, "residual_out"), (norm_out, "norm_out"))}
    for n, desc in d.items():
        _same(desc, x, n, "input")
    g = _describe(gamma, "gamma", dtype)
    if g is None or g[1] != (hidden,) or g[2] != x[2]:
        raise ValueError(f"gamma must be a [{hidden}] tensor of the input's dtype")
    a = _NormArgs()
    library.arfusion_norm_args_init(ctypes.byref(a))
    a.input, a.residual_in, a.residual_out = x[0], _ptr(d["residual_in"]), _ptr(d["residual_out"])
    a.gamma, a.norm_out, a.tokens, a.hidden, a.dtype, a.eps = g[0], _ptr(d["norm_out"]), tokens, hidden, x[2], float(eps)
    if options is not None:
        a.gemma = int(bool(options.gemma))
        a.quant_format = _lookup(QUANT_FORMATS, options.quant, "quant")
        a.quant_layout = _lookup(SCALE_LAYOUTS, options.layout, "layout")
        if a.quant_format != QUANT_FORMATS["none"]:
            # Sizes the library cannot see: checked here (the library checks the rest and says why).
            values_bytes, scale_bytes = quant_buffer_bytes(a.quant_format, a.quant_layout, tokens, hidden)
            a.quant_values = _buffer(options.values, "quant values", values_bytes)
            a.quant_scales = _buffer(options.scales, "quant scales", scale_bytes)
            a.quant_scale = _buffer(options.scale, "quant scale", 4)
        a.quant_pow2_scales = int(bool(options.pow2_scales))
    return a


def add_rmsnorm(input, residual_in, residual_out, gamma, norm_out, eps=1e-6, options=None, dtype=None, stream=None):
    """One GPU, no communicator: residual_out = residual_in + input; norm_out = RMSNorm(...) * gamma."""
    a = _norm_args(input, residual_in, residual_out, gamma, norm_out, eps, options, dtype)
    _check(library.arfusion_add_rmsnorm(ctypes.byref(a), _stream(stream)))


def _config(strategy="auto", sync_mode="auto", workspace_bytes=None, timeout_seconds=None, self_check=True, max_blocks=0,
            read_env=True):
    cfg = _Config()
    library.arfusion_config_init(ctypes.byref(cfg))
    cfg.strategy, cfg.sync_mode = _lookup(STRATEGIES, strategy, "strategy"), _lookup(SYNC_MODES, sync_mode, "sync_mode")
    if workspace_bytes is not None:
        cfg.workspace_bytes = int(workspace_bytes)
    if timeout_seconds is not None:
        cfg.timeout_seconds = float(timeout_seconds)
    cfg.self_check, cfg.max_blocks, cfg.read_env = int(bool(self_check)), int(max_blocks), int(bool(read_env))
    return cfg


class Communicator:
    """One rank's arfusion communicator. Collective: every rank constructs it with the same unique
    id and world size, its CUDA device current (torch.cuda.set_device). Close it (or use ``with``)
    once no rank has a call in flight."""

    def __init__(self, unique_id, world_size, rank, strategy="auto", sync_mode="auto", workspace_bytes=None,
                 timeout_seconds=None, self_check=True, max_blocks=0, read_env=True, nccl_comm=None):
        cfg = _config(strategy, sync_mode, workspace_bytes, timeout_seconds, self_check, max_blocks, read_env)
        self._handle = ctypes.c_void_p()
        if nccl_comm is not None:
            _check(library.arfusion_comm_create_nccl(ctypes.c_void_p(int(nccl_comm)), ctypes.byref(cfg), ctypes.byref(self._handle)))
            return
        if unique_id is None or len(unique_id) != _UNIQUE_ID_BYTES:
            raise ValueError(f"unique_id must be the {_UNIQUE_ID_BYTES} bytes of get_unique_id()")
        _check(library.arfusion_comm_create(ctypes.c_char_p(bytes(unique_id)), int(world_size), int(rank), ctypes.byref(cfg),
                                            ctypes.byref(self._handle)))

    @classmethod
    def _adopt(cls, handle):
        """A Communicator owning a C handle made elsewhere (arfusion.testing)."""
        self = cls.__new__(cls)
        self._handle = ctypes.c_void_p(handle)
        return self

    @property
    def handle(self):
        """The C handle as an int (what arfusion.torch_ops takes)."""
        return self._handle.value or 0

    def close(self):
        if self._handle.value:
            _check(library.arfusion_comm_destroy(self._handle))
            self._handle = ctypes.c_void_p()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def info(self):
        """(rank, world_size, device)."""
        v = [ctypes.c_int() for _ in range(3)]
        _check(library.arfusion_comm_info(self._handle, *[ctypes.byref(x) for x in v]))
        return tuple(x.value for x in v)

    def set_strategy(self, strategy="auto", sync_mode="auto"):
        _check(library.arfusion_comm_set_strategy(self._handle, _lookup(STRATEGIES, strategy, "strategy"),
                                                  _lookup(SYNC_MODES, sync_mode, "sync_mode")))

    def abort(self):
        _check(library.arfusion_comm_abort(self._handle))

    def async_error(self):
        """None, or the Error a device-side failure (timeout, abort, mismatch) left."""
        detail = ctypes.c_char_p()
        status = library.arfusion_comm_get_async_error(self._handle, ctypes.byref(detail))
        if status == _SUCCESS:
            return None
        return Error(status, library.arfusion_status_string(status).decode(), (detail.value or b"").decode())

    def plan(self, tokens, hidden, dtype=BFLOAT16, op="allreduce_add_rmsnorm", extended=False):
        """dict(strategy, sync_mode, blocks, rows_per_step, lamport, row_blocks, reason) for a shape."""
        p = _Plan()
        _check(library.arfusion_plan(self._handle, int(tokens), int(hidden), int(dtype), _lookup(OPS, op, "op"), int(bool(extended)),
                                     ctypes.byref(p)))
        names = {v: k for k, v in STRATEGIES.items()}
        syncs = {v: k for k, v in SYNC_MODES.items()}
        return {"strategy": names[p.strategy], "sync_mode": syncs[p.sync_mode], "blocks": p.blocks,
                "rows_per_step": p.rows_per_step, "lamport": bool(p.lamport), "row_blocks": p.row_blocks,
                "reason": p.reason.decode()}

    def allreduce(self, input, out, dtype=None, stream=None):
        """out = sum over ranks of input."""
        allreduce(self.handle, input, out, dtype, stream)

    def allreduce_add(self, input, residual_in, residual_out, dtype=None, stream=None):
        """residual_out = residual_in + sum(input)."""
        allreduce_add(self.handle, input, residual_in, residual_out, dtype, stream)

    def allreduce_add_rmsnorm(self, input, residual_in, residual_out, gamma, norm_out, eps=1e-6, options=None, dtype=None,
                              stream=None):
        """residual_out = residual_in + sum(input); norm_out = RMSNorm(residual_out) * gamma. residual_in
        None is zero; residual_out or norm_out None is not written; options: NormArgs."""
        allreduce_add_rmsnorm(self.handle, input, residual_in, residual_out, gamma, norm_out, eps, options, dtype, stream)


# The calls by C handle (Communicator.handle, an int): what the Communicator methods and the torch
# custom ops (arfusion.torch_ops) run.

def _handle(comm):
    return ctypes.c_void_p(int(comm)) if comm else None


def allreduce(comm, input, out, dtype=None, stream=None):
    x, o = _describe(input, "input", dtype), _describe(out, "out", dtype)
    _same(o, x, "out", "input")
    tokens, hidden = _rows(x, "input")
    _check(library.arfusion_allreduce(_handle(comm), x[0], _ptr(o), tokens, hidden, x[2], _stream(stream)))


def allreduce_add(comm, input, residual_in, residual_out, dtype=None, stream=None):
    x = _describe(input, "input", dtype)
    r_in, r_out = _describe(residual_in, "residual_in", dtype), _describe(residual_out, "residual_out", dtype)
    _same(r_in, x, "residual_in", "input")
    _same(r_out, x, "residual_out", "input")
    tokens, hidden = _rows(x, "input")
    _check(library.arfusion_allreduce_add(_handle(comm), x[0], _ptr(r_in), _ptr(r_out), tokens, hidden, x[2],
                                          _stream(stream)))


def allreduce_add_rmsnorm(comm, input, residual_in, residual_out, gamma, norm_out, eps=1e-6, options=None, dtype=None,
                          stream=None):
    a = _norm_args(input, residual_in, residual_out, gamma, norm_out, eps, options, dtype)
    _check(library.arfusion_allreduce_add_rmsnorm_ex(_handle(comm), ctypes.byref(a), _stream(stream)))
