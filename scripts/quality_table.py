"""The table of docs/QUALITY.md's "Every method and policy at full length" (issue 48, part 4),
drawn from the JSON lines scripts/quality_sweep.py writes: one stored quality run per line, in
the sweep's order. Every number with its uncertainty: the perplexity change and KL with their
standard errors, the greedy agreement with Wilson's 95% interval, the tokens they rest on; a
change whose 95% interval holds 0 is marked within noise of the exact cache."""
import json
import pathlib

Z95 = 1.959964  # as kvlab's engine/core/interval.h


def load_rows(path):
    with open(path) as f:
        return [json.loads(line) for line in f if line.strip()]


def label(r):
    method, policy = r.get("method_label", "none"), r.get("policy_label", "none")
    if method != "none" and policy != "none":
        return f"{policy} + {method}"
    return policy if policy != "none" else method


def sweep_size(root, source):
    """Rows the sweep file beside the results names (bench/quality/<stem>.json), or None."""
    stem = pathlib.Path(source).stem.removeprefix("quality_")
    sweep = root / "bench" / "quality" / f"{stem}.json"
    if not sweep.is_file():
        return None
    spec = json.loads(sweep.read_text())
    return len(spec["models"]) * len(spec["texts"]) * len(spec["methods"])


def duration(seconds):
    return f"{seconds:.0f} s" if seconds < 60 else f"{seconds / 60:.1f} min"


def markdown_table(rows, source, planned=None):
    out = []
    if planned is not None and len(rows) < planned:
        out += [f"{len(rows)} of the sweep's {planned} rows are measured so far (`{source}`; "
                "`scripts/quality_sweep.py` resumes the rest).", ""]
    out.append("| method / policy | bits/value held | tokens | perplexity exact | change | ± s.e. "
               "| vs exact | KL nats | ± s.e. | same greedy token | 95% interval | time |")
    out.append("|---|---:|---:|---:|---:|---:|---|---:|---:|---:|---:|---:|")
    for r in rows:
        change, se = r["perplexity_change"], r.get("perplexity_change_se")
        noise = "within noise" if isinstance(se, (int, float)) and abs(change) <= Z95 * se else ""
        kept = r.get("kept_fraction", 1.0)
        bits = f"{r['memory_bits_per_value']:.2f}" + (f" (kept {100 * kept:.1f}%)"
                                                      if kept < 1 else "")
        out.append(
            f"| {label(r)} | {bits} | {r['tokens']:,} | {r['perplexity_exact']:.4f} | "
            f"{100 * change:+.2f}% | {100 * se:.2f}% | {noise} | {r['kl_mean']:.4f} | "
            f"{r['kl_mean_se']:.4f} | {100 * r['next_token_agreement']:.2f}% | "
            f"{100 * r['next_token_agreement_low']:.1f}–{100 * r['next_token_agreement_high']:.1f}% "
            f"| {duration(r['seconds'])} |")
    return "\n".join(out) + "\n"
