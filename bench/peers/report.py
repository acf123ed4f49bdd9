"""Formats a peer benchmark run (results.json written by run_peers.py) as Markdown.

Standard library only, so that it (and test_report.py) runs on any python3:
  python3 bench/peers/report.py bench/results/peers/latest/results.json
"""
import json
import sys

GRPC_LABELS = {"kserve-grpc": "KServe v2 gRPC ModelInfer", "tfs-grpc": "TF Serving gRPC Predict, tensor_content"}


def _phase(server, kind, concurrency):
    for p in server.get("phases", []):
        grpc = p["kind"] != "rest-json"
        if (kind == "grpc") == grpc and p["concurrency"] == concurrency:
            return p
    return None


def _mean(values):
    values = [v for v in values if v is not None]
    return sum(values) / len(values) if values else None


def floor_around(results, index):
    """The floors measured just before and just after server `index` (floors[i] precedes servers[i])."""
    floors = results.get("floors", [])
    return [f for f in floors[index:index + 2] if f and "error" not in f]


def _num(v, digits=1):
    return "–" if v is None else f"{v:.{digits}f}"


def _errors(p):
    return f" ({p['errors']} errors)" if p and p.get("errors") else ""


def summarize(results, index):
    """The issue's figures for server `index`, as numbers (None where not measured)."""
    s = results["servers"][index]
    floors = floor_around(results, index)
    floor_p50 = _mean([f["p50_ms"] for f in floors])
    hc = results["settings"]["high_concurrency"]
    g1, g8, r1 = _phase(s, "grpc", 1), _phase(s, "grpc", hc), _phase(s, "rest", 1)
    return {
        "name": s["name"],
        "grpc_kind": s.get("grpc_kind"),
        "error": s.get("error"),
        "floor_p50_ms": floor_p50,
        "floor_cpu_ms": _mean([f["cpu_ms_per_run"] for f in floors]),
        "grpc1_p50_ms": g1 and g1["p50_ms"],
        "grpc1_ratio": (g1["p50_ms"] / floor_p50) if g1 and g1["p50_ms"] and floor_p50 else None,
        "grpc1_p99_ms": g1 and g1["p99_ms"],
        "grpc8_rps": g8 and g8["rps"],
        "grpc8_cpu_ms": g8 and g8.get("server_cpu_ms_per_req"),
        "rest1_p50_ms": r1 and r1["p50_ms"],
        "cold_start_s": (s.get("cold_start") or {}).get("first_answer_s"),
        "loadavg": [s.get("loadavg_before"), s.get("loadavg_after")],
        "phases": {"grpc1": g1, "grpc8": g8, "rest1": r1},
        "grpc_by_concurrency": {p["concurrency"]: p for p in s.get("phases", []) if p["kind"] != "rest-json"},
        "paired": [r for r in s.get("paired_c1", []) if "error" not in r and r.get("p50_ms") and r.get("floor_p50_ms")],
        "paired_all": s.get("paired_c1", []),
    }


