"""tests/test_host_code.py [--selftest] -- host C++ never decides device-or-host memory by __CUDACC__.

In the native GPU build (LADDER_CUDA=GPU) host files are compiled by g++, which never defines __CUDACC__;
under SIMT (every test on a CPU) device memory IS host memory. So a host function that reads a device pointer
under `#if defined(__CUDACC__) cudaMemcpy ... #else direct read #endif` passes every SIMT test and is a
segmentation fault on a GPU -- it was, in cuda::moe::ragged_dot, found only by the first H200 run. The build's
switch is LADDER_GPU (ladder/cuda/device.hpp; cuda::copy_to_host for pointers a function does not own).
This test fails on any preprocessor condition naming __CUDACC__ outside the kernel sources (*.cu, where nvcc
compiles device code and g++ compiles them for SIMT) and the SIMT layer itself (cuda/simt/).
--selftest plants such a condition in a scratch copy of a host file and requires it to be reported."""
import os
import re
import shutil
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DIRS = ["cuda", "ref", "tests", "bench", "python", "mpi", "examples", "tools"]
HOST = (".cpp", ".hpp", ".h", ".cc")
COND = re.compile(r"^\s*#\s*(if|ifdef|ifndef|elif)\b.*__CUDACC__")


def violations(root):
    found = []
    for d in DIRS:
        for dirpath, dirnames, files in os.walk(os.path.join(root, d)):
            dirnames[:] = [x for x in dirnames if not x.startswith("build")]
            rel_dir = os.path.relpath(dirpath, root)
            if rel_dir.split(os.sep)[:2] == ["cuda", "simt"]:
                continue
            for f in files:
                if not f.endswith(HOST):
                    continue
                path = os.path.join(dirpath, f)
                with open(path, encoding="utf-8", errors="replace") as fh:
                    for n, line in enumerate(fh, 1):
                        if COND.match(line):
                            found.append(f"{os.path.relpath(path, root)}:{n}: {line.strip()}")
    return found


def main():
    if "--selftest" in sys.argv:
        with tempfile.TemporaryDirectory() as tmp:
            shutil.copytree(os.path.join(ROOT, "cuda"), os.path.join(tmp, "cuda"))
            if violations(tmp):
                print("selftest: the unplanted copy already has violations")
                return 1
            host = os.path.join(tmp, "cuda", "src", "moe_host.cpp")
            with open(host, "a", encoding="utf-8") as fh:
                fh.write("#if defined(__CUDACC__)\n#endif\n")
            got = violations(tmp)
            if len(got) != 1 or "moe_host.cpp" not in got[0]:
                print(f"selftest: the planted condition was not reported exactly once: {got}")
                return 1
        print("selftest: a planted #if defined(__CUDACC__) in a host file is reported")
        return 0
    bad = violations(ROOT)
    for v in bad:
        print(f"{v}: host code must switch on LADDER_GPU (ladder/cuda/device.hpp), never __CUDACC__")
    if not bad:
        print("host code: no preprocessor condition on __CUDACC__ outside *.cu and cuda/simt/")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
