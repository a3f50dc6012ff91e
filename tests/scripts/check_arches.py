#!/usr/bin/env python3
"""Proves which GPU architectures a built library holds machine code for (fatbin.py reads its
fatbin; no cuobjdump needed). Exit 0 if it holds exactly the expected ones, 1 otherwise.
Usage: check_arches.py LIBRARY --expect 90a,100a,120a"""
import argparse
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import fatbin  # noqa: E402


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("library")
    ap.add_argument("--expect", required=True)
    a = ap.parse_args()
    want = sorted("sm_" + x for x in a.expect.split(","))
    got = fatbin.arches(a.library)
    ptx = fatbin.arches(a.library, fatbin.KIND_PTX)
    print(f"{a.library}: machine code for {', '.join(got) or 'nothing'}; PTX for {', '.join(ptx) or 'nothing'}")
    if got != want:
        print(f"FAIL: expected machine code for exactly {', '.join(want)}")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
