#!/usr/bin/env python3
"""Peer comparison: visionserve and Python model servers, same model, same request, same client.

For each server in --servers: the onnxruntime floor (floor.py, its own process), then start the
server on loopback (its own process group) and time it to the first correct answer, then drive it
with loadgen.py's closed loop: gRPC c=1, gRPC c=--high-concurrency, gRPC at each --sweep concurrency,
--paired-rounds rounds of a floor followed by gRPC c=1 (paired_c1), REST JSON c=1 (each after an
untimed warmup), then stop it (SIGTERM to the group, SIGKILL after a grace period). A last floor
follows the last server, so every server sits between two floors. Results: <out>/results.json,
<out>/results.md (report.py), <out>/<server>.log.

Run through run.sh (it builds, sets up the venvs and writes the request tensor first):
  bench/peers/run.sh [--servers visionserve,kserve,pytriton,mlserver] [--seconds 12] ...
"""
import argparse
import datetime
import json
import os
import platform
import shutil
import signal
import socket
import subprocess
import sys
import time

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, HERE)
import grpc  # noqa: E402

import loadgen  # noqa: E402
import report  # noqa: E402

DEFAULT_SERVERS = "visionserve,kserve,pytriton,mlserver"


def venv_python(name):
    return os.path.join(HERE, f".venv-{name}", "bin", "python")


def pinned(name, package):
    with open(os.path.join(HERE, f"requirements-{name}.txt")) as f:
        for line in f:
            if line.lower().startswith(package.lower() + "=="):
                return line.strip().split("==", 1)[1]
    return "?"


def free_ports(n):
    socks = [socket.socket() for _ in range(n)]
    for s in socks:
        s.bind(("127.0.0.1", 0))
    ports = [s.getsockname()[1] for s in socks]
    for s in socks:
        s.close()
    return ports


# Each spec returns (title, command, grpc port, rest port, gRPC request kind, versions).
def spec_visionserve(a, model_dir, _run_dir, grpc_kind=None, extra=()):
    g, r = free_ports(2)
    node = shutil.which("node") or "node"
    cmd = [node, os.path.join(ROOT, "packages", "cli", "bin", "visionserve.js"), "serve", "--host=127.0.0.1",
           f"--port={g}", f"--rest_api_port={r}", "--sagemaker_port=-1", f"--model_name={a.model}",
           f"--model_base_path={model_dir}", "--file_system_poll_wait_seconds=0", "--log_level=warn",
           # answers as bytes, as the peers' raw_output_contents (TF Serving's default is float_val)
           "--enable_serialization_as_tensor_content=true",
           # the peers queue without limit; visionserve would refuse work queued over 250 ms on a busy box
           "--max_queue_wait_ms=0"] + list(extra) + a.visionserve_args.split()
    ver = subprocess.run(["git", "-C", ROOT, "describe", "--always", "--dirty"], capture_output=True, text=True)
    with open(os.path.join(ROOT, "node_modules", "onnxruntime-node", "package.json")) as f:
        ortn = json.load(f)["version"]
    versions = f"{ver.stdout.strip()}, node {platform_node()}, onnxruntime-node {ortn}"
    title = "visionserve" + "".join(f" {e}" for e in extra)
    return title, cmd, g, r, grpc_kind or a.visionserve_grpc, versions


def platform_node():
    out = subprocess.run([shutil.which("node") or "node", "--version"], capture_output=True, text=True)
    return out.stdout.strip()


def spec_kserve(a, _model_dir, _run_dir, mode="sync"):
    g, r = free_ports(2)
    cmd = [venv_python("kserve"), os.path.join(HERE, "servers", "kserve_server.py"), "--model_path", a.model_path,
           "--model_name", a.model, "--http_port", str(r), "--grpc_port", str(g),
           "--enable_latency_logging", "false", "--predict_mode", mode]
    title = "KServe (Python, onnxruntime model)" + (", predict in threads" if mode == "thread" else "")
    versions = f"kserve {pinned('kserve', 'kserve')}, onnxruntime {pinned('kserve', 'onnxruntime')}"
    return title, cmd, g, r, "kserve-grpc", versions


