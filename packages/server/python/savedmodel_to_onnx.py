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
reported by name. A signature whose graph parses serialized tf.Examples (ParseExample,
ParseExampleV2, ParseSingleExample) is converted with the graph cut after the parse op: the
op's dense outputs become graph inputs named by their feature keys, and the manifest records
the op's features (keys, dtypes, shapes, defaults; sparse and ragged ones are recorded but not
served) so that the server parses the tf.Examples itself.

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
PARSE_OPS = {"ParseExampleV2", "ParseExample", "ParseSingleExample"}


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


def load_graph(saved_model, tag, signature):
    """tf2onnx's loader: (frozen GraphDef, input names, output names, tables, renames)."""
    from tf2onnx import tf_loader
    return tf_loader.from_saved_model(
        saved_model, None, None, tag=[tag], signatures=[signature], large_model=True,
        return_initialized_tables=True, return_tensors_to_rename=True)


def convert_graph(saved_model, loaded, opset):
    """tf2onnx's own command-line path after loading (_convert_common), with large-model output
    (external data; needed beyond 2 GB and about half the peak memory)."""
    from tf2onnx import convert as tfconvert
    graph_def, inputs, outputs, tables, to_rename = loaded
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


class NotServable(Exception):
    """A signature the converter recognises but cannot serve; the message says why."""


def graph_nodes(graph_def):
    return {node.name: node for node in graph_def.node}


def const_value(nodes, ref, tf):
    """The value of a Const tensor (through Identity nodes), or None."""
    name = ref.split(":")[0].lstrip("^")
    node = nodes.get(name)
    while node is not None and node.op == "Identity":
        node = nodes.get(node.input[0].split(":")[0])
    if node is None or node.op != "Const":
        return None
    return tf.make_ndarray(node.attr["value"].tensor)


def text(value):
    return value.decode("utf-8", "replace") if isinstance(value, bytes) else value


def parse_op_facts(node, nodes, tf):
    """(dense [(key, dtype enum, dims, default ndarray|None)], sparse keys, ragged keys, single)
    of one parse node, from its attributes and constant inputs."""
    a = node.attr
    inputs = list(node.input)
    if node.op == "ParseExampleV2":
        n_dense = len(a["Tdense"].list.type)
        keys = [text(k) for k in const_value(nodes, inputs[3], tf).reshape(-1).tolist()]
        sparse = [text(k) for k in const_value(nodes, inputs[2], tf).reshape(-1).tolist()]
        ragged = [text(k) for k in const_value(nodes, inputs[4], tf).reshape(-1).tolist()]
        defaults, single = inputs[5:5 + n_dense], False
    elif node.op == "ParseExample":
        n_sparse, n_dense = a["Nsparse"].i, a["Ndense"].i
        sparse = [text(const_value(nodes, r, tf).item()) for r in inputs[2:2 + n_sparse]]
        keys = [text(const_value(nodes, r, tf).item()) for r in inputs[2 + n_sparse:2 + n_sparse + n_dense]]
        ragged, defaults, single = [], inputs[2 + n_sparse + n_dense:], False
    else:  # ParseSingleExample
        keys = [text(k) for k in a["dense_keys"].list.s]
        sparse = [text(k) for k in a["sparse_keys"].list.s]
        ragged, defaults, single = [], inputs[1:], True
    values = constant_values(nodes, defaults, tf)
    dense = []
    for i, key in enumerate(keys):
        dims = [int(d.size) for d in a["dense_shapes"].list.shape[i].dim]
        dense.append((key, a["Tdense"].list.type[i], dims, values[i]))
    return dense, sparse, ragged, single


def constant_values(nodes, refs, tf):
    """Values of tensors computed from constants alone (a default is often a Const reshaped);
    None for those that need a feed."""
    values = [const_value(nodes, r, tf) for r in refs]
    missing = [i for i, v in enumerate(values) if v is None]
    if not missing:
        return values
    graph_def = tf.compat.v1.GraphDef()
    graph_def.node.extend(nodes.values())
    with tf.Graph().as_default() as graph:
        tf.import_graph_def(graph_def, name="")
        with tf.compat.v1.Session(graph=graph) as session:
            for i in missing:
                try:
                    values[i] = session.run(refs[i] if ":" in refs[i] else refs[i] + ":0")
                except Exception:  # noqa: BLE001 - needs a feed: no default
                    values[i] = None
    return values


def feature_spec(key, dtype_enum, dims, default, tf):
    from tensorflow.core.framework import types_pb2
    dtype = FEATURE_DTYPES.get(DTYPES.get(types_pb2.DataType.Name(dtype_enum), ""))
    if dtype is None:
        raise NotServable(f"tf.Example feature {key!r} has dtype {types_pb2.DataType.Name(dtype_enum)}")
    if any(d < 0 for d in dims):
        raise NotServable(f"tf.Example feature {key!r} is a variable-length dense feature (shape {dims})")
    feature = {"key": key, "dtype": dtype, "shape": dims}
    if default is not None and default.size > 0:
        feature["defaultValue"] = [text(v) for v in default.reshape(-1).tolist()]
    return feature