def _median(values):
    v = sorted(values)
    n = len(v)
    return None if n == 0 else (v[n // 2] if n % 2 else (v[n // 2 - 1] + v[n // 2]) / 2)


def paired_cells(s):
    """The paired rounds (run_peers.paired_c1): c=1 p50 minus its round's floor p50, and p99 over the
    floor's p99, each as the median over the rounds with its range."""
    rounds, every = s["paired"], s["paired_all"]
    if not rounds:
        return "–", "–"
    over = [r["p50_ms"] - r["floor_p50_ms"] for r in rounds]
    p99 = [r["p99_ms"] / r["floor_p99_ms"] for r in rounds if r.get("floor_p99_ms")]
    errors = sum(r.get("errors", 0) for r in every)
    tail = (f" ({len(rounds)} of {len(every)} rounds)" if len(rounds) < len(every) else "") + (
        f" ({errors} errors)" if errors else "")
    a = f"{_median(over):+.2f} ({min(over):+.2f} … {max(over):+.2f})" + tail
    b = "–" if not p99 else f"{_median(p99):.2f}× ({min(p99):.2f} … {max(p99):.2f})"
    return a, b


def _over(s, phase):
    """Server CPU per request minus the floor's CPU per run (the floors on both sides), signed."""
    p = s["phases"][phase]
    if not p or p.get("server_cpu_ms_per_req") is None or s["floor_cpu_ms"] is None:
        return "–"
    return f"{p['server_cpu_ms_per_req'] - s['floor_cpu_ms']:+.1f}"


def _column_title(s):
    title = s["title"]
    if s["name"].startswith("visionserve") and s.get("grpc_kind"):
        title += f" ({GRPC_LABELS.get(s['grpc_kind'], s['grpc_kind'])})"
    return title


def _row(label, cells):
    return "| " + label + " | " + " | ".join(cells) + " |"


def main_table(results):
    servers = results["servers"]
    sums = [summarize(results, i) for i in range(len(servers))]
    all_floor_cpu = _mean([f["cpu_ms_per_run"] for f in results.get("floors", []) if f and "error" not in f])
    rest_mb = results["request"]["rest_json_bytes"] / 1e6
    hc = results["settings"]["high_concurrency"]
    lines = [
        _row("", [_column_title(s) for s in servers]),
        "|---|" + "---:|" * len(servers),
    ]

    def cells(fn):
        out = []
        for s in sums:
            out.append(f"failed: {s['error'][:60]}" if s["error"] else fn(s))
        return out

    lines.append(_row("gRPC c=1 p50 / onnxruntime floor", cells(
        lambda s: "–" if s["grpc1_ratio"] is None else
        f"{s['grpc1_ratio']:.2f}× ({_num(s['grpc1_p50_ms'])} / {_num(s['floor_p50_ms'])} ms)"
        + _errors(s["phases"]["grpc1"]))))
    lines.append(_row("gRPC c=1 p99 (ms)", cells(lambda s: _num(s["grpc1_p99_ms"]))))
    st = results["settings"]
    if any(s["paired"] for s in sums):
        how = f"{st.get('paired_rounds', '?')} rounds of a floor then {_num(st.get('paired_seconds'), 0)} s c=1"
        lines.append(_row(f"gRPC c=1 p50 − floor p50, floor interleaved ({how}; ms: median (range))",
                          cells(lambda s: paired_cells(s)[0])))
        lines.append(_row("gRPC c=1 p99 / floor p99, floor interleaved (median (range))",
                          cells(lambda s: paired_cells(s)[1])))
    lines.append(_row(f"gRPC c={hc} throughput (req/s)", cells(
        lambda s: _num(s["grpc8_rps"]) + _errors(s["phases"]["grpc8"]))))
    ceiling = _mean([c["runs_per_s"] for c in results.get("ceilings", []) if c and "error" not in c])
    if ceiling:
        lines.append(_row(f"gRPC c={hc} throughput / measured two-process ceiling ({_num(ceiling)} runs/s)", cells(
            lambda s: "–" if not s["grpc8_rps"] else f"{s['grpc8_rps'] / ceiling:.2f}×")))
    levels = sorted({p["concurrency"] for s in servers for p in s.get("phases", [])
                     if p["kind"] != "rest-json" and p["concurrency"] > 1})
    if len(levels) > 1:
        def sweep(s):
            parts = []
            for c in levels:
                p = s["grpc_by_concurrency"].get(c)
                if p is None:
                    parts.append("–")
                else:
                    parts.append(_num(p["rps"]) + (f" ({p['rps'] / ceiling:.2f}×)" if ceiling else "") + _errors(p))
            return " / ".join(parts)
        label = "/".join(f"c={c}" for c in levels)
        lines.append(_row(f"gRPC throughput at {label} (req/s{', × ceiling' if ceiling else ''})", cells(sweep)))
    lines.append(_row(f"server CPU per request at c={hc} (ms; floor ≈ {_num(all_floor_cpu)})",
                      cells(lambda s: _num(s["grpc8_cpu_ms"]))))
    lines.append(_row("server CPU per request at c=1 (ms)", cells(
        lambda s: _num(s["phases"]["grpc1"] and s["phases"]["grpc1"].get("server_cpu_ms_per_req")))))
    lines.append(_row(f"server CPU over the floor's, c=1 / c={hc} (ms per request)", cells(
        lambda s: f"{_over(s, 'grpc1')} / {_over(s, 'grpc8')}")))
    lines.append(_row(f"server process CPU by thread, c=1 / c={hc} (ms per request: main · busiest · rest)",
                      cells(lambda s: f"{_threads(s['phases']['grpc1'])} / {_threads(s['phases']['grpc8'])}")))
    lines.append(_row(f"REST JSON c=1 p50 (ms, {rest_mb:.1f} MB body)", cells(
        lambda s: _num(s["rest1_p50_ms"]) + _errors(s["phases"]["rest1"]))))
    lines.append(_row("cold start to first answer (s)", cells(lambda s: _num(s["cold_start_s"], 2))))
    lines.append(_row("load average (1 min) before → after", [
        f"{_num(s['loadavg'][0])} → {_num(s['loadavg'][1])}" for s in sums]))
    return "\n".join(lines)


def _threads(phase):
    """A phase's root-process CPU by thread: main · the busiest threads (up to two, joined by +) · the rest."""
    t = phase and phase.get("server_threads_ms_per_req")
    if not t:
        return "–"
    shown = [v for v in t["busiest"][:2] if v >= 0.05]
    rest = t["rest"] + sum(t["busiest"]) - sum(shown)
    return f"{_num(t['main'])} · {'+'.join(_num(v) for v in shown) or '0'} · {_num(rest)}"


def detail_table(results):
    hc = results["settings"]["high_concurrency"]
    lines = [
        "| server | versions | answer: gRPC argmax, max abs diff vs floor; REST argmax | gRPC c=1 req/s, p50/p90/p99 ms "
        f"| gRPC c={hc} req/s, p50/p99 ms | server CPU ms/req c=1 / c={hc} (cores used) | client CPU ms/req c=1 "
        "| REST c=1 req/s, p50/p99 ms (server CPU ms/req) | port open / first answer s | RSS MB |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for i, s in enumerate(results["servers"]):
        if s.get("error"):
            lines.append(f"| {s['name']} | {s.get('versions', '')} | failed: {s['error'][:120]} |||||||")
            continue
        m = summarize(results, i)
        g1, g8, r1 = m["phases"]["grpc1"], m["phases"]["grpc8"], m["phases"]["rest1"]
        ans = s.get("answer") or {}
        cs = s.get("cold_start") or {}

        def lat(p, keys):
            return "–" if not p else f"{p['rps']}, " + "/".join(_num(p[k]) for k in keys) + _errors(p)

        cpu = "–" if not (g1 and g8) else (
            f"{_num(g1.get('server_cpu_ms_per_req'))} / {_num(g8.get('server_cpu_ms_per_req'))} "
            f"({_num(g8.get('server_cpu_cores'), 2)})")
        rest = "–" if not r1 else f"{lat(r1, ('p50_ms', 'p99_ms'))} ({_num(r1.get('server_cpu_ms_per_req'))})"
        lines.append(
            f"| {s['name']} | {s.get('versions', '')} "
            f"| {ans.get('grpc_argmax', '–')}, {ans.get('grpc_max_abs_diff', '–')}; {ans.get('rest_argmax', '–')} "
            f"| {lat(g1, ('p50_ms', 'p90_ms', 'p99_ms'))} | {lat(g8, ('p50_ms', 'p99_ms'))} | {cpu} "
            f"| {_num(g1 and g1.get('client_cpu_ms_per_req'), 2)} | {rest} "
            f"| {_num(cs.get('port_open_s'), 2)} / {_num(cs.get('first_answer_s'), 2)} | {_num(s.get('rss_mb'))} |")
    return "\n".join(lines)


def ceiling_table(results):
    lines = ["| two-process ceiling measured | runs/s (sum) | p50 ms per process | CPU ms/run per process |",
             "|---|---:|---|---|"]
    for c in results.get("ceilings", []):
        if not c:
            continue
        if "error" in c:
            lines.append(f"| {c['when']} | failed: {c['error'][:60]} | | |")
            continue
        lines.append(f"| {c['when']} | {_num(c['runs_per_s'])} | {' / '.join(_num(v) for v in c['p50_ms'])} | "
                     f"{' / '.join(_num(v) for v in c['cpu_ms_per_run'])} |")
    return "\n".join(lines)


def floor_table(results):
    lines = ["| floor measured | runs | p50 ms | p99 ms | CPU ms/run | load (1 min) |", "|---|---:|---:|---:|---:|---|"]
    for f in results.get("floors", []):
        if not f:
            continue
        if "error" in f:
            lines.append(f"| {f.get('when', '')} | failed: {f['error'][:80]} |||||")
            continue
        lines.append(f"| {f.get('when', '')} | {f['runs']} | {_num(f['p50_ms'])} | {_num(f['p99_ms'])} "
                     f"| {_num(f['cpu_ms_per_run'])} | {_num(f['loadavg_1m'][0])} → {_num(f['loadavg_1m'][1])} |")
    return "\n".join(lines)


def markdown(results):
    h, req, st = results["host"], results["request"], results["settings"]
    cond = [
        f"Run {results['started']}: {h['nproc']} cores ({h['cpu']}; {h['cpu_flags']}), load average "
        f"{' '.join(str(v) for v in h['loadavg_start'])} at the start and "
        f"{' '.join(str(v) for v in h['loadavg_end'])} at the end.",
        f"Request: {req['image']} preprocessed once to {req['dtype']} [{','.join(str(d) for d in req['shape'])}] "
        f"({req['bytes']:,} B; gRPC message {', '.join(f'{k} {v:,} B' for k, v in req['grpc_bytes'].items())}; "
        f"REST JSON body {req['rest_json_bytes']:,} B). Each block: {st['warmup']} s untimed, then {st['seconds']} s "
        f"timed, closed loop; floor {st['floor_seconds']} s before every server and after the last."
        + (f" Each server first gets {st['server_warmup']:g} s of untimed gRPC c=1 traffic after its first answer"
           f" (the REST block {max(st['warmup'], st.get('rest_warmup', 0)):g} s)."
           if st.get("server_warmup") else ""),
    ]
    tables = [" ".join(cond), main_table(results), detail_table(results), floor_table(results)]
    if results.get("ceilings"):
        tables.append(ceiling_table(results))
    return "\n\n".join(tables) + "\n"


if __name__ == "__main__":
    with open(sys.argv[1]) as f:
        sys.stdout.write(markdown(json.load(f)))
