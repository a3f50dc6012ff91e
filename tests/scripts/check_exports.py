#!/usr/bin/env python3
"""Proves the shared library's ABI: every defined dynamic symbol is public API (arfusion::, but not
arfusion::detail:: or arfusion::testing::, or a function of the C ABI, arfusion_*), and the SONAME
is the versioned one.
Usage: check_exports.py libarfusion.so --soname libarfusion.so.0.4"""
import argparse
import subprocess
import sys


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("library")
    ap.add_argument("--soname", required=True)
    a = ap.parse_args()
    nm = subprocess.run(["nm", "-D", "--defined-only", a.library], capture_output=True, text=True, check=True).stdout
    names = [line.split(None, 2)[-1] for line in nm.splitlines() if line.strip()]
    demangled = subprocess.run(["c++filt"], input="\n".join(names), capture_output=True, text=True, check=True).stdout.splitlines()
    c_abi = [d for d in demangled if d.startswith("arfusion_")]
    bad = [d for d in demangled if not (d.startswith("arfusion::") or d.startswith("arfusion_"))
           or d.startswith(("arfusion::detail::", "arfusion::testing::"))]
    print(f"{a.library}: {len(demangled)} exported symbols")
    for d in demangled:
        print("  " + d)
    for d in bad:
        print("FAIL: exports a symbol outside the public API:", d)
    dyn = subprocess.run(["readelf", "-d", a.library], capture_output=True, text=True, check=True).stdout
    soname = [l.split("[")[-1].rstrip("]") for l in dyn.splitlines() if "(SONAME)" in l]
    if soname != [a.soname]:
        print(f"FAIL: SONAME is {soname}, expected {a.soname}")
        bad.append("soname")
    if len(c_abi) < 20:
        print(f"FAIL: {len(c_abi)} C ABI functions exported (arfusion_c.h declares more than 20)")
        bad.append("c abi")
    if len(demangled) < 10:
        print("FAIL: fewer than 10 exported symbols: the public API is not exported")
        bad.append("too few")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
