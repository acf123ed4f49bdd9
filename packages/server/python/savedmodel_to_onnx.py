#!/usr/bin/env python3
"""visionserve's TensorFlow SavedModel -> ONNX converter (run by the server in a child process).

    python savedmodel_to_onnx.py --saved-model VERSION_DIR --out-dir OUT [--tag serve] [--opset 15]
    python savedmodel_to_onnx.py --check

Converts every SignatureDef of the MetaGraph tagged `--tag` with tf2onnx, one ONNX file per
signature (identical results share one file), and writes OUT/manifest.json describing each
signature: method name, declared inputs/outputs (dtype, shape; None = unknown rank), the ONNX
file, and for signatures that read serialized tf.Examples the features the server must parse.

tf2onnx keeps a signature's input/output keys as the ONNX names. It does not fail on TensorFlow
ops without an ONNX equivalent: it leaves them in the graph and exits 0. Every node (nested
graphs included) is therefore checked against the ONNX operator schemas, and such ops are
reported by name. Signatures whose only such op is ParseExample(V2) over dense features are
converted again with the graph cut after it (the server then parses the tf.Examples itself).

stdout: one JSON line ({"ok": true} or {"ok": false, "error": ...}); stderr: a human log.
Exit codes: 0 manifest written (some signatures may be unsupported; see it), 1 fatal error,
3 the converter environment is incomplete (tensorflow, tf2onnx or onnx cannot be imported).
"""
import argparse
import collections
import hashlib
import json
import logging
import os
import sys
import time
import traceback

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
os.environ.setdefault("CUDA_VISIBLE_DEVICES", "")

FORMAT = 1
DTYPES = {
    "DT_FLOAT": "float32", "DT_DOUBLE": "float64", "DT_HALF": "float16", "DT_BFLOAT16": "bfloat16",
    "DT_INT8": "int8", "DT_INT16": "int16", "DT_INT32": "int32", "DT_INT64": "int64",
    "DT_UINT8": "uint8", "DT_UINT16": "uint16", "DT_UINT32": "uint32", "DT_UINT64": "uint64",
    "DT_BOOL": "bool", "DT_STRING": "string",
}
FEATURE_DTYPES = {"float32": "float32", "int64": "int64", "string": "string"}
STANDARD_DOMAINS = ("", "ai.onnx", "ai.onnx.ml")
PARSE_OPS = {"ParseExampleV2", "ParseExample"}


def log(message):
    print(f"[visionserve convert] {message}", file=sys.stderr, flush=True)


def reply(obj, code):
    print(json.dumps(obj), flush=True)
    return code


def import_env():
    """(tf, tf2onnx, onnx) or raises ImportError."""
    import numpy as np
    if not hasattr(np, "product"):
        np.product = np.prod  # tf2onnx 1.17's large-model path still calls np.product (gone in NumPy 2)
    import onnx
    import tensorflow as tf
    import tf2onnx
    return tf, tf2onnx, onnx


class UnsupportedOps(logging.Handler):
    """tf2onnx only logs `Tensorflow op [<node>: <Op>] is not supported`; collect the op names."""

    def __init__(self):
        super().__init__(logging.ERROR)
        self.ops = collections.Counter()

    def emit(self, record):
        msg = record.getMessage()
        if msg.startswith("Tensorflow op [") and "is not supported" in msg:
            self.ops[msg.split("[", 1)[1].split("]", 1)[0].split(": ")[-1]] += 1


def nodes(graph, onnx):
    for node in graph.node:
        yield node
        for attr in node.attribute:
            if attr.type == onnx.AttributeProto.GRAPH:
                yield from nodes(attr.g, onnx)
            elif attr.type == onnx.AttributeProto.GRAPHS:
                for g in attr.graphs:
                    yield from nodes(g, onnx)


def ops_without_schema(model, onnx):
    """Op types with no ONNX schema at the model's opsets (tf2onnx leaves TF ops it cannot map
    in the default domain under their TF names, also inside Loop/If bodies)."""
    opsets = {o.domain: o.version for o in model.opset_import}
    bad = collections.Counter()
    for node in nodes(model.graph, onnx):
        if node.domain in STANDARD_DOMAINS:
            version = opsets.get(node.domain, opsets.get("", 0))
            try:
                onnx.defs.get_schema(node.op_type, version, node.domain)
            except Exception:  # onnx.defs.SchemaError
                bad[node.op_type] += 1
        elif node.domain == "ai.onnx.converters.tensorflow":
            bad[node.op_type] += 1
    return bad


