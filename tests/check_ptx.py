#!/usr/bin/env python3
"""Proves the arch policy in the generated code.

For each fused kernel file, compiles PTX for the given virtual arch and checks every kernel entry:
  * FlagBarrier instantiations (template argument SyncMode == 2) contain no `griddepcontrol`;
  * GridDependency instantiations (SyncMode == 1) contain both `griddepcontrol.wait` and
    `griddepcontrol.launch_dependents` (only checked with --expect-griddep);
  * vector-path instantiations (VEC 8 for 16-bit types, 4 for fp32) issue every payload store as one
    16-byte store (at least one per kernel): the only narrower global or generic-address store
    allowed is the block's epoch counter (one `st.global.u32`). A struct copy once split the peer
    stores into 2-byte pieces and cut the one-shot's bandwidth ~5x without failing any numerical test.
Usage: check_ptx.py --nvcc NVCC --arch compute_120a [--expect-griddep] -I... file.cu ...
"""
import argparse
import re
import subprocess
import sys
import tempfile


def entries(ptx):
    # ".visible .entry NAME(" ... up to the matching closing brace at column 0.
    out = {}
    for m in re.finditer(r"^(?:\.visible\s+|\.weak\s+)?\.entry\s+(\S+)\(", ptx, re.M):
        start = m.start()
        end = ptx.find("\n}\n", start)
        out[m.group(1)] = ptx[start:end if end > 0 else len(ptx)]
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
            continue  # a flag or control word (scoped or volatile), not payload
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
    ap.add_argument("--nvcc", required=True)
    ap.add_argument("--arch", required=True)
    ap.add_argument("--expect-griddep", action="store_true")
    ap.add_argument("-I", action="append", default=[])
    ap.add_argument("files", nargs="+")
    a = ap.parse_args()
    failures, flag_kernels, gd_kernels, vec_kernels = [], 0, 0, 0
    for f in a.files:
        with tempfile.NamedTemporaryFile(suffix=".ptx") as tmp:
            cmd = [a.nvcc, "-std=c++17", "--expt-relaxed-constexpr", "-ptx", f"-arch={a.arch}", "-o", tmp.name, f]
            cmd += [f"-I{i}" for i in a.I]
            subprocess.run(cmd, check=True)
            ptx = open(tmp.name).read()
        for name, body in entries(ptx).items():
            # Template arguments <T, VEC, ...>: the vector path is VEC 8 (16-bit T) or 4 (fp32).
            tv = re.search(r"I(13__nv_bfloat16|6__half|f)Li(\d+)E", name)
            if "SyncMode" in name and tv and int(tv.group(2)) == (4 if tv.group(1) == "f" else 8):
                vec_kernels += 1
                narrow, wide = stores(body)
                if len(narrow) > 1:
                    failures.append(f"{a.arch} {name}: {len(narrow)} global stores narrower than 16 bytes on the vector path ({sorted(set(narrow))})")
                if wide == 0:
                    failures.append(f"{a.arch} {name}: no 16-byte global store on the vector path")
            if "SyncModeE2E" in name:
                flag_kernels += 1
                if "griddepcontrol" in body:
                    failures.append(f"{a.arch} {name}: FlagBarrier kernel contains griddepcontrol")
            elif "SyncModeE1E" in name:
                gd_kernels += 1
                if a.expect_griddep and not ("griddepcontrol.wait" in body and "griddepcontrol.launch_dependents" in body):
                    failures.append(f"{a.arch} {name}: GridDependency kernel lacks griddepcontrol.wait/launch_dependents")
    print(f"{a.arch}: {flag_kernels} FlagBarrier kernels, {gd_kernels} GridDependency kernels, "
          f"{vec_kernels} vector-path kernels checked")
    if flag_kernels == 0 or gd_kernels == 0 or vec_kernels == 0:
        failures.append("no kernels found: the mangled-name patterns no longer match")
    for f in failures:
        print("FAIL:", f)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
