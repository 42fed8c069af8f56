"""The checks the Python CLI tests share: run the `ladder` binary, compare its exit status and output, print one
`ok  ` / `FAIL` line per check, and count the failures for the script's exit status. Standard library only.

    import sys, os
    sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))  # from tests/<stage>/
    from cli_expect import Checks

    checks = Checks(sys.argv[1])
    checks.expect("describe names the outputs", ["describe", "04-moe"], 0, "group_sizes")
    checks.expect("a bad stage is one line", ["check", "4-moe"], 2, "did you mean", err_one_line=True)
    checks.verdict("numpy agrees", ok, detail=f"{got} != {want}")
    sys.exit(checks.exit_code())

Checks(ladder, tail=None)
    ladder: the path of the binary. tail: on a failed expect, print only the last `tail` characters of its stdout and
    of its stderr (None: all of both).
checks.run(*args) -> subprocess.CompletedProcess
    `ladder ARGS...` with stdout and stderr captured as text; judges nothing.
checks.expect(name, args, rc, out_has="", err_one_line=False) -> subprocess.CompletedProcess
    Passes when the exit status is rc and out_has is a substring of stdout + stderr; with err_one_line, also when
    stderr is exactly one line (surrounding whitespace ignored) that starts with "ladder: error: ". Prints
    "ok   NAME: exit GOT (want RC)" or "FAIL NAME: exit GOT (want RC)" followed by the output.
checks.verdict(name, ok, detail="") -> bool
    A check judged by the script itself: prints "ok   NAME" or "FAIL NAME" (and detail, if any, on failure).
checks.failures
    The number of failed checks so far.
checks.exit_code() -> int
    1 if any check failed, else 0.
"""
import subprocess


class Checks:
    def __init__(self, ladder, tail=None):
        self.ladder = ladder
        self.tail = tail
        self.failures = 0

    def run(self, *args):
        return subprocess.run([self.ladder, *args], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)

    def expect(self, name, args, rc, out_has="", err_one_line=False):
        p = self.run(*args)
        ok = p.returncode == rc and out_has in p.stdout + p.stderr
        if err_one_line:
            ok = ok and len(p.stderr.strip().splitlines()) == 1 and p.stderr.startswith("ladder: error: ")
        print(f"{'ok  ' if ok else 'FAIL'} {name}: exit {p.returncode} (want {rc})")
        if not ok:
            if self.tail is None:
                print(p.stdout, p.stderr)
            else:
                print(p.stdout[-self.tail:], p.stderr[-self.tail:])
            self.failures += 1
        return p

    def verdict(self, name, ok, detail=""):
        ok = bool(ok)
        print(f"{'ok  ' if ok else 'FAIL'} {name}")
        if not ok:
            if detail:
                print(detail)
            self.failures += 1
        return ok

    def exit_code(self):
        return 1 if self.failures else 0
