"""scripts/lab's reading of doctest output: failing checks, the lab's summary line and its hints.

A check written with tests/lab_check.hpp starts its message with
    rung R (float32|float64|int64), output O, case C: first bad element at [...] of [...]: expected E, got A ...
which is parsed into Failure(rung, precision, output, case); any other failing check keeps its file,
line and test case name.
"""
import re
from dataclasses import dataclass, field

ERROR = re.compile(r"^(\S+:\d+): (?:FATAL )?ERROR: (.*)$")
TAG = re.compile(r"rung (\S+) \((float32|float64|int64)\), output (\S+), case (.+?): (.*)$")
CASES = re.compile(r"\[doctest\] test cases:\s*(\d+) \|\s*(\d+) passed \|\s*(\d+) failed")


@dataclass
class Failure:
    where: str          # "test_01_softmax [schedule forward]: file:line in 'test case'"
    headline: str       # the first line a student reads
    detail: list = field(default_factory=list)
    rung: str = ""
    precision: str = ""
    output: str = ""
    case: str = ""
    test_case: str = ""


def _finish(f):
    text = [f.headline] + [l.strip() for l in f.detail]
    for line in text:
        m = TAG.search(line)
        if m:
            f.rung, f.precision, f.output, f.case, rest = m.groups()
            f.headline = m.group(0)
            break
    else:  # no tag: show what doctest logged (CAPTUREd values, the message) on the headline
        logged = [l.strip()[len("logged:"):].strip() for l in f.detail if l.strip().startswith("logged:")]
        values = [l.strip() for l in f.detail if l.strip().startswith("values:")]
        f.headline = " | ".join([f.headline] + values + logged)
    return f


def parse_doctest(out, label):
    """(failures, test cases run) from one doctest binary's output."""
    failures, cur, test_case, total = [], None, "", 0
    lines = out.splitlines()
    for i, line in enumerate(lines):
        if line.startswith("TEST CASE:"):
            test_case = line[len("TEST CASE:"):].strip()
            continue
        m = ERROR.match(line)
        if m:
            if cur:
                failures.append(_finish(cur))
            cur = Failure(where=f"{label}: {m.group(1)} in '{test_case}'" if label else m.group(1),
                          headline=m.group(2), test_case=test_case)
            continue
        if cur is not None:
            if not line.strip() or line.startswith("====") or line.startswith("[doctest]"):
                failures.append(_finish(cur))
                cur = None
            else:
                cur.detail.append(line)
        c = CASES.search(line)
        if c:
            total += int(c.group(1))
    if cur:
        failures.append(_finish(cur))
    return failures, total


def _short(items, n=3):
    items = list(dict.fromkeys(items))
    return ", ".join(items[:n]) + (f", +{len(items) - n} more" if len(items) > n else "")


def summary_line(stage, failures, crashes, total):
    if not failures and not crashes:
        return f"lab {stage}: PASSED (all {total} test cases)"
    by_rung, other = {}, {}
    for f in failures:
        if f.rung:
            by_rung.setdefault(f.rung, []).append(f)
        else:
            other.setdefault(f.test_case, []).append(f)
    parts = []
    for rung, fs in by_rung.items():
        outs = _short([f"{f.output} ({f.precision})" for f in fs], 4)
        parts.append(f"{rung} ({outs} on {_short([f.case for f in fs])})")
    s = f"lab {stage}: {len(failures)} checks fail"
    if by_rung:
        s += f" in {len(by_rung)} rung{'s' if len(by_rung) > 1 else ''}: " + "; ".join(parts)
    if other:
        n = sum(len(v) for v in other.values())
        s += f"{';' if by_rung else ''} {n} other check{'s' if n > 1 else ''} in: " + _short([f"'{t}'" for t in other], 2)
    if crashes:
        s += f"; {len(crashes)} test run{'s' if len(crashes) > 1 else ''} crashed"
    return s


def hints_for(failures, hints):
    """lab.json "hints": [{"hint": text, "rung_in": [...], "output_in": [...], "case_contains": s,
    "case_not_contains": s, "passing_cases": [regex, ...]}]: a hint is shown when every tagged failure
    satisfies its conditions (passing_cases: no failing case name matches any of the regexes) and, with
    "some_case": regex, at least one failing case matches it."""
    tagged = [f for f in failures if f.rung]
    shown = []
    if not tagged:
        return shown
    for h in hints:
        ok = True
        for f in tagged:
            if "rung_in" in h and f.rung not in h["rung_in"]:
                ok = False
            if "output_in" in h and f.output not in h["output_in"]:
                ok = False
            if "case_contains" in h and h["case_contains"] not in f.case:
                ok = False
            if "case_not_contains" in h and h["case_not_contains"] in f.case:
                ok = False
            if any(re.search(s, f.case) for s in h.get("passing_cases", [])):
                ok = False
        if "some_case" in h and not any(re.search(h["some_case"], f.case) for f in tagged):
            ok = False  # some failing case must match this regex
        if ok:
            shown.append(h["hint"])
    return shown
