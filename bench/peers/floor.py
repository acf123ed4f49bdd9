#!/usr/bin/env python3
"""The onnxruntime floor: session.run on the request tensor in a process of its own, no server.

Same model, same session settings as every server in the comparison (1 intra-op thread,
1 inter-op thread, no spinning, graph optimisation "all", CPU provider). Prints one JSON line:
p50/p90/p99 ms, CPU ms per run (this process, all threads), runs, session creation seconds and
the argmax; --ref-out saves the output (float32 .npy) to compare the servers' answers with.

  .venv-client/bin/python floor.py --model M.onnx --tensor ../results/peers/latest/request --seconds 5
"""
import argparse
import json
import os
import sys
import time

import numpy as np
import onnxruntime as ort

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from loadgen import load_tensor, loadavg, percentile_ms  # noqa: E402


def session_options(intra):
    so = ort.SessionOptions()
    so.intra_op_num_threads = intra
    so.inter_op_num_threads = 1
    so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
    so.add_session_config_entry("session.intra_op.allow_spinning", "0")
    so.add_session_config_entry("session.inter_op.allow_spinning", "0")
    return so


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--model", required=True)
    ap.add_argument("--tensor", required=True)
    ap.add_argument("--input-name", default="input")
    ap.add_argument("--seconds", type=float, default=5)
    ap.add_argument("--intra-op-threads", type=int, default=1)
    ap.add_argument("--ref-out")
    ap.add_argument("--start-at", type=float, help="epoch seconds at which the timed loop starts (after loading)")
    a = ap.parse_args()
    x, _ = load_tensor(a.tensor)
    t0 = time.perf_counter()
    s = ort.InferenceSession(a.model, session_options(a.intra_op_threads), providers=["CPUExecutionProvider"])
    created = time.perf_counter() - t0
    out = s.run(None, {a.input_name: x})[0]
    for _ in range(3):
        s.run(None, {a.input_name: x})
    load0 = loadavg()[0]
    if a.start_at:
        # a two-process ceiling: every process starts its timed loop at the same moment
        time.sleep(max(0.0, a.start_at - time.time()))
    lat = []
    c0 = time.process_time()
    t0 = time.perf_counter()
    end = t0 + a.seconds
    while time.perf_counter() < end or len(lat) < 20:
        t = time.perf_counter()
        s.run(None, {a.input_name: x})
        lat.append(time.perf_counter() - t)
    elapsed = time.perf_counter() - t0
    cpu = time.process_time() - c0
    if a.ref_out:
        np.save(a.ref_out, out.astype(np.float32))
    print(json.dumps({
        "onnxruntime": ort.__version__,
        "intra_op_threads": a.intra_op_threads,
        "runs": len(lat),
        "runs_per_s": round(len(lat) / elapsed, 2),
        "p50_ms": percentile_ms(lat, 50),
        "p90_ms": percentile_ms(lat, 90),
        "p99_ms": percentile_ms(lat, 99),
        "cpu_ms_per_run": round(cpu * 1e3 / len(lat), 2),
        "session_create_s": round(created, 3),
        "argmax": int(out.argmax()),
        "loadavg_1m": [load0, loadavg()[0]],
    }))


if __name__ == "__main__":
    main()
