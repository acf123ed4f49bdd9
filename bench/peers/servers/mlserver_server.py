#!/usr/bin/env python3
"""Launches MLServer for one ONNX model: writes settings.json and <model>/model-settings.json into
--run_dir and exec()s `mlserver start <run_dir>` (same pid, so cold start and /proc CPU see the
real server and its worker processes).

  .venv-mlserver/bin/python servers/mlserver_server.py --model_path M.onnx --model_name mobilenet \
      --run_dir /tmp/mlserver-run --http_port 28080 --grpc_port 28081 --metrics_port 28082

MLServer defaults kept: parallel_workers 1 (inference in one worker process; requests cross a
multiprocessing queue). Changed: debug False (MLServer's default is True), gRPC message limit
64 MiB, metrics/environments dirs inside --run_dir (default: the cwd).
"""
import argparse
import json
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
ap = argparse.ArgumentParser()
ap.add_argument("--model_path", required=True)
ap.add_argument("--model_name", default="mobilenet")
ap.add_argument("--run_dir", required=True)
ap.add_argument("--http_port", type=int, default=28080)
ap.add_argument("--grpc_port", type=int, default=28081)
ap.add_argument("--metrics_port", type=int, default=28082)
ap.add_argument("--parallel_workers", type=int, default=1,
                help="inference worker processes; 0 = infer in the main process")
ap.add_argument("--intra_op_threads", type=int, default=1)
a = ap.parse_args()

mdir = os.path.join(a.run_dir, a.model_name)
os.makedirs(mdir, exist_ok=True)
settings = {
    "debug": False,
    "parallel_workers": a.parallel_workers,
    "http_port": a.http_port,
    "grpc_port": a.grpc_port,
    "metrics_port": a.metrics_port,
    "host": "127.0.0.1",
    "grpc_max_message_length": 64 * 1024 * 1024,
    "load_models_at_startup": True,
    "metrics_dir": os.path.join(a.run_dir, ".metrics"),
    "environments_dir": os.path.join(a.run_dir, ".envs"),
}
model_settings = {
    "name": a.model_name,
    "implementation": "mlserver_onnx_runtime.OnnxRuntimeModel",
    "parameters": {"uri": os.path.abspath(a.model_path), "extra": {"intra_op_num_threads": a.intra_op_threads}},
}
with open(os.path.join(a.run_dir, "settings.json"), "w") as f:
    json.dump(settings, f, indent=1)
with open(os.path.join(mdir, "model-settings.json"), "w") as f:
    json.dump(model_settings, f, indent=1)

# the runtime module lives next to this file; the worker processes inherit PYTHONPATH
os.environ["PYTHONPATH"] = HERE + os.pathsep + os.environ.get("PYTHONPATH", "")
os.chdir(a.run_dir)
mlserver = os.path.join(os.path.dirname(sys.executable), "mlserver")
os.execv(mlserver, [mlserver, "start", a.run_dir])
