#!/usr/bin/python3
"""The notebooks are stored with their outputs (`make notebooks` writes them), so a reader who opens one
on the web sees its results without a kernel. Fails, naming the notebook, if any code cell was never
executed (execution_count null) or if a notebook stores no output at all -- the state after editing a
notebook without rerunning `make notebooks`.

    tests/test_notebook_outputs.py notebooks/*.ipynb
"""
import json
import sys

bad = 0
for path in sys.argv[1:]:
    with open(path, encoding="utf-8") as f:
        nb = json.load(f)
    code = [c for c in nb["cells"] if c["cell_type"] == "code"]
    unrun = [c.get("id", str(i)) for i, c in enumerate(code) if c.get("execution_count") is None]
    with_output = sum(1 for c in code if c.get("outputs"))
    if unrun or with_output == 0:
        bad += 1
        print(f"FAIL {path}: {len(unrun)} of {len(code)} code cells carry no execution ({', '.join(unrun[:5])}), "
              f"{with_output} with stored output: run `make notebooks` and commit the notebook")
    else:
        print(f"ok   {path}: {len(code)} code cells executed, {with_output} with stored output")
sys.exit(1 if bad or not sys.argv[1:] else 0)
