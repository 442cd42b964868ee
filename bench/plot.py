"""A roofline of benchmark results: reads the JSON-lines files bench/run_set.py writes (one
object per configuration: key, us, tflops, gbps, flashmla_us, pct_mm_ceiling, pct_copy_ceiling,
commit, date) and draws, on log-log axes,

- x: arithmetic intensity, FLOP per byte moved (tflops * 1e12 / (gbps * 1e9)), as SPEC §7
  counts FLOPs and bytes;
- y: TFLOP/s;
- the copy-bandwidth ceiling (a line of slope 1) and the bf16 matmul ceiling (horizontal),
  from the run's own measurements: tflops / pct_mm_ceiling and gbps / pct_copy_ceiling, or
  --ceilings CEILINGS_JSON (bench/ceilings.py's output);
- each configuration as a point labelled by its key, and FlashMLA on the same configuration
  (same FLOPs, so the same intensity) at tflops * us / flashmla_us, joined to it.

Records without tflops and gbps (e.g. the sparse-decode variant timings) are skipped.

usage: python3 bench/plot.py RESULTS.jsonl [RESULTS.jsonl ...] -o OUT.png [--ceilings FILE]
                             [--title TEXT]"""
import argparse
import json
import statistics
import sys

import matplotlib
import matplotlib.ticker

matplotlib.use("Agg")  # files only: no display needed
import matplotlib.pyplot as plt  # noqa: E402


def read_records(paths):
    records, skipped = [], 0
    for path in paths:
        with open(path) as f:
            for n, line in enumerate(f, 1):
                line = line.strip()
                if not line:
                    continue
                try:
                    r = json.loads(line)
                except ValueError as e:
                    sys.exit(f"plot.py: {path}:{n}: not JSON ({e})")
                if not r.get("tflops") or not r.get("gbps"):
                    skipped += 1
                    continue
                r["_file"] = path
                records.append(r)
    return records, skipped


def ceilings(records, path):
    """(copy GB/s, matmul TFLOP/s): from --ceilings, else the median of what each record implies."""
    if path:
        with open(path) as f:
            c = json.load(f)
        return float(c["copy_GBps"]), float(c["bf16_mm_TFLOPs"])
    mm = [r["tflops"] * 100 / r["pct_mm_ceiling"] for r in records if r.get("pct_mm_ceiling")]
    copy = [r["gbps"] * 100 / r["pct_copy_ceiling"] for r in records if r.get("pct_copy_ceiling")]
    if not mm or not copy:
        sys.exit("plot.py: no record has pct_mm_ceiling and pct_copy_ceiling: pass --ceilings CEILINGS_JSON")
    # The percentages are rounded to 0.1: the median of the implied ceilings is the steadiest.
    return statistics.median(copy), statistics.median(mm)


def family(key):
    """The configuration family, for the colour: "sd_v32", "sd_v4", "sp_d576", "dd_bf16", ..."""
    return "_".join(key.split("_")[:2])


def place_labels(fig, ax, points, markers):
    """Labels next to their points, each moved to the first spot around its point that no
    marker and no earlier label covers (or the least covered one), so configurations at the
    same intensity stay readable."""
    from matplotlib.transforms import Bbox

    renderer = fig.canvas.get_renderer()
    to_px = ax.transData.transform
    # Markers are obstacles too: a box of about their size around each.
    taken = [Bbox.from_extents(*(to_px((x, y)) - 5), *(to_px((x, y)) + 5)) for x, y in markers]
    spots = [(7, 0, "left", "center"), (7, 8, "left", "bottom"), (7, -8, "left", "top"),
             (-7, 0, "right", "center"), (-7, 8, "right", "bottom"), (-7, -8, "right", "top"),
             (7, 16, "left", "bottom"), (7, -16, "left", "top"), (-7, 16, "right", "bottom"),
             (-7, -16, "right", "top")]
    for x, y, text in sorted(points, key=lambda p: (-p[1], p[0])):
        best = None
        for dx, dy, ha, va in spots:
            # A faint leader line: in a cluster the label's side alone does not say whose it is.
            label = ax.annotate(text, (x, y), xytext=(dx, dy), textcoords="offset points", ha=ha, va=va,
                                fontsize=6.5, arrowprops=dict(arrowstyle="-", lw=0.3, color="0.6", shrinkA=0,
                                                              shrinkB=3))
            box = label.get_window_extent(renderer)
            hits = sum(box.overlaps(t) for t in taken)
            if best is None or hits < best[0]:
                if best is not None:
                    best[1].remove()
                best = (hits, label, box)
            else:
                label.remove()
            if hits == 0:
                break
        taken.append(best[2])