def read_signature_defs(path, tag, tf):
    """SignatureDefs of the MetaGraph whose tag set is {tag} (else the first holding tag)."""
    from tensorflow.core.protobuf import saved_model_pb2
    saved = saved_model_pb2.SavedModel()
    pb = os.path.join(path, "saved_model.pb")
    if os.path.exists(pb):
        with open(pb, "rb") as f:
            saved.ParseFromString(f.read())
    else:
        from google.protobuf import text_format
        with open(os.path.join(path, "saved_model.pbtxt"), encoding="utf-8") as f:
            text_format.Parse(f.read(), saved)
    graphs = [m for m in saved.meta_graphs if set(m.meta_info_def.tags) == {tag}] or [
        m for m in saved.meta_graphs if tag in m.meta_info_def.tags]
    if not graphs:
        tags = [sorted(m.meta_info_def.tags) for m in saved.meta_graphs]
        raise LookupError(f"no MetaGraph tagged {tag!r} (tag sets: {tags})")
    return graphs[0].signature_def, graphs[0].meta_info_def.tensorflow_version


def tensor_info(info, tf):
    from tensorflow.core.framework import types_pb2
    name = types_pb2.DataType.Name(info.dtype)
    if info.WhichOneof("encoding") != "name":
        raise ValueError(f"sparse or composite tensors ({info.WhichOneof('encoding')}) are not supported")
    if name not in DTYPES:
        raise ValueError(f"dtype {name} is not supported")
    shape = None if info.tensor_shape.unknown_rank else [int(d.size) for d in info.tensor_shape.dim]
    return {"dtype": DTYPES[name], "shape": shape, "graphName": info.name}


def convert(tf2onnx, saved_model, tag, signature, opset, input_names=None, output_names=None, rename=None):
    """tf2onnx's own command-line path (tf_loader.from_saved_model + _convert_common), with
    large-model output (external data; needed beyond 2 GB and about half the peak memory)."""
    from tf2onnx import convert as tfconvert, tf_loader
    graph_def, inputs, outputs, tables, to_rename = tf_loader.from_saved_model(
        saved_model, input_names, output_names, tag=[tag], signatures=[signature], large_model=True,
        return_initialized_tables=True, return_tensors_to_rename=True)
    if rename:
        to_rename.update(rename)
    return tfconvert._convert_common(  # pylint: disable=protected-access
        graph_def, name=saved_model, continue_on_error=False, opset=opset, large_model=True,
        input_names=inputs, output_names=outputs, tensors_to_rename=to_rename, initialized_tables=tables)


def serialize(model, external):
    """(model bytes, {file name: bytes}) with external tensors pointing at files next to the model."""
    return model.SerializeToString(), dict(external.name_to_tensor_data) if external else {}


def write_model(out_dir, files_by_hash, key, model_bytes, tensors):
    """Writes <key>/model.onnx (+ tensor files); identical conversions share one directory."""
    digest = hashlib.sha256(model_bytes)
    for name in sorted(tensors):
        digest.update(name.encode())
        digest.update(tensors[name])
    h = digest.hexdigest()
    if h in files_by_hash:
        return files_by_hash[h]
    rel = f"{key}/model.onnx"
    directory = os.path.join(out_dir, key)
    os.makedirs(directory, exist_ok=True)
    with open(os.path.join(directory, "model.onnx"), "wb") as f:
        f.write(model_bytes)
    for name, data in tensors.items():
        with open(os.path.join(directory, name), "wb") as f:
            f.write(data)
    files_by_hash[h] = rel
    return rel


def onnx_io(model, onnx):
    def one(value):
        t = value.type.tensor_type
        return onnx.TensorProto.DataType.Name(t.elem_type)
    return ({v.name: one(v) for v in model.graph.input}, {v.name: one(v) for v in model.graph.output})


def parse_example_cut(tf, saved_model, tag, signature, declared):
    """For a signature that feeds serialized tf.Examples into one ParseExampleV2 op with dense
    features only: (graph input names, graph output names, renames, features); else None."""
    if len(declared["inputs"]) != 1:
        return None
    (input_key, info), = declared["inputs"].items()
    if info["dtype"] != "string":
        return None
    function = tf.saved_model.load(saved_model, tags=[tag]).signatures[signature]
    ops = [op for op in function.graph.get_operations() if op.type in PARSE_OPS]
    if len(ops) != 1 or ops[0].type != "ParseExampleV2":
        return None
    op = ops[0]
    if op.get_attr("num_sparse") != 0 or op.get_attr("ragged_value_types"):
        return None
    # ParseExampleV2 inputs: serialized, names, sparse_keys, dense_keys, ragged_keys, dense_defaults...
    keys = [k.decode() for k in tf.get_static_value(op.inputs[3]).tolist()]
    dtypes = op.get_attr("Tdense")
    shapes = op.get_attr("dense_shapes")
    features, rename, inputs = [], {}, []
    for i, key in enumerate(keys):
        dtype = FEATURE_DTYPES.get(dtypes[i].name)
        shape = [int(d.size) for d in shapes[i].dim]
        if dtype is None or any(d < 0 for d in shape):
            return None
        default = tf.get_static_value(op.inputs[5 + i])
        feature = {"key": key, "dtype": dtype, "shape": shape}
        if default is not None and default.size > 0:
            values = default.reshape(-1).tolist()
            feature["defaultValue"] = [v.decode("utf-8", "replace") if isinstance(v, bytes) else v for v in values]
        features.append(feature)
        tensor = op.outputs[i].name  # dense values come first when there are no sparse features
        inputs.append(tensor)
        rename[tensor] = key
    outputs = []
    for key, out in declared["outputs"].items():
        outputs.append(out["graphName"])
        rename[out["graphName"]] = key
    return inputs, outputs, rename, {"inputKey": input_key, "features": features}


