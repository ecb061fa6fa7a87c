"""The dtype vocabulary of data/README.md and its numpy / torch forms.

numpy has no bfloat16 or float8: those tensors are numpy views of their raw
storage (bfloat16 and float16 bits as uint16; float8, e8m0 and packed fp4
codes as uint8), and the helpers here decode them to float32.  torch
tensors get the real dtype where the installed torch has it.
"""

import sys

import numpy as np

# Code -> (name, numpy storage dtype); the order of include/dsv4check.h.
DTYPES = [
    ("float64", np.dtype("<f8")),
    ("float32", np.dtype("<f4")),
    ("bfloat16", np.dtype("<u2")),
    ("float16", np.dtype("<u2")),
    ("int64", np.dtype("<i8")),
    ("int32", np.dtype("<i4")),
    ("uint8", np.dtype("u1")),
    ("float8_e4m3fn", np.dtype("u1")),
    ("float8_e4m3fnuz", np.dtype("u1")),
    ("float8_e8m0fnu", np.dtype("u1")),
    ("float4_e2m1fn_x2", np.dtype("u1")),
    ("bytes", np.dtype("u1")),
]
CODE = {name: k for k, (name, _) in enumerate(DTYPES)}
# The logical dtype a plain numpy array stands for when nothing else is known.
_NATURAL = {"<f8": "float64", "<f4": "float32", "<i8": "int64", "<i4": "int32", "|u1": "uint8", "<f2": "float16"}


def name(code):
    return DTYPES[code][0]


def storage(dtype_name):
    """The numpy dtype that stores a logical dtype."""
    return DTYPES[CODE[dtype_name]][1]


def view(raw, dtype_name, shape):
    """A numpy array over raw bytes (a bytes-like or array) of that dtype."""
    return np.frombuffer(raw, dtype=storage(dtype_name)).reshape(shape)


# ---- decoding to float32 ----

def bf16_to_float32(bits):
    """uint16 bfloat16 bits -> float32 (exact)."""
    return (np.asarray(bits, dtype=np.uint16).astype(np.uint32) << 16).view(np.float32)


def float32_to_bf16(x):
    """float32 -> bfloat16 bits, round to nearest even (NaN stays NaN)."""
    u = np.asarray(x, dtype=np.float32).view(np.uint32).astype(np.uint64)
    rounded = ((u + 0x7FFF + ((u >> 16) & 1)) >> 16).astype(np.uint16)
    nan = np.isnan(np.asarray(x, dtype=np.float32))
    return np.where(nan, ((u >> 16) | 0x40).astype(np.uint16), rounded)


def _e4m3_table(fnuz):
    codes = np.arange(256, dtype=np.uint32)
    sign = np.where(codes & 0x80, -1.0, 1.0)
    exp = (codes >> 3) & 0xF
    man = (codes & 7).astype(np.float64)
    bias = 8 if fnuz else 7
    val = np.where(exp == 0, man / 8 * 2.0 ** (1 - bias), (1 + man / 8) * 2.0 ** (exp.astype(np.float64) - bias))
    val = sign * val
    if fnuz:
        val[0x80] = np.nan  # the one NaN; no negative zero
    else:
        val[0x7F] = val[0xFF] = np.nan
    return val.astype(np.float32)


_E4M3FN = _e4m3_table(False)
_E4M3FNUZ = _e4m3_table(True)
_E2M1 = np.array([0, 0.5, 1, 1.5, 2, 3, 4, 6, -0.0, -0.5, -1, -1.5, -2, -3, -4, -6], dtype=np.float32)


def e8m0_to_float32(codes):
    """e8m0 scale bytes -> 2^(code - 127) as float32 (0xFF -> NaN)."""
    c = np.asarray(codes, dtype=np.uint8)
    out = np.ldexp(np.float64(1.0), np.minimum(c, 254).astype(np.int32) - 127).astype(np.float32)
    return np.where(c == 0xFF, np.float32(np.nan), out)


def to_float32(array, dtype_name):
    """Decodes an array of a logical dtype (as stored) to float32 values; a
    packed fp4 tensor doubles its last dimension (even element first)."""
    a = np.asarray(array)
    if dtype_name == "bfloat16":
        return bf16_to_float32(a)
    if dtype_name == "float16":
        return a.view(np.float16).astype(np.float32)
    if dtype_name == "float8_e4m3fn":
        return _E4M3FN[a]
    if dtype_name == "float8_e4m3fnuz":
        return _E4M3FNUZ[a]
    if dtype_name == "float8_e8m0fnu":
        return e8m0_to_float32(a)
    if dtype_name == "float4_e2m1fn_x2":
        pair = np.stack([_E2M1[a & 0xF], _E2M1[a >> 4]], axis=-1)
        return pair.reshape(a.shape[:-1] + (a.shape[-1] * 2,)) if a.ndim else pair
    return a.astype(np.float32)