def plot(records, copy_gbps, mm_tflops, out, title):
    fig, ax = plt.subplots(figsize=(11, 7), dpi=150)
    xs = [r["tflops"] * 1e12 / (r["gbps"] * 1e9) for r in records]
    flash = [(x, r["tflops"] * r["us"] / r["flashmla_us"]) for x, r in zip(xs, records)
             if r.get("flashmla_us") and r.get("us")]

    ys_all = [r["tflops"] for r in records] + [y for _, y in flash] + [mm_tflops]
    ridge = mm_tflops * 1e12 / (copy_gbps * 1e9)  # FLOP/byte where the two ceilings meet
    lo_x, hi_x = min(xs) / 2, max(max(xs), ridge) * 2
    # The two ceilings: bandwidth-bound left of the ridge point, compute-bound right of it.
    ax.plot([lo_x, ridge], [copy_gbps * 1e9 * lo_x / 1e12, mm_tflops], color="tab:gray", lw=1.8,
            label=f"copy ceiling {copy_gbps:.0f} GB/s")
    ax.plot([ridge, hi_x], [mm_tflops, mm_tflops], color="black", lw=1.8,
            label=f"bf16 matmul ceiling {mm_tflops:.0f} TFLOP/s")
    ax.plot([ridge, hi_x], [mm_tflops, copy_gbps * 1e9 * hi_x / 1e12], color="tab:gray", lw=0.8, ls=":")
    ax.plot([lo_x, ridge], [mm_tflops, mm_tflops], color="black", lw=0.8, ls=":")

    families = sorted({family(r["key"]) for r in records})
    colours = {f: plt.get_cmap("tab10")(k % 10) for k, f in enumerate(families)}
    commits = sorted({str(r.get("commit")) for r in records})
    for f in families:
        pts = [(x, r["tflops"]) for x, r in zip(xs, records) if family(r["key"]) == f]
        ax.scatter([p[0] for p in pts], [p[1] for p in pts], color=colours[f], s=28, zorder=3, label=f"smla {f}")
    for x, r in zip(xs, records):
        if r.get("flashmla_us") and r.get("us"):
            y = r["tflops"] * r["us"] / r["flashmla_us"]
            ax.plot([x, x], [r["tflops"], y], color=colours[family(r["key"])], lw=0.7, ls="--", zorder=2)
    if flash:
        ax.scatter([p[0] for p in flash], [p[1] for p in flash], marker="D", s=26, facecolors="none",
                   edgecolors="black", linewidths=0.9, zorder=3, label="FlashMLA, same configuration")

    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlim(lo_x, hi_x)
    plain = matplotlib.ticker.FuncFormatter(lambda v, _: f"{v:g}")
    for axis in (ax.xaxis, ax.yaxis):
        axis.set_major_locator(matplotlib.ticker.LogLocator(base=10, subs=(1, 2, 5)))
        axis.set_major_formatter(plain)
        axis.set_minor_formatter(matplotlib.ticker.NullFormatter())
    ax.set_ylim(min(ys_all) / 2, mm_tflops * 2)
    ax.set_xlabel("arithmetic intensity (FLOP / byte, SPEC §7 counts)")
    ax.set_ylabel("TFLOP/s")
    dates = sorted({str(r.get("date")) for r in records})
    ax.set_title(title or f"smla roofline: commit {', '.join(commits)}, {', '.join(dates)}")
    ax.grid(True, which="both", lw=0.3, alpha=0.5)
    ax.legend(loc="upper left", fontsize=7)  # above the copy ceiling: no result can be there

    # Keys carry the commit only when several commits share the plot.
    labels = [(x, r["tflops"], r["key"] + (f" @{r.get('commit')}" if len(commits) > 1 else ""))
              for x, r in zip(xs, records)]
    fig.tight_layout()
    fig.canvas.draw()
    place_labels(fig, ax, labels, [(x, r["tflops"]) for x, r in zip(xs, records)] + flash)
    fig.savefig(out)
    plt.close(fig)


def main():
    ap = argparse.ArgumentParser(description="Roofline plot of bench/run_set.py results (JSON lines).")
    ap.add_argument("results", nargs="+", help="JSON-lines files, e.g. bench/results/2026-11-30-3bea476.jsonl")
    ap.add_argument("-o", "--output", required=True, help="the PNG to write")
    ap.add_argument("--ceilings", help="bench/ceilings.py's JSON (default: derived from the records)")
    ap.add_argument("--title", help="plot title (default: the commits and dates of the records)")
    args = ap.parse_args()
    records, skipped = read_records(args.results)
    if not records:
        sys.exit(f"plot.py: no record with tflops and gbps in {', '.join(args.results)} ({skipped} without)")
    if skipped:
        print(f"plot.py: skipped {skipped} record(s) without tflops and gbps", file=sys.stderr)
    copy_gbps, mm_tflops = ceilings(records, args.ceilings)
    plot(records, copy_gbps, mm_tflops, args.output, args.title)
    print(f"plot.py: {len(records)} configuration(s), copy ceiling {copy_gbps:.0f} GB/s, matmul ceiling "
          f"{mm_tflops:.0f} TFLOP/s -> {args.output}")


if __name__ == "__main__":
    main()