def spec_mlserver(a, _model_dir, run_dir, workers=1):
    g, r, m = free_ports(3)
    cmd = [venv_python("mlserver"), os.path.join(HERE, "servers", "mlserver_server.py"), "--model_path",
           a.model_path, "--model_name", a.model, "--run_dir", os.path.join(run_dir, f"mlserver-w{workers}"),
           "--http_port", str(r), "--grpc_port", str(g), "--metrics_port", str(m),
           "--parallel_workers", str(workers)]
    title = "MLServer" + ("" if workers == 1 else f" ({workers} workers)")
    versions = f"mlserver {pinned('mlserver', 'mlserver')}, onnxruntime {pinned('mlserver', 'onnxruntime')}"
    return title, cmd, g, r, "kserve-grpc", versions


def spec_pytriton(a, _model_dir, _run_dir, max_batch=0):
    g, r, m = free_ports(3)
    cmd = [venv_python("pytriton"), os.path.join(HERE, "servers", "pytriton_server.py"), "--model_path",
           a.model_path, "--model_name", a.model, "--http_port", str(r), "--grpc_port", str(g),
           "--metrics_port", str(m), "--max_batch_size", str(max_batch)]
    title = "PyTriton" + (f" (dynamic batching, max {max_batch})" if max_batch else "")
    versions = (f"nvidia-pytriton {pinned('pytriton', 'nvidia-pytriton')}, "
                f"onnxruntime {pinned('pytriton', 'onnxruntime')}")
    return title, cmd, g, r, "kserve-grpc", versions


SPECS = {
    "visionserve": spec_visionserve,
    "visionserve-tfs": lambda a, d, r: spec_visionserve(a, d, r, "tfs"),
    "visionserve-1i": lambda a, d, r: spec_visionserve(a, d, r, None, ["--model_instances=1"]),
    "kserve": spec_kserve,
    "kserve-thread": lambda a, d, r: spec_kserve(a, d, r, "thread"),
    "mlserver": spec_mlserver,
    "mlserver-w0": lambda a, d, r: spec_mlserver(a, d, r, 0),
    "pytriton": spec_pytriton,
    "pytriton-batch": lambda a, d, r: spec_pytriton(a, d, r, 8),
}


# ------------------------------------------------------------------------------ lifecycle
def port_open(port):
    with socket.socket() as s:
        s.settimeout(0.2)
        return s.connect_ex(("127.0.0.1", port)) == 0


def cold_start(proc, t_start, targets, timeout):
    """Polls until the first successful gRPC answer. `targets` are tried in order: a target that
    answers UNIMPLEMENTED is dropped for the next (visionserve without the KServe gRPC API)."""
    t_port = None
    port = int(targets[0].address.rsplit(":", 1)[1])
    last = ""
    while time.time() - t_start < timeout:
        if proc.poll() is not None:
            raise RuntimeError(f"server exited with {proc.returncode} before answering")
        if t_port is None and port_open(port):
            t_port = time.time()
        if t_port is not None:
            try:
                raw = targets[0].grpc_call()(targets[0].body, timeout=5)
                t_ok = time.time()
                return targets[0], raw, {"port_open_s": round(t_port - t_start, 2),
                                         "first_answer_s": round(t_ok - t_start, 2)}
            except grpc.RpcError as e:
                last = f"{e.code()}: {e.details()}"[:200]
                if e.code() == grpc.StatusCode.UNIMPLEMENTED and len(targets) > 1:
                    targets[0].close()
                    targets = targets[1:]
                    continue
        time.sleep(0.05)
    raise RuntimeError(f"no answer within {timeout}s (last error: {last})")


