"""A custom MLServer runtime (MLModel) serving one ONNX model with onnxruntime.

model-settings.json:
  {"name": "mobilenet", "implementation": "mlserver_onnx_runtime.OnnxRuntimeModel",
   "parameters": {"uri": "/abs/model.onnx", "extra": {"intra_op_num_threads": 1}}}
MLServer has no ONNX runtime on PyPI (sklearn, xgboost, lightgbm, mlflow, huggingface, catboost,
alibi-* only), hence this class.
"""
import numpy as np
import onnxruntime as ort
from mlserver import MLModel
from mlserver.codecs import NumpyCodec
from mlserver.types import InferenceRequest, InferenceResponse


class OnnxRuntimeModel(MLModel):
    async def load(self) -> bool:
        params = self.settings.parameters
        extra = (params.extra or {}) if params else {}
        so = ort.SessionOptions()
        so.intra_op_num_threads = int(extra.get("intra_op_num_threads", 1))
        so.inter_op_num_threads = 1
        so.add_session_config_entry("session.intra_op.allow_spinning", "0")
        self._session = ort.InferenceSession(params.uri, so, providers=["CPUExecutionProvider"])
        self._outputs = [o.name for o in self._session.get_outputs()]
        return True

    async def predict(self, payload: InferenceRequest) -> InferenceResponse:
        # MLServer has already unpacked gRPC raw_input_contents into a Python list
        # (mlserver.raw.inject_raw); NumpyCodec turns it into an ndarray.
        feeds = {i.name: NumpyCodec.decode_input(i).astype(np.float32, copy=False) for i in payload.inputs}
        results = self._session.run(self._outputs, feeds)
        return InferenceResponse(
            model_name=self.name,
            model_version=self.version,
            id=payload.id,
            outputs=[NumpyCodec.encode_output(n, np.asarray(r)) for n, r in zip(self._outputs, results)],
        )