def cut_after_parse(loaded, declared, tf):
    """For a signature whose graph parses its one string input as tf.Examples: the loaded
    graph with the parse op's dense outputs replaced by placeholders named by feature key,
    and the manifest's `examples`. None when the graph has no parse op; NotServable when it
    has one the server cannot feed (several, sparse or ragged features in use, ...)."""
    graph_def, inputs, outputs, tables, to_rename = loaded
    parse = [n for n in graph_def.node if n.op in PARSE_OPS]
    strings = [k for k, v in declared["inputs"].items() if v["dtype"] == "string"]
    if not parse or not strings:
        return None  # e.g. a signature fed from the parse op's outputs: tf2onnx cuts there itself
    if len(parse) > 1 or len(declared["inputs"]) != 1 or len(strings) != 1:
        raise NotServable(f"parses tf.Examples with {len(parse)} ops over {len(declared['inputs'])} inputs "
                          "(one op over one string input is supported)")
    node, nodes = parse[0], graph_nodes(graph_def)
    dense, sparse, ragged, single = parse_op_facts(node, nodes, tf)
    single = single or declared["inputs"][strings[0]]["shape"] == []  # a scalar parses unbatched
    first_dense = 3 * len(sparse)
    features, rename, placeholders = [], {}, {}
    for i, (key, dtype_enum, dims, default) in enumerate(dense):
        features.append(feature_spec(key, dtype_enum, dims, default, tf))
        placeholders[first_dense + i] = (f"visionserve_feature_{i}", dtype_enum, ([] if single else [-1]) + dims)
        rename[f"visionserve_feature_{i}:0"] = key
    clash = {f["key"] for f in features} & set(declared["outputs"])
    if clash:
        raise NotServable(f"tf.Example feature keys {sorted(clash)} are also output keys")
    used_other = rewrite_parse_outputs(graph_def, node.name, placeholders)
    if used_other:
        kinds = ", ".join(sparse + ragged) or "non-dense outputs"
        raise NotServable(f"reads sparse or ragged tf.Example features ({kinds}), which are not supported")
    graph_def.node.remove(node)
    add_placeholders(graph_def, placeholders.values(), tf)
    to_rename = {**(to_rename or {}), **rename}
    new_inputs = [f"{name}:0" for name, _, _ in placeholders.values()]
    examples = {"inputKey": strings[0], "op": node.op, "features": features}
    if sparse or ragged:
        examples.update(sparseKeys=sparse, raggedKeys=ragged)
    return (graph_def, new_inputs, outputs, tables, to_rename), examples


def rewrite_parse_outputs(graph_def, parse_name, placeholders):
    """Points every use of the parse op's dense outputs at their placeholders; True when some
    node still reads another output of it (sparse or ragged values)."""
    other = False
    for n in graph_def.node:
        for j, ref in enumerate(n.input):
            name, _, index = ref.partition(":")
            if name != parse_name:
                continue
            k = int(index or 0)
            if k in placeholders:
                n.input[j] = placeholders[k][0]
            else:
                other = True
    return other


def add_placeholders(graph_def, specs, tf):
    for name, dtype_enum, dims in specs:
        node = graph_def.node.add(name=name, op="Placeholder")
        node.attr["dtype"].type = dtype_enum
        node.attr["shape"].shape.CopyFrom(tf.TensorShape([None if d < 0 else d for d in dims]).as_proto())


def isolate_outputs(loaded, declared, tf):
    """Each output through an Identity of its own: tf2onnx loses an output that also feeds
    another output through an op it rewrites (a canned estimator's class_ids -> AsString)."""
    graph_def, inputs, outputs, tables, to_rename = loaded
    to_rename = dict(to_rename or {})
    if any(to_rename.get(ref) not in declared["outputs"] for ref in outputs):
        return loaded
    isolated = []
    for i, ref in enumerate(outputs):
        alias = to_rename.pop(ref)
        node = graph_def.node.add(name=f"visionserve_output_{i}", op="Identity", input=[ref])
        node.attr["T"].type = tf.as_dtype(declared["outputs"][alias]["dtype"]).as_datatype_enum
        isolated.append(f"{node.name}:0")
        to_rename[isolated[-1]] = alias
    return graph_def, inputs, isolated, tables, to_rename


def known_rank_example_batches(graph_def):
    """A string placeholder of unknown rank feeding ParseExample(V2) holds a batch: say so
    (tf2onnx's shape inference reads unknown rank as a scalar and then fails on the op)."""
    nodes = graph_nodes(graph_def)
    for n in graph_def.node:
        if n.op in ("ParseExample", "ParseExampleV2"):
            src = nodes.get(n.input[0].split(":")[0])
            if src is not None and src.op == "Placeholder" and src.attr["shape"].shape.unknown_rank:
                src.attr["shape"].shape.unknown_rank = False
                src.attr["shape"].shape.dim.add(size=-1)


def convert_signature(env, args, out_dir, files_by_hash, name, declared, collector):
    tf, tf2onnx, onnx = env
    entry = {"methodName": declared["methodName"], "inputs": declared["inputs"], "outputs": declared["outputs"]}
    started = time.time()
    collector.ops.clear()
    loaded = load_graph(args.saved_model, args.tag, name)
    known_rank_example_batches(loaded[0])
    try:
        cut = cut_after_parse(loaded, declared, tf)
    except NotServable as e:
        entry.update(status="unsupported", error=str(e), seconds=round(time.time() - started, 2))
        return entry
    if cut is not None:
        loaded, entry["examples"] = cut
    loaded = isolate_outputs(loaded, declared, tf)
    model, external = convert_graph(args.saved_model, loaded, args.opset)
    bad = ops_without_schema(model, onnx) + collector.ops
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