def stop(proc, grace):
    try:
        os.killpg(proc.pid, signal.SIGTERM)
    except ProcessLookupError:
        return
    try:
        proc.wait(grace)
    except subprocess.TimeoutExpired:
        pass
    try:  # children left in the group (workers, tritonserver)
        os.killpg(proc.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
    proc.wait()


def run_floor(a, when, ref_out=None, seconds=None, quiet=False):
    cmd = [sys.executable, os.path.join(HERE, "floor.py"), "--model", a.model_path, "--tensor", a.tensor,
           "--seconds", str(a.floor_seconds if seconds is None else seconds)]
    if ref_out:
        cmd += ["--ref-out", ref_out]
    # its own session, as every server: with sched_autogroup each session gets one share of the CPU
    p = subprocess.run(cmd, capture_output=True, text=True, start_new_session=True)
    if p.returncode != 0:
        return {"when": when, "error": p.stderr.strip()[-300:]}
    r = json.loads(p.stdout.strip().splitlines()[-1])
    r["when"] = when
    if quiet:
        return r
    print(f"  floor {when}: p50 {r['p50_ms']} ms, p99 {r['p99_ms']} ms, {r['cpu_ms_per_run']} ms CPU/run, "
          f"load {r['loadavg_1m'][0]}", flush=True)
    return r


def run_ceiling(a, when, processes=2):
    """The measured ceiling: `processes` floors at once, each in its own process and session (one
    session per core on this box), timed loops started together; their runs per second summed. It
    is what the cores give when nothing but onnxruntime runs on them (shared caches and memory
    bandwidth included), the throughput a server at high concurrency is held against."""
    start_at = time.time() + 3.0  # after every process has loaded its session
    cmd = [sys.executable, os.path.join(HERE, "floor.py"), "--model", a.model_path, "--tensor", a.tensor,
           "--seconds", str(a.floor_seconds), "--start-at", str(start_at)]
    procs = [subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True)
             for _ in range(processes)]
    outs = [p.communicate() for p in procs]
    if any(p.returncode != 0 for p in procs):
        return {"when": when, "error": " ".join(err.strip()[-200:] for _, err in outs)}
    each = [json.loads(out.strip().splitlines()[-1]) for out, _ in outs]
    r = {"when": when, "processes": processes, "runs_per_s": round(sum(e["runs_per_s"] for e in each), 2),
         "p50_ms": [e["p50_ms"] for e in each], "cpu_ms_per_run": [e["cpu_ms_per_run"] for e in each],
         "loadavg_1m": each[0]["loadavg_1m"]}
    print(f"  ceiling {when} ({processes} processes): {r['runs_per_s']} runs/s, p50 {r['p50_ms']} ms", flush=True)
    return r


def wait_for_load(a):
    """With --max-load: wait (at most --max-load-wait s) until the 1-minute load average is at most it."""
    if a.max_load is None:
        return
    end = time.time() + a.max_load_wait
    while loadgen.loadavg()[0] > a.max_load and time.time() < end:
        time.sleep(5)


def bench_server(a, name, x, ref, model_dir, run_dir):
    title, cmd, gport, rport, kind, versions = SPECS[name](a, model_dir, run_dir)
    res = {"name": name, "title": title, "versions": versions, "cmd": cmd, "loadavg_before": loadgen.loadavg()[0]}
    kinds = {"auto": ["kserve-grpc", "tfs-grpc"], "kserve": ["kserve-grpc"], "tfs": ["tfs-grpc"]}.get(kind, [kind])
    targets = [loadgen.Target(k, f"127.0.0.1:{gport}", a.model, "input", x) for k in kinds]
    print(f"[{name}] starting: {' '.join(cmd)}", flush=True)
    log = open(os.path.join(a.out, f"{name}.log"), "w")
    t0 = time.time()
    # Every server gets the glibc malloc settings visionserve's launchers and image set
    # (packages/cli/src/malloc-tuning.ts; glibc >= 2.35 only); values already in the environment win.
    env = dict(os.environ)
    libc = (os.confstr("CS_GNU_LIBC_VERSION") or "").split()
    if len(libc) == 2 and libc[0] == "glibc" and tuple(map(int, libc[1].split(".")[:2])) >= (2, 35):
        env = {"MALLOC_MMAP_THRESHOLD_": "134217728", "MALLOC_TRIM_THRESHOLD_": "268435456", **env}
    proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, cwd=ROOT, start_new_session=True, env=env)
    try:
        target, raw, res["cold_start"] = cold_start(proc, t0, targets, a.cold_timeout)
        res["grpc_kind"] = target.kind
        out = target.decode(raw)
        res["answer"] = {"grpc_argmax": int(out.argmax()),
                         "grpc_max_abs_diff": float(np.abs(out - ref).max()) if out.shape == ref.shape else None}
        print(f"[{name}] first answer after {res['cold_start']['first_answer_s']} s over {target.kind}, "
              f"argmax {res['answer']['grpc_argmax']} (floor {int(ref.argmax())})", flush=True)
        time.sleep(1)
        if a.server_warmup > 0:
            # Steady state before the timed blocks: V8 compiles visionserve's hot paths over about
            # its first minute of traffic (the Python servers have no such phase).
            loadgen.run_phase(target.caller_factory(), 1, a.server_warmup)
        levels = [1, a.high_concurrency] + [c for c in a.sweep if c not in (1, a.high_concurrency)]
        phases = loadgen.drive(target, levels, a.seconds, a.warmup, proc.pid)
        try:
            res["paired_c1"] = paired_c1(a, target)
        except Exception as e:  # noqa: BLE001 - the blocks above are kept
            res["paired_c1"] = [{"error": str(e)}]
        target.close()
        if a.rest:
            rest = loadgen.Target("rest-json", f"127.0.0.1:{rport}", a.model, "input", x)
            rout = rest.decode(rest.caller_factory()()())
            res["answer"]["rest_argmax"] = int(rout.argmax())
            phases += loadgen.drive(rest, [1], a.seconds, max(a.warmup, a.rest_warmup), proc.pid)
        for p in phases:
            print(f"[{name}] {p['kind']} c={p['concurrency']}: {p['rps']} req/s, "
                  f"p50 {p['p50_ms']} p99 {p['p99_ms']} ms, "
                  f"server {p.get('server_cpu_ms_per_req')} ms CPU/req, {p['errors']} errors", flush=True)
        res["phases"] = phases
        res["rss_mb"] = loadgen.tree_rss_mb(proc.pid)
    except Exception as e:  # noqa: BLE001 - one failing server must not end the comparison
        res["error"] = str(e)
        print(f"[{name}] FAILED: {e}", flush=True)
    finally:
        for t in targets:
            t.close()
        stop(proc, a.stop_grace)
        log.close()
    res["loadavg_after"] = loadgen.loadavg()[0]
    return res


