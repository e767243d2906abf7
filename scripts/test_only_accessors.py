#!/usr/bin/env python3
"""Lists the public accessors of app/gui headers that no app code calls, only tests: what issue 45
asked to remove where they hand out widgets (tests find a widget by its object name instead,
tests/gui/gui_test_support.h: gui_test::child). Data getters of models may stay; a widget or
graph in this list is a test reaching into a view.

usage: scripts/test_only_accessors.py   (from the repository root)

Only accessors without arguments that return a pointer or a const reference are seen; calls are
found by text (`.name()` or `->name()`), so a name shared by two classes can hide one, and a
class's own members calling it bare (a base class's `full_view_button()` in its subclasses) are
not seen.
"""
import os
import re
import subprocess

ACCESSOR = re.compile(r'^\s*(?:[\w:<>]+\s*\*|const\s+[\w:<>]+\s*[&*])\s*(\w+)\(\)\s*(?:const)?\s*(?:\{|;)')


def calls(name, folder):
    r = subprocess.run(["grep", "-rn", "--include=*.cpp", "--include=*.h", "-E",
                        r"(\.|->)" + name + r"\(\)", folder], capture_output=True, text=True)
    return r.stdout.splitlines()


def main():
    found = 0
    for folder, _, files in sorted(os.walk("app/gui")):
        for f in sorted(files):
            if not f.endswith(".h"):
                continue
            path = os.path.join(folder, f)
            for line in open(path):
                m = ACCESSOR.match(line)
                if not m:
                    continue
                tests = calls(m.group(1), "tests")
                if tests and not calls(m.group(1), "app"):
                    print(f"{path}: {m.group(1)}() ({len(tests)} uses in tests)")
                    found += 1
    print(f"{found} accessors used only by tests")


if __name__ == "__main__":
    main()