# ---- torch ----

def _torch():
    try:
        import torch
    except ImportError:
        return None
    return torch


_TORCH_NAMES = {
    "float64": "float64", "float32": "float32", "bfloat16": "bfloat16", "float16": "float16",
    "int64": "int64", "int32": "int32", "uint8": "uint8", "bytes": "uint8",
    "float8_e4m3fn": "float8_e4m3fn", "float8_e4m3fnuz": "float8_e4m3fnuz",
    "float8_e8m0fnu": "float8_e8m0fnu", "float4_e2m1fn_x2": "float4_e2m1fn_x2",
}


def torch_dtype(dtype_name):
    """The torch dtype of a logical dtype; TypeError when this torch lacks it."""
    torch = _torch()
    if torch is None:
        raise TypeError("torch is not installed")
    t = getattr(torch, _TORCH_NAMES[dtype_name], None)
    if t is None:
        raise TypeError(f"torch {torch.__version__} has no torch.{_TORCH_NAMES[dtype_name]} "
                        f"(for {dtype_name}); use raw=True for its storage (uint8 codes / int16 bits)")
    return t


def to_torch(array, dtype_name, device="cpu", raw=False):
    """A torch tensor of the logical dtype over a copy of the stored array.
    raw=True keeps exotic dtypes as their storage (uint8; bf16/f16 as int16)."""
    torch = _torch()
    if torch is None:
        raise TypeError("torch is not installed")
    a = np.ascontiguousarray(array)
    if a.dtype == np.uint16:
        t = torch.from_numpy(a.view(np.int16).copy())
        return (t if raw else t.view(torch_dtype(dtype_name))).to(device)
    t = torch.from_numpy(a.copy())
    if not raw and _TORCH_NAMES[dtype_name] != str(t.dtype).replace("torch.", ""):
        t = t.view(torch_dtype(dtype_name))
    return t.to(device)


def is_torch(value):
    torch = sys.modules.get("torch")  # a value cannot be a tensor of a torch never imported
    return torch is not None and isinstance(value, torch.Tensor)


def _torch_storage(t):
    """A CPU numpy array of a torch tensor's storage, and the logical dtype
    its torch dtype names (None for plain dtypes)."""
    torch = _torch()
    t = t.detach().to("cpu").contiguous()
    dt = str(t.dtype).replace("torch.", "")
    if t.dtype in (torch.bfloat16, torch.float16):
        return t.view(torch.int16).numpy().view(np.uint16), dt
    if dt.startswith("float8") or dt.startswith("float4"):
        return t.view(torch.uint8).numpy(), dt
    if t.dtype == torch.bool:
        return t.to(torch.uint8).numpy(), None
    return t.numpy(), None


def as_output(value, want):
    """(logical dtype, contiguous numpy storage) of an implementation's output
    for a declared output of logical dtype want.  The declared dtype is used
    when the storage fits it; otherwise the array's own dtype is reported and
    the judge refuses it, naming the output.  float32 data for a bfloat16
    output is taken when every value is exactly a bfloat16."""
    own = None
    if is_torch(value):
        arr, own = _torch_storage(value)
    else:
        arr = np.asarray(value)
        if arr.dtype == np.float16 and want == "float16":
            arr = arr.view(np.uint16)
    arr = np.ascontiguousarray(arr)
    if want not in CODE:  # no such output: the judge names it
        return own or _NATURAL.get(arr.dtype.str, str(arr.dtype)), arr
    if own is not None and own != want:
        return own, arr
    if own is None and want == "bfloat16" and arr.dtype == np.float32:
        bits = arr.view(np.uint32)
        if not np.any(bits & 0xFFFF):
            return want, (bits >> 16).astype(np.uint16)
    if want in ("bfloat16", "float16") and arr.dtype in (np.uint16, np.int16):
        return want, arr.view(np.uint16)
    if arr.dtype.str == storage(want).str or (arr.dtype.itemsize == 1 and storage(want).itemsize == 1):
        return want, arr.view(storage(want))
    return _NATURAL.get(arr.dtype.str, str(arr.dtype)), arr