def paired_c1(a, target):
    """gRPC c=1 against the floor, interleaved: --paired-rounds rounds of a floor (its own process,
    the server idle), then 1 s of untimed c=1 traffic and --paired-seconds timed. The machine's speed
    drifts (on the 2-core VMs here the floor moved from 5.8 to 9.2 ms within one run); a floor taken
    seconds before each block cancels that drift, where the floors minutes apart around a server
    cannot. Returns one {floor p50/p99, server p50/p99} per round."""
    rounds = []
    factory = target.caller_factory()
    for i in range(a.paired_rounds):
        f = run_floor(a, f"paired {i + 1}", seconds=a.paired_seconds, quiet=True)
        if "error" in f:
            rounds.append({"error": f["error"]})
            continue
        loadgen.run_phase(factory, 1, 1.0)
        p = loadgen.run_phase(factory, 1, a.paired_seconds)
        rounds.append({"floor_p50_ms": f["p50_ms"], "floor_p99_ms": f["p99_ms"],
                       "p50_ms": p["p50_ms"], "p99_ms": p["p99_ms"], "errors": p["errors"]})
        print(f"  paired round {i + 1}: floor p50 {f['p50_ms']} p99 {f['p99_ms']} ms, "
              f"gRPC c=1 p50 {p['p50_ms']} p99 {p['p99_ms']} ms", flush=True)
    return rounds