def convert_signature(env, args, out_dir, files_by_hash, name, declared, collector):
    tf, tf2onnx, onnx = env
    entry = {"methodName": declared["methodName"], "inputs": declared["inputs"], "outputs": declared["outputs"]}
    started = time.time()
    collector.ops.clear()
    model, external = convert(tf2onnx, args.saved_model, args.tag, name, args.opset)
    bad = ops_without_schema(model, onnx) + collector.ops
    cut = None
    if bad and set(bad) <= PARSE_OPS:
        cut = parse_example_cut(tf, args.saved_model, args.tag, name, declared)
        if cut is not None:
            graph_inputs, graph_outputs, rename, examples = cut
            collector.ops.clear()
            model, external = convert(tf2onnx, args.saved_model, args.tag, name, args.opset,
                                      graph_inputs, graph_outputs, rename)
            bad = ops_without_schema(model, onnx) + collector.ops
            entry["examples"] = examples
    entry["seconds"] = round(time.time() - started, 2)
    if bad:
        entry.update(status="unsupported", unsupportedOps=sorted(bad),
                     error=f"uses TensorFlow ops with no ONNX equivalent: {', '.join(sorted(bad))}")
        entry.pop("examples", None)
        return entry
    inputs, outputs = onnx_io(model, onnx)
    want_inputs = {f["key"] for f in entry["examples"]["features"]} if "examples" in entry else set(declared["inputs"])
    if set(inputs) != want_inputs or set(outputs) != set(declared["outputs"]):
        entry.update(status="error", error=(
            f"the converted graph's inputs {sorted(inputs)} / outputs {sorted(outputs)} do not match "
            f"the signature's {sorted(want_inputs)} / {sorted(declared['outputs'])}"))
        return entry
    entry.update(status="ok", onnx=write_model(out_dir, files_by_hash, f"s{len(files_by_hash)}",
                                              *serialize(model, external)))
    return entry


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--saved-model")
    parser.add_argument("--out-dir")
    parser.add_argument("--tag", default="serve")
    parser.add_argument("--opset", type=int, default=15)
    parser.add_argument("--check", action="store_true", help="print the environment's versions and exit")
    args = parser.parse_args()
    try:
        env = import_env()
    except ImportError as e:
        return reply({"ok": False, "error": f"converter environment incomplete: {e}"}, 3)
    tf, tf2onnx, onnx = env
    versions = {"python": sys.version.split()[0], "tensorflow": tf.__version__,
                "tf2onnx": tf2onnx.__version__, "onnx": onnx.__version__}
    if args.check:
        return reply({"ok": True, "versions": versions}, 0)
    if not args.saved_model or not args.out_dir:
        return reply({"ok": False, "error": "--saved-model and --out-dir are required"}, 1)
    started = time.time()
    try:
        signature_defs, written_by = read_signature_defs(args.saved_model, args.tag, tf)
    except Exception as e:  # noqa: BLE001 - reported to the server as the load error
        traceback.print_exc(file=sys.stderr)
        return reply({"ok": False, "error": f"cannot read the SavedModel: {type(e).__name__}: {e}"}, 1)
    collector = UnsupportedOps()
    logging.getLogger("tf2onnx").addHandler(collector)
    os.makedirs(args.out_dir, exist_ok=True)
    files_by_hash = {}
    signatures = {}
    for name in sorted(signature_defs):
        if name.startswith("__"):
            continue  # __saved_model_init_op and friends
        sd = signature_defs[name]
        try:
            declared = {"methodName": sd.method_name,
                        "inputs": {k: tensor_info(v, tf) for k, v in sd.inputs.items()},
                        "outputs": {k: tensor_info(v, tf) for k, v in sd.outputs.items()}}
        except ValueError as e:
            signatures[name] = {"methodName": sd.method_name, "status": "unsupported", "error": str(e)}
            continue
        try:
            signatures[name] = convert_signature(env, args, args.out_dir, files_by_hash, name, declared, collector)
        except Exception as e:  # noqa: BLE001 - one signature's failure is reported in the manifest
            traceback.print_exc(file=sys.stderr)
            signatures[name] = {**declared, "status": "error", "error": f"{type(e).__name__}: {e}"}
        log(f"{name}: {signatures[name]['status']} {signatures[name].get('error', '')}")
    manifest = {"format": FORMAT, "converter": versions, "writtenBy": written_by,
                "seconds": round(time.time() - started, 2), "signatures": signatures}
    with open(os.path.join(args.out_dir, "manifest.json"), "w", encoding="utf-8") as f:
        json.dump(manifest, f, indent=1)
    return reply({"ok": True, "signatures": {k: v["status"] for k, v in signatures.items()}}, 0)


if __name__ == "__main__":
    sys.exit(main())
