"""Reads the CUDA fatbins embedded in ELF objects and libraries (the .nv_fatbin section), without
cuobjdump: which architectures they hold, and their PTX text.

A fatbin is a sequence of containers (magic 0xBA55ED50, u16 version, u16 header size, u64 size),
each a sequence of entries: u16 kind (1 PTX, 2 ELF cubin), u16 version, u32 header size, u64
payload size, ..., u32 arch at byte 28 (90, 100, 120), u32 flags at byte 40 (0x100000: an
arch-specific "a" target such as sm_90a), u32 compressed size at byte 16 and u32 uncompressed size
at byte 56 for compressed payloads (zstd frames from nvcc 13)."""
import shutil
import struct
import subprocess

MAGIC = 0xBA55ED50
KIND_PTX, KIND_ELF = 1, 2
FLAG_ARCH_SPECIFIC = 0x100000


def _sections(data):
    if data[:4] != b"\x7fELF" or data[4] != 2:
        raise ValueError("not a 64-bit ELF file")
    shoff = struct.unpack_from("<Q", data, 0x28)[0]
    shentsize, shnum, shstrndx = struct.unpack_from("<HHH", data, 0x3A)
    hdrs = [struct.unpack_from("<IIQQQQIIQQ", data, shoff + i * shentsize) for i in range(shnum)]
    strtab = hdrs[shstrndx][4]
    out = {}
    for h in hdrs:
        name = data[strtab + h[0]:data.index(b"\0", strtab + h[0])].decode()
        out[name] = (h[4], h[5])
    return out


def entries(path):
    """Yields (kind, arch name such as 'sm_90a', payload bytes, header words) for every entry."""
    data = open(path, "rb").read()
    sec = _sections(data).get(".nv_fatbin")
    if sec is None:
        return
    fb = data[sec[0]:sec[0] + sec[1]]
    p = 0
    while p + 16 <= len(fb):
        magic, _ver, hsize, fsize = struct.unpack_from("<IHHQ", fb, p)
        if magic != MAGIC:
            p += 8  # containers are 8-byte aligned
            continue
        q, end = p + hsize, p + hsize + fsize
        while q < end:
            w = struct.unpack_from("<16I", fb, q)
            kind, ehsize, psize = w[0] & 0xFFFF, w[1], w[2]
            arch = "sm_%d%s" % (w[7], "a" if w[10] & FLAG_ARCH_SPECIFIC else "")
            yield kind, arch, fb[q + ehsize:q + ehsize + psize], w
            q += ehsize + psize
        p = end


def arches(path, kind=KIND_ELF):
    """The architectures with entries of `kind` (machine code by default) in the file."""
    return sorted({a for k, a, _, _ in entries(path) if k == kind})


def ptx(path, arch):
    """The PTX text of `arch` (e.g. 'sm_90a') in the file, '' if it has none."""
    texts = []
    for kind, a, payload, w in entries(path):
        if kind != KIND_PTX or a.rstrip("a") != arch.rstrip("a"):
            continue
        if payload[:4] == b"\x28\xb5\x2f\xfd":  # a zstd frame
            if shutil.which("zstd") is None:
                raise RuntimeError("the PTX is zstd-compressed and the zstd program is not installed")
            raw = subprocess.run(["zstd", "-d", "-c"], input=payload[:w[4]], capture_output=True, check=True).stdout
        else:
            raw = payload
        texts.append(raw.rstrip(b"\0").decode())
    return "\n".join(texts)