def cpu_description():
    model, family, flags = "?", "", set()
    with open("/proc/cpuinfo") as f:
        for line in f:
            if line.startswith("model name") and model == "?":
                model = line.split(":", 1)[1].strip()
            elif line.startswith("cpu family") and not family:
                family = " family " + line.split(":", 1)[1].strip()
            elif line.startswith("flags") and not flags:
                flags = set(line.split(":", 1)[1].split())
    simd = [f for f in ("avx2", "avx512f", "avx512_vnni", "avx_vnni") if f in flags]
    return model + family, " ".join(simd) or "no AVX2"


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--servers", default=DEFAULT_SERVERS, help=f"comma list of {', '.join(SPECS)}")
    ap.add_argument("--model-path", required=True)
    ap.add_argument("--model", default="mobilenet", help="model name on every server")
    ap.add_argument("--tensor", required=True, help="prefix of the request tensor (request-tensor.mjs)")
    ap.add_argument("--out", required=True)
    ap.add_argument("--seconds", type=float, default=12, help="timed seconds per block")
    ap.add_argument("--warmup", type=float, default=2, help="untimed seconds before each block")
    ap.add_argument("--floor-seconds", type=float, default=4)
    ap.add_argument("--server-warmup", type=float, default=30,
                    help="untimed seconds of gRPC c=1 traffic after a server's first answer, before its blocks")
    ap.add_argument("--rest-warmup", type=float, default=10, help="untimed seconds before the REST block")
    ap.add_argument("--paired-rounds", type=int, default=4,
                    help="rounds of floor then gRPC c=1 after the other blocks (0: none); see paired_c1")
    ap.add_argument("--paired-seconds", type=float, default=3, help="timed seconds of each paired floor and block")
    ap.add_argument("--high-concurrency", type=int, default=8)
    ap.add_argument("--sweep", default="4,16",
                    help="more gRPC concurrencies, each a block after c=1 and c=--high-concurrency ('' for none)")
    ap.add_argument("--no-rest", dest="rest", action="store_false")
    ap.add_argument("--cold-timeout", type=float, default=180)
    ap.add_argument("--stop-grace", type=float, default=20)
    ap.add_argument("--max-load", type=float, help="before each floor + server, wait for this 1-min load average")
    ap.add_argument("--max-load-wait", type=float, default=120, help="seconds to wait for --max-load at most")
    ap.add_argument("--visionserve-grpc", choices=["auto", "kserve", "tfs"], default="auto",
                    help="auto: KServe ModelInfer if the server has it, else TF Serving Predict")
    ap.add_argument("--visionserve-args", default="", help="extra `visionserve serve` flags")
    a = ap.parse_args()
    a.model_path = os.path.abspath(a.model_path)
    a.sweep = [int(c) for c in a.sweep.split(",") if c.strip()]
    names = [n for n in a.servers.split(",") if n]
    unknown = [n for n in names if n not in SPECS]
    if unknown:
        raise SystemExit(f"unknown servers {unknown}; known: {', '.join(SPECS)}")
    os.makedirs(a.out, exist_ok=True)

    x, meta = loadgen.load_tensor(a.tensor)
    model_dir = os.path.join(a.out, "visionserve-model")  # a version directory for visionserve
    if any(n.startswith("visionserve") for n in names):
        os.makedirs(os.path.join(model_dir, "1"), exist_ok=True)
        shutil.copyfile(a.model_path, os.path.join(model_dir, "1", "model.onnx"))
    cpu, simd = cpu_description()
    results = {
        "started": datetime.datetime.now().isoformat(timespec="seconds"),
        "host": {"nproc": os.cpu_count(), "cpu": cpu, "cpu_flags": simd, "loadavg_start": loadgen.loadavg(),
                 "python": platform.python_version(), "grpcio_client": grpc.__version__},
        "settings": {"seconds": a.seconds, "warmup": a.warmup, "floor_seconds": a.floor_seconds,
                     "high_concurrency": a.high_concurrency, "sweep": a.sweep,
                     "server_warmup": a.server_warmup, "rest_warmup": a.rest_warmup,
                     "paired_rounds": a.paired_rounds, "paired_seconds": a.paired_seconds, "model": os.path.basename(a.model_path)},
        "request": dict(meta, grpc_bytes={k: len(loadgen.Target(k, "x:1", a.model, "input", x).body)
                                          for k in loadgen.GRPC_KINDS},
                        rest_json_bytes=len(loadgen.rest_body("input", x))),
        "floors": [],
        "ceilings": [],
        "servers": [],
    }
    ref_path = os.path.join(a.out, "floor-output.npy")
    wait_for_load(a)
    results["ceilings"].append(run_ceiling(a, "before the first server"))
    for i, name in enumerate(names):
        wait_for_load(a)
        results["floors"].append(run_floor(a, f"before {name}", ref_path if i == 0 else None))
        ref = np.load(ref_path).ravel()
        results["servers"].append(bench_server(a, name, x, ref, model_dir, a.out))
        time.sleep(1)
    results["floors"].append(run_floor(a, "after the last server"))
    results["ceilings"].append(run_ceiling(a, "after the last server"))
    results["host"]["loadavg_end"] = loadgen.loadavg()
    with open(os.path.join(a.out, "results.json"), "w") as f:
        json.dump(results, f, indent=1)
    md = report.markdown(results)
    with open(os.path.join(a.out, "results.md"), "w") as f:
        f.write(md)
    print("\n" + md)
    return 1 if any(s.get("error") for s in results["servers"]) else 0


if __name__ == "__main__":
    sys.exit(main())
