#!/usr/bin/env python3
"""Every eviction policy on a real model at 50%, 25% and 10% budgets: perplexity change and KL on
real text in the loop, and passkey retrieval (docs/QUALITY.md, "Every eviction policy").

Each row is one or two `kvlab quality` commands, printed before they run, so any row can be
reproduced alone:

  perplexity  kvlab quality --model M --text-file TEXT --window 512 --max-tokens 1022
                  --prompt 256 --method none --policy P --budget B --json
              Each 512-token window is a prompt of 256 tokens (kept whole while it runs; a
              prefill policy compresses it when it ends, a decode policy starts evicting after
              it) and 255 scored tokens.
  needle      kvlab quality --needle --model M --lengths 1024 --depths 0,0.25,0.5,0.75,1
                  --method none --policy P --budget B [--press-before-question] --json
              A prefill policy compresses the prompt after all of it (the question in its
              observation window) and, in a second row, after the haystack, before the question.

Prefill policies read an observation window of 16 queries (--obs-window 16; SnapKV keeps it whole
inside its budget, and 10% of a 256-token prompt is 26 tokens). ThinK's size is its key channels (--key-channels B, every token kept); MiniCache has no budget
and runs once. Results go to --out (JSON lines, one per command, appended, so an interrupted
run resumes where it stopped) and, with --db, to a runs database (the Quality view's retrieval
chart reads the needle runs from it). --markdown prints the table from --out.

Usage: eviction_eval.py --kvlab PATH --model M.gguf --text TEXT --out results.jsonl
                        [--db runs.sqlite] [--only ppl|needle] [--policies p,q] [--markdown]
"""
import argparse
import json
import os
import subprocess
import sys

BUDGETS = ["50%", "25%", "10%"]
PREFILL = ["snapkv", "pyramidkv", "knorm", "keydiff", "expected-attention", "adakv", "chunkkv",
           "think", "minicache"]
DECODE = ["window", "streaming", "h2o", "tova", "threshold", "importance", "merge"]


def policy_args(policy, budget):
    # An observation window of 16 queries: SnapKV keeps it whole inside the budget, and 10% of
    # a 256-token prompt is 26 tokens.
    window = ["--obs-window", "16"] if policy in PREFILL else []
    if policy == "think":
        return ["--policy", "think", "--key-channels", str(float(budget.rstrip("%")) / 100)] + window
    if policy == "minicache":
        return ["--policy", "minicache"]
    return ["--policy", policy, "--budget", budget] + window


def commands(a):
    policies = a.policies.split(",") if a.policies else PREFILL + DECODE
    # Budgets outside, policies inside, 25% first: an interrupted run has every policy at one
    # budget before any at the next.
    order = ["25%", "50%", "10%"]
    for kind in ("ppl", "needle"):
        if a.only and a.only != kind:
            continue
        for budget_i, policy in [(b, p) for b in order for p in policies]:
            for budget in (["-"] if policy == "minicache" else BUDGETS):
                if budget not in ("-", budget_i) or (budget == "-" and budget_i != order[0]):
                    continue
                base = [a.kvlab, "quality", "--model", a.model, "--method", "none", "--json"]
                base += policy_args(policy, budget)
                if kind == "ppl":
                    yield kind, policy, budget, False, base + [
                        "--text-file", a.text, "--window", "512", "--max-tokens", "1022",
                        "--prompt", "256"]
                    continue
                needle = base + ["--needle", "--lengths", "1024", "--depths",
                                 "0,0.25,0.5,0.75,1"]
                yield kind, policy, budget, False, needle
                if policy in PREFILL:
                    yield kind, policy, budget, True, needle + ["--press-before-question"]


def key(kind, policy, budget, before):
    return f"{kind}|{policy}|{budget}|{int(before)}"


def run(a):
    done = set()
    if os.path.exists(a.out):
        with open(a.out) as f:
            for line in f:
                r = json.loads(line)
                done.add(key(r["kind"], r["policy_id"], r["budget"], r["before_question"]))
    for kind, policy, budget, before, cmd in commands(a):
        if key(kind, policy, budget, before) in done:
            continue
        if a.db:
            cmd = cmd + ["--save", "--db", a.db]
        print(" ".join(cmd), flush=True)
        p = subprocess.run(cmd, capture_output=True, text=True)
        if p.returncode != 0:  # an option the policy refuses: recorded, and the rest goes on
            message = p.stderr.strip().splitlines()[-1] if p.stderr.strip() else "failed"
            print(message, file=sys.stderr)
            r = {"error": message}
        else:
            r = json.loads(p.stdout)
        r.update(kind=kind, policy_id=policy, budget=budget, before_question=before,
                 command=" ".join(cmd[1:]))
        with open(a.out, "a") as f:
            f.write(json.dumps(r) + "\n")
    return 0


