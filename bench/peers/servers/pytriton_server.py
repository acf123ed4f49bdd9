#!/usr/bin/env python3
"""PyTriton (nvidia-pytriton: a bundled CPU-capable tritonserver + Python backend) serving one ONNX
model through an onnxruntime session in the inference callable.

  .venv-pytriton/bin/python servers/pytriton_server.py --model_path M.onnx --model_name mobilenet \
      --http_port 38000 --grpc_port 38001 --metrics_port 38002 [--max_batch_size 0] [--instances 1]

--max_batch_size 0 (default here): no batching, shape [-1,3,224,224], one request per call
  (PyTriton's own default is batching with max_batch_size 4 and the dynamic batcher).
--max_batch_size N>0: the dynamic batcher (@batch) merges concurrent requests into one run.
--instances K: K inference callables (K model instances, each its own session).
"""
import argparse
import os
import signal
import sys
import sysconfig
import time

# The bundled triton_python_backend_stub links libpython3.11.so.1.0; on a pyenv Python the loader
# finds the distribution's libpython (another 3.11.x) while sys.path is this interpreter's stdlib,
# and the model fails to initialise ("'_thread.RLock' object has no attribute '_recursion_count'").
# Put this interpreter's own libpython first for tritonserver and the stub (our children).
_libdir = sysconfig.get_config_var("LIBDIR")
if _libdir and os.path.exists(os.path.join(_libdir, "libpython3.11.so.1.0")):
    os.environ["LD_LIBRARY_PATH"] = _libdir + os.pathsep + os.environ.get("LD_LIBRARY_PATH", "")

T0 = time.time()
import numpy as np  # noqa: E402
import onnxruntime as ort  # noqa: E402
from pytriton.decorators import batch  # noqa: E402
from pytriton.model_config import DynamicBatcher, ModelConfig, Tensor  # noqa: E402
from pytriton.triton import Triton, TritonConfig  # noqa: E402

ap = argparse.ArgumentParser()
ap.add_argument("--model_path", required=True)
ap.add_argument("--model_name", default="mobilenet")
ap.add_argument("--host", default="127.0.0.1")
ap.add_argument("--http_port", type=int, default=38000)
ap.add_argument("--grpc_port", type=int, default=38001)
ap.add_argument("--metrics_port", type=int, default=38002)
ap.add_argument("--max_batch_size", type=int, default=0)
ap.add_argument("--instances", type=int, default=1)
ap.add_argument("--intra_op_threads", type=int, default=1)
a = ap.parse_args()


def make_session():
    so = ort.SessionOptions()
    so.intra_op_num_threads = a.intra_op_threads
    so.inter_op_num_threads = 1
    so.add_session_config_entry("session.intra_op.allow_spinning", "0")
    return ort.InferenceSession(a.model_path, so, providers=["CPUExecutionProvider"])


def make_infer_fn():
    s = make_session()
    in_name, out_name = s.get_inputs()[0].name, s.get_outputs()[0].name

    def run(**inputs):
        return {out_name: s.run([out_name], {in_name: inputs[in_name]})[0]}

    if a.max_batch_size > 0:
        @batch
        def infer_fn(**inputs):
            return run(**inputs)
        return infer_fn

    def infer_fn(requests):  # a list of requests, each a dict name -> ndarray (full shape)
        return [run(**r) for r in requests]
    return infer_fn


if a.max_batch_size > 0:
    in_shape, out_shape = (3, 224, 224), (1000,)
    cfg = ModelConfig(batching=True, max_batch_size=a.max_batch_size, batcher=DynamicBatcher())
else:
    in_shape, out_shape = (-1, 3, 224, 224), (-1, 1000)
    cfg = ModelConfig(batching=False)

# SIGTERM -> SystemExit, so that `with Triton()` stops tritonserver and removes its workspace
# (~/.cache/pytriton/workspace_*) instead of leaking it.
signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))

fns = [make_infer_fn() for _ in range(a.instances)]
tc = TritonConfig(http_address=a.host, http_port=a.http_port, grpc_address=a.host, grpc_port=a.grpc_port,
                  metrics_port=a.metrics_port, allow_gpu_metrics=False)
with Triton(config=tc) as triton:
    triton.bind(model_name=a.model_name, infer_func=fns if len(fns) > 1 else fns[0],
                inputs=[Tensor(name="input", dtype=np.float32, shape=in_shape)],
                outputs=[Tensor(name="output", dtype=np.float32, shape=out_shape)],
                config=cfg, strict=False)
    print(f"[pytriton_server] ort {ort.__version__} bound after {time.time() - T0:.2f}s; serving", flush=True)
    triton.serve()
