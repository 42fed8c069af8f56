"""scripts/lab's reading of doctest output: failing checks, the grouped report, the summary line, the hints.

A check written with tests/lab_check.hpp starts its message with
    rung R (float32|float64), output O, case C: first bad element at [...] of [...]: expected E, got A ...
(an integer output has no precision tag: "rung R, output O, case C: ...") which is parsed into
Failure(rung, precision, output, case); any other failing check keeps its file, line and test case name.
"""
import re
from dataclasses import dataclass, field

ERROR = re.compile(r"^(\S+:\d+): (?:FATAL )?ERROR: (.*)$")
TAG = re.compile(r"rung (\S+?)(?: \((float32|float64|int64)\))?, output (\S+), case (.+?): (.*)$")
CASES = re.compile(r"\[doctest\] test cases:\s*(\d+) \|\s*(\d+) passed \|\s*(\d+) failed")
BAD = re.compile(r"; (\d+) (?:of \d+ (?:elements|rows) bad|elements? fail)")  # the count of a check (tests/lab_check.hpp)
GROUPS_SHOWN = 8  # the report's cap: groups of failing checks printed (the rest are counted)


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
            f.precision = f.precision or ""
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


def _plural(n, word):
    return f"{n} {word}{'' if n == 1 else 's'}"


def groups(failures):
    """The failing checks grouped: by (rung, output) when tagged, else by test case; in first-seen order."""
    out = {}
    for f in failures:
        key = ("rung", f.rung, f.output) if f.rung else ("test", f.test_case, "")
        out.setdefault(key, []).append(f)
    return out


def _echo(line, f):
    t = line.strip()
    if t.startswith("logged:"):
        t = t[len("logged:"):].strip()
    return t.startswith("values: CHECK") or ":=" in t or t == f.headline or (bool(f.rung) and not t)


def grouped_report(failures, cap=GROUPS_SHOWN, first=()):
    """A few lines a student can read: one group per rung and output (then one per untagged test case)
    with its count, its cases and its first failing check in full (the comparator's report under the first group
    only); at most `cap` groups, the rest counted."""
    lines = []
    # the rungs of the student's own functions first (lab.json "report_first": the others call them), then
    # the other rungs' groups, then the untagged test cases; else in the order the tests ran
    gs = sorted(groups(failures).items(),
                key=lambda g: (g[0][0] != "rung", g[0][1] not in first, list(first).index(g[0][1]) if g[0][1] in first else 0))
    for n, (key, fs) in enumerate(gs[:cap]):
        first = fs[0]
        if key[0] == "rung":
            precisions = _short([f.precision for f in fs if f.precision], 2)
            cases = list(dict.fromkeys(f.case for f in fs))
            counts = [BAD.search(f.headline) for f in fs]
            counted = [int(m.group(1)) for m in counts if m]
            elements = ("" if not counted else f", {sum(counted)} bad elements" if len(counted) == len(fs)
                        else f", {sum(counted)} bad elements in the {len(counted)} that count them")
            lines.append(f"FAIL rung {key[1]}, output {key[2]}{f' ({precisions})' if precisions else ''}: "
                         f"{_plural(len(fs), 'check')} in {_plural(len(cases), 'case')} ({_short(cases)}){elements}; first:")
        else:
            lines.append(f"FAIL '{key[1]}': {_plural(len(fs), 'check')}; first:")
        lines.append(f"  at {first.where}")
        lines.append(f"  {first.headline}")
        if n == 0:  # the comparator's report, without doctest's echo of the message and the CAPTUREs
            lines += ["  " + l for l in first.detail[:12] if not _echo(l, first)][:8]
    if len(gs) > cap:
        rest = sum(len(fs) for _, fs in gs[cap:])
        lines.append(f"... and {_plural(len(gs) - cap, 'more group')} ({_plural(rest, 'check')}): see the full log")
    return lines


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
        outs = _short([f.output + (f" ({f.precision})" if f.precision else "") for f in fs], 4)
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


# ---- hints -------------------------------------------------------------------------------------------
# lab.json "hints": [{"id": name, "hint": text, "rung": [...], "output": [...], "fails": [regex, ...],
# "passes": [selector, ...]}]. The hint's scope is the tagged failures of its rungs and outputs (either
# list absent: any). Its signature matches when
#   - some failure is in its scope,
#   - each "fails" regex matches the case of some failure in its scope (what the mistake must break),
#   - no failure matches any "passes" selector (what the mistake leaves intact). A selector is
#     {"rung": [...], "output": [...], "case": regex, "case_not": regex}; one that names neither a
#     rung nor an output is about the hint's own scope, so {"case": "^len_1$"} means "this hint's
#     rungs and outputs pass len_1", while {"output": ["dV"]} means "dV passes in every rung".
# Failures outside the scope do not stop a hint: code that several rungs share fails them all.
# Matching hints are ranked by the evidence they name (the number of their conditions: scope lists,
# "fails" and "passes" entries), then by the share of all failures their scope explains; the best is
# shown, and the second only when it explains failures the first does not.


def _in(f, sel, scope):
    if "rung" in sel or "output" in sel:
        scope = {}  # a selector naming a rung or an output: exactly those (the other one: any)
    rungs = sel.get("rung", scope.get("rung"))
    outputs = sel.get("output", scope.get("output"))
    if rungs is not None and f.rung not in rungs:
        return False
    if outputs is not None and f.output not in outputs:
        return False
    if "case" in sel and not re.search(sel["case"], f.case):
        return False
    if "case_not" in sel and re.search(sel["case_not"], f.case):
        return False
    return True


def match_hint(h, tagged):
    """(in-scope failures, evidence) when the hint's signature matches the failures, else None."""
    scope = {k: h[k] for k in ("rung", "output") if k in h}
    mine = [f for f in tagged if _in(f, {}, scope)]
    if not mine:
        return None
    if not all(any(re.search(rx, f.case) for f in mine) for rx in h.get("fails", [])):
        return None
    if any(_in(f, sel, scope) for sel in h.get("passes", []) for f in tagged):
        return None
    evidence = len(scope) + len(h.get("fails", [])) + len(h.get("passes", []))
    return mine, evidence


def ranked_hints(failures, hints, most=2):
    """The hints to show (dicts from lab.json), best first: at most `most`."""
    tagged = [f for f in failures if f.rung]
    if not tagged:
        return []
    found = []
    for i, h in enumerate(hints):
        m = match_hint(h, tagged)
        if m:
            mine, evidence = m
            found.append((-evidence, -len(mine), i, h, {id(f) for f in mine}))
    found.sort(key=lambda t: t[:3])
    shown, explained = [], set()
    for *_, h, mine in found:
        if shown and not (mine - explained):
            continue  # explains nothing the better hints leave open
        shown.append(h)
        explained |= mine
        if len(shown) == most:
            break
    return shown


def hints_for(failures, hints):
    return [h["hint"] for h in ranked_hints(failures, hints)]
