#!/usr/bin/env python3
"""KServe Python model server (kserve.ModelServer) serving one ONNX model with onnxruntime.

  .venv-kserve/bin/python servers/kserve_server.py --model_path M.onnx --model_name mobilenet \
      --http_port 18080 --grpc_port 18081 --enable_latency_logging false [--predict_mode sync|thread]

Every kserve.ModelServer flag is accepted: kserve parses sys.argv at import time
(kserve.model_server.parser), so ours are added through a parent parser and unknown flags are
ignored silently. Both listeners are bound to 127.0.0.1 (bind_loopback). Defaults that matter:
--workers 1 (uvicorn REST processes; gRPC always stays in the main process), --max_threads 4,
--enable_latency_logging True (one log line per request).

--predict_mode sync   (default) a plain `def predict`, the pattern of KServe's custom-model docs;
                      KServe calls it on the asyncio event loop, so inference is serialised.
--predict_mode thread `async def predict` that runs session.run in a pool of --ort_pool threads
                      (onnxruntime releases the GIL), so two inferences can overlap.
"""
import argparse
import asyncio
import concurrent.futures
import os
import time

T0 = time.time()

from kserve import InferOutput, InferRequest, InferResponse, Model, ModelServer, model_server  # noqa: E402
import numpy as np  # noqa: E402
import onnxruntime as ort  # noqa: E402


def bind_loopback():
    """kserve 0.21 has no bind-address flag (REST on 0.0.0.0, gRPC on [::]): bind both to loopback."""
    import uvicorn
    from grpc.aio import _server

    config_init = uvicorn.Config.__init__

    def loopback_config(self, *args, **kwargs):
        if kwargs.get("host") == "0.0.0.0":
            kwargs["host"] = "127.0.0.1"
        config_init(self, *args, **kwargs)

    add_port = _server.Server.add_insecure_port
    uvicorn.Config.__init__ = loopback_config
    _server.Server.add_insecure_port = lambda self, addr: add_port(self, addr.replace("[::]:", "127.0.0.1:", 1))


def session_options(intra):
    so = ort.SessionOptions()
    so.intra_op_num_threads = intra
    so.inter_op_num_threads = 1
    so.add_session_config_entry("session.intra_op.allow_spinning", "0")
    return so


class OnnxModel(Model):
    def __init__(self, name, path, intra_threads=1, pool=2):
        super().__init__(name)
        self.path, self.intra_threads = path, intra_threads
        self.pool = concurrent.futures.ThreadPoolExecutor(max_workers=pool)
        self.load()

    def load(self) -> bool:
        self.session = ort.InferenceSession(self.path, session_options(self.intra_threads),
                                            providers=["CPUExecutionProvider"])
        self.outputs = [o.name for o in self.session.get_outputs()]
        self.ready = True
        return self.ready

    def _feeds(self, payload: InferRequest):
        return {i.name: i.as_numpy() for i in payload.inputs}

    def _response(self, payload: InferRequest, results):
        outs = []
        for name, arr in zip(self.outputs, results):
            o = InferOutput(name=name, shape=list(arr.shape), datatype="FP32")
            # raw_output_contents over gRPC, a JSON "data" list over REST
            o.set_data_from_numpy(np.ascontiguousarray(arr, dtype=np.float32), binary_data=bool(payload.from_grpc))
            outs.append(o)
        # response_id must be a str; REST requests without "id" have payload.id None
        return InferResponse(response_id=payload.id or "", model_name=self.name, infer_outputs=outs,
                             from_grpc=payload.from_grpc)

    def _run(self, feeds):
        return self.session.run(self.outputs, feeds)


class SyncOnnxModel(OnnxModel):
    def predict(self, payload: InferRequest, headers=None, response_headers=None) -> InferResponse:
        return self._response(payload, self._run(self._feeds(payload)))


class ThreadOnnxModel(OnnxModel):
    async def predict(self, payload: InferRequest, headers=None, response_headers=None) -> InferResponse:
        res = await asyncio.get_running_loop().run_in_executor(self.pool, self._run, self._feeds(payload))
        return self._response(payload, res)


if __name__ == "__main__":
    p = argparse.ArgumentParser(parents=[model_server.parser])
    p.add_argument("--model_path", required=True)
    p.add_argument("--intra_op_threads", type=int, default=1)
    p.add_argument("--predict_mode", choices=["sync", "thread"], default="sync")
    p.add_argument("--ort_pool", type=int, default=2, help="executor threads for --predict_mode thread")
    a, _ = p.parse_known_args()
    cls = SyncOnnxModel if a.predict_mode == "sync" else ThreadOnnxModel
    bind_loopback()
    m = cls(a.model_name, a.model_path, a.intra_op_threads, a.ort_pool)
    print(f"[kserve_server] ort {ort.__version__} pid {os.getpid()} mode {a.predict_mode}; "
          f"model loaded {time.time() - T0:.2f}s after start", flush=True)
    ModelServer().start([m])