def load_rows(path):
    """The stored rows of an --out file, the last of each (kind, policy, budget, before) kept."""
    rows = {}
    with open(path) as f:
        for line in f:
            r = json.loads(line)
            rows[key(r["kind"], r["policy_id"], r["budget"], r["before_question"])] = r
    return rows


# The uncertainties a row carries when kvlab stored it with them (older rows lack them).
UNCERTAINTIES = {"ppl": ["perplexity_change_se", "kl_mean_se", "next_token_agreement_low",
                         "next_token_agreement_high"],
                 "needle": ["accuracy_low", "accuracy_high"]}


def have(r, field):
    return r is not None and isinstance(r.get(field), (int, float))


def markdown_table(rows, source):
    """The table of docs/QUALITY.md ("Every eviction policy"), every number with its uncertainty
    where the row has it (— where not), after one line naming what the stored rows lack."""
    missing = sorted({f for r in rows.values() if "error" not in r
                      for f in UNCERTAINTIES.get(r["kind"], []) if not have(r, f)})
    out = []
    if missing:
        out += [f"The rows of `{source}` were stored before runs kept their uncertainties "
                f"({', '.join(missing)}): those cells show —.", ""]
    out.append("| policy | when | budget | kept | tokens | perplexity change | ± s.e. | KL nats "
               "| ± s.e. | same greedy token | 95% interval | passkeys found "
               "| found, pressed before the question |")
    out.append("|---|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---|---|")

    def cells(r):
        if not r:
            return "–"
        found = sum(c["found"] for c in r["cells"])
        interval = (f"{100 * r['accuracy_low']:.0f}–{100 * r['accuracy_high']:.0f}%"
                    if have(r, "accuracy_low") and have(r, "accuracy_high") else "—")
        return ("".join("✓" if c["found"] else "✗" for c in r["cells"]) +
                f" {found}/{len(r['cells'])}, 95% {interval}")

    def num(r, field, fmt):
        return fmt(r[field]) if have(r, field) else "—"

    for policy in PREFILL + DECODE:
        for budget in (["-"] if policy == "minicache" else BUDGETS):
            p = rows.get(key("ppl", policy, budget, False))
            n = rows.get(key("needle", policy, budget, False))
            b = rows.get(key("needle", policy, budget, True))
            if not (p or n):
                continue
            when = "prefill" if policy in PREFILL else "decode"
            if (p and "error" in p) or (n and "error" in n):
                err = (p if p and "error" in p else n)["error"].replace("kvlab: ", "")
                out.append(f"| {policy} | {when} | {budget} | not run: {err} "
                           "| | | | | | | | | |")
                continue
            size = f"{budget} of channels" if policy == "think" else budget
            before = cells(b) if policy in PREFILL else ""
            if not p:
                out.append(f"| {policy} | {when} | {size} | | | | | | | | | {cells(n)} | "
                           f"{cells(b)} |")
                continue
            agreement = (f"{100 * p['next_token_agreement_low']:.1f}–"
                         f"{100 * p['next_token_agreement_high']:.1f}%"
                         if have(p, "next_token_agreement_low") and
                         have(p, "next_token_agreement_high") else "—")
            out.append(
                f"| {policy} | {when} | {size} | {100 * p['kept_fraction']:.1f}% | "
                f"{p['tokens']} | {100 * p['perplexity_change']:+.2f}% | "
                f"{num(p, 'perplexity_change_se', lambda v: f'{100 * v:.2f}%')} | "
                f"{p['kl_mean']:.4f} | {num(p, 'kl_mean_se', lambda v: f'{v:.4f}')} | "
                f"{100 * p['next_token_agreement']:.1f}% | {agreement} | {cells(n)} | "
                f"{before} |")
    return "\n".join(out) + "\n"


def markdown(a):
    sys.stdout.write(markdown_table(load_rows(a.out), a.out))
    return 0


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--kvlab")
    ap.add_argument("--model")
    ap.add_argument("--text")
    ap.add_argument("--out", required=True)
    ap.add_argument("--db")
    ap.add_argument("--only", choices=["ppl", "needle"])
    ap.add_argument("--policies")
    ap.add_argument("--markdown", action="store_true")
    a = ap.parse_args()
    if a.markdown:
        return markdown(a)
    if not (a.kvlab and a.model and a.text):
        ap.error("--kvlab, --model and --text are needed to run")
    return run(a)


if __name__ == "__main__":
    sys.exit(main())
