"""What scripts/perf_doc.py and scripts/quality_doc.py share: write a generated document, or check
that the one in the tree is what they would write."""
import pathlib
import sys


def first_difference(old, new):
    """(line number, the file's line, the generated line) of the first line that differs."""
    a, b = old.splitlines(), new.splitlines()
    for i, (x, y) in enumerate(zip(a, b)):
        if x != y:
            return i + 1, x, y
    n = min(len(a), len(b))
    end = "(end of file)"
    return n + 1, (a[n] if n < len(a) else end), (b[n] if n < len(b) else end)


def run(make, error, out=None, check=None, script=""):
    """`finish` with the text `make()` returns; an `error` it raises is one line and exit 2."""
    try:
        text = make()
    except error as e:
        print(f"{script}: {e}", file=sys.stderr)
        return 2
    return finish(text, out, check, script)


def finish(text, out=None, check=None, script=""):
    """--out FILE writes `text` there; --check FILE compares (exit 1 and one line naming the
    first difference when it differs); neither prints it. Returns the exit status."""
    if check:
        path = pathlib.Path(check)
        old = path.read_text() if path.exists() else ""
        if old == text:
            return 0
        line, was, would = first_difference(old, text)
        print(f"{path}:{line}: is '{was}', the results give '{would}' "
              f"(regenerate: python3 {script} --out {check})", file=sys.stderr)
        return 1
    if out:
        pathlib.Path(out).write_text(text)
        print(f"wrote {out}")
        return 0
    sys.stdout.write(text)
    return 0
