#!/usr/bin/env python3
"""Proves the arch policy and the store widths in the generated code of the built library.

Reads the PTX every kernel object embeds for one architecture (fatbin.py: no recompilation) and
checks every kernel entry:
  * FlagBarrier instantiations (template argument SyncMode == 2) contain no `griddepcontrol`;
  * GridDependency instantiations (SyncMode == 1) contain both `griddepcontrol.wait` and
    `griddepcontrol.launch_dependents` (with --expect-griddep);
  * vector-path instantiations (VEC 8 for 16-bit types, 4 for fp32) issue every payload store as one
    16-byte store (at least one per kernel): the only narrower global store allowed is the block's
    epoch counter. A struct copy once split the peer stores into 2-byte pieces and cut the
    one-shot's bandwidth ~5x without failing any numerical test;
  * quantizing instantiations (kExt == true, the last template argument or the one before a
    quantized format other than kQuantNone) keep 16-byte stores for the rows and add the narrow
    stores of the quantized bytes and scales, which is what they are for; extended ones without a
    quantized output (format kQuantNone) are held to the vector path's rule;
  * no kernel of any architecture has an empty or trapping body: each stores to global memory and
    holds no `trap` or `brkpt` (an arch whose code path were compiled out would show here).
Exit 0 if all hold, 1 if one fails, 77 (skip) if the objects hold no code for the architecture.
Usage: check_kernels.py --arch 120a [--expect-griddep] OBJECT...
"""
import argparse
import os
import re
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import fatbin  # noqa: E402


def kernel_entries(ptx):
    # ".entry NAME(" ... its body: from the first "{" after the parameter list to the brace that
    # closes it (the embedded PTX has no indentation, so inner blocks also close at column 0).
    out = {}
    for m in re.finditer(r"^(?:\.visible\s+|\.weak\s+)?\.entry\s+(\S+)\(", ptx, re.M):
        start = ptx.index(")", m.end())
        i = ptx.index("{", start)
        depth = 0
        for j in range(i, len(ptx)):
            c = ptx[j]
            if c == "{":
                depth += 1
            elif c == "}":
                depth -= 1
                if depth == 0:
                    break
        out[m.group(1)] = ptx[m.start():j + 1]
    return out


def stores(body):
    """The global (or generic-address) stores of a kernel body: those narrower than 16 bytes, by
    instruction, and the number of 16-byte ones. Shared, local, param and cluster (st.async) stores,
    and the flag and control words (release, relaxed or volatile stores), are not counted."""
    narrow, wide = [], 0
    for m in re.finditer(r"\bst((?:\.\w+)+)\s", body):
        mods = m.group(1).split(".")[1:]
        if any(x in mods for x in ("shared", "local", "param", "async")) or any(x.startswith("shared") for x in mods):
            continue
        if any(x in mods for x in ("release", "relaxed", "volatile", "mmio")):
            continue
        bits = [int(x[1:]) for x in mods if re.fullmatch(r"[usbf](8|16|32|64|128)", x)]
        vec = [int(x[1:]) for x in mods if re.fullmatch(r"v(2|4|8)", x)]
        if not bits:
            continue
        nbytes = bits[-1] // 8 * (vec[-1] if vec else 1)
        if nbytes >= 16:
            wide += 1
        else:
            narrow.append("st" + m.group(1))
    return narrow, wide


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--arch", required=True, help="90a, 100a or 120a")
    ap.add_argument("--expect-griddep", action="store_true")
    ap.add_argument("objects", nargs="+")
    a = ap.parse_args()
    arch = "sm_" + a.arch
    failures, flag_kernels, gd_kernels, vec_kernels, ext_kernels, found = [], 0, 0, 0, 0, False
    for obj in a.objects:
        if not obj.endswith((".cu.o", ".cu.obj")):
            continue
        if arch not in fatbin.arches(obj):
            continue
        found = True
        try:
            text = fatbin.ptx(obj, arch)
        except RuntimeError as e:
            print(f"{arch}: {e}: nothing checked")
            return 77
        for name, body in kernel_entries(text).items():
            narrow, wide = stores(body)
            if re.search(r"\b(trap|brkpt);", body):
                failures.append(f"{arch} {name}: the body traps")
            if not narrow and not wide:
                failures.append(f"{arch} {name}: the body stores nothing to global memory (empty?)")
            # Template arguments <T, VEC, ..., kExt[, kFormat]>: the vector path is VEC 8 (16-bit T)
            # or 4 (fp32); kExt selects the extended epilogue, kFormat (where the kernel has one,
            # after it) its quantized output, 0 for none, -1 (kAnyQuant, mangled "n1") every format
            # (the two-shot's quantizing kernel), and where the kernel has one, a last bool (the
            # single-GPU kernel's kManyRows).
            tv = re.search(r"I(13__nv_bfloat16|6__half|f)Li(\d+)E", name)
            ext = re.search(r"Lb1E(?:Li[1-9]\d*E|Lin1E)(?:Lb[01]E)?EE?v", name) is not None
            if ext and tv and int(tv.group(2)) == (4 if tv.group(1) == "f" else 8):
                ext_kernels += 1
                if wide == 0:
                    failures.append(f"{arch} {name}: extended epilogue without a 16-byte global store")
                if not any(n.endswith((".u8", ".b8", ".u16", ".v2.u16", ".v4.u16", ".u32", ".f32", ".v2.u32", ".v2.u8", ".v4.u8", ".u64", ".b32", ".b64")) for n in narrow):
                    failures.append(f"{arch} {name}: extended epilogue stores no quantized bytes or scales")
            elif "SyncMode" in name and tv and int(tv.group(2)) == (4 if tv.group(1) == "f" else 8):
                vec_kernels += 1
                if len(narrow) > 1:
                    failures.append(f"{arch} {name}: {len(narrow)} global stores narrower than 16 bytes on the vector path ({sorted(set(narrow))})")
                if wide == 0:
                    failures.append(f"{arch} {name}: no 16-byte global store on the vector path")
            if "SyncModeE2E" in name:
                flag_kernels += 1
                if "griddepcontrol" in body:
                    failures.append(f"{arch} {name}: FlagBarrier kernel contains griddepcontrol")
            elif "SyncModeE1E" in name:
                gd_kernels += 1
                if a.expect_griddep and not ("griddepcontrol.wait" in body and "griddepcontrol.launch_dependents" in body):
                    failures.append(f"{arch} {name}: GridDependency kernel lacks griddepcontrol.wait/launch_dependents")
    if not found:
        print(f"{arch}: this build holds no code for it (CMAKE_CUDA_ARCHITECTURES): nothing to check")
        return 77
    print(f"{arch}: {flag_kernels} FlagBarrier kernels, {gd_kernels} GridDependency kernels, "
          f"{vec_kernels} vector-path kernels, {ext_kernels} quantizing kernels checked")
    if flag_kernels == 0 or gd_kernels == 0 or vec_kernels == 0 or ext_kernels == 0:
        failures.append("no kernels found: the mangled-name patterns no longer match")
    for f in failures:
        print("FAIL:", f)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
