"""TF Serving-shaped SavedModels for the compatibility suite, written by TensorFlow itself.

Built from the facts of TF Serving's testdata export scripts (signature names, keys, method
names, the tf.Example features they parse); the code is ours:

- half_plus_two (TF1 graph, version 00000123): serialized tf.Examples parsed with `x` (required)
  and `x2` (default 0.0); y = 0.5 x + 2, y2 = 0.5 x + 3, y3 = 0.5 x2 + 3; an asset file set
  by the main op. Signatures: serving_default (predict x -> y), regress_x_to_y,
  regress_x_to_y2, regress_x2_to_y3 (float x2 -> y3), classify_x_to_y (scores y).
- half_plus_two_tf2 (tf.saved_model.save, version 00000123): serving_default (predict x -> y) and
  three signatures over ParseExampleV2: classify_x_to_y, regress_x_to_y, regress_x_to_y2
  (method name predict, as TF2 writes them: TF Serving checks their structure).
- half_plus_three (TF1 graph, version 00000123): y = 0.5 x + 3 over the first ParseExample op
  (`ParseExample`, not V2) on a string placeholder of unknown shape, plus regress_single
  on ParseSingleExample (one scalar example), and regress_sparse that reads a
  VarLenFeature (sparse: not servable, so the version loads partially).
- estimator (TF1 graph, version 00000123): what a canned binary LinearClassifier exports (tf.estimator
  is gone from TensorFlow 2.16+, so the graph is built by hand with the same ops and
  signatures): input_example_tensor -> ParseExampleV2 (float `age`, float[2] `pos` with a
  default, int64 `n` with a default), logits, logistic, probabilities, class_ids, classes;
  signatures serving_default and classification (classify), regression (regress), predict.
- nothing_servable (TF1 graph, version 00000123): only regress_sparse (a VarLenFeature): the version
  has no signature the server can serve, so it fails to load.

Written once per content of this file and TensorFlow version into
compat/.cache/tfs-savedmodels/<hash>/ and reused.
"""
import hashlib
import os
import shutil
from pathlib import Path

VERSION = "00000123"  # zero-padded, as in TF Serving's testdata: version 123


def _v1():
    import tensorflow as tf

    return tf, tf.compat.v1


def _build(path, build_graph):
    """Runs build_graph(v1) -> (signature map, main op or None) in a fresh graph and saves it."""
    tf, v1 = _v1()
    with v1.Graph().as_default() as graph, v1.Session(graph=graph) as session:
        signatures, main_op = build_graph(tf, v1)
        session.run(v1.global_variables_initializer())
        builder = v1.saved_model.Builder(str(path))
        builder.add_meta_graph_and_variables(
            session,
            [v1.saved_model.tag_constants.SERVING],
            signature_def_map=signatures,
            assets_collection=v1.get_collection(v1.GraphKeys.ASSET_FILEPATHS),
            main_op=main_op,
        )
        builder.save()


def _signature(v1, inputs, outputs, method):
    info = v1.saved_model.utils.build_tensor_info
    return v1.saved_model.signature_def_utils.build_signature_def(
        {k: info(t) for k, t in inputs.items()}, {k: info(t) for k, t in outputs.items()}, method
    )


def _methods(v1):
    sc = v1.saved_model.signature_constants
    return sc.PREDICT_METHOD_NAME, sc.CLASSIFY_METHOD_NAME, sc.REGRESS_METHOD_NAME


def _asset_main_op(tf, v1, scratch):
    """An asset file in the SavedModel and a main op that reads its name (as TF Serving's has)."""
    scratch.mkdir(parents=True, exist_ok=True)
    (scratch / "foo.txt").write_text("asset-file-contents")
    v1.add_to_collection(v1.GraphKeys.ASSET_FILEPATHS, tf.constant(str(scratch / "foo.txt")))
    name = v1.Variable("foo.txt", name="filename_tensor", trainable=False, collections=[])
    return tf.group(name.assign("foo.txt"))


def half_plus_two(path, scratch):
    def graph(tf, v1):
        predict, classify, regress = _methods(v1)
        a, b, c = (v1.Variable(v, name=n) for v, n in ((0.5, "a"), (2.0, "b"), (3.0, "c")))
        serialized = v1.placeholder(tf.string, shape=[None], name="tf_example")
        parsed = v1.io.parse_example(
            serialized,
            {"x": v1.io.FixedLenFeature([1], tf.float32),
             "x2": v1.io.FixedLenFeature([1], tf.float32, default_value=[0.0])},
        )
        x = tf.identity(parsed["x"], name="x")
        y = tf.identity(a * x + b, name="y")
        y2 = tf.identity(a * x + c, name="y2")
        x2 = tf.identity(parsed["x2"], name="x2")
        a2, c2 = v1.Variable(0.5, name="a2"), v1.Variable(3.0, name="c2")
        y3 = tf.identity(a2 * x2 + c2, name="y3")
        return {
            "serving_default": _signature(v1, {"x": x}, {"y": y}, predict),
            "regress_x_to_y": _signature(v1, {"inputs": serialized}, {"outputs": y}, regress),
            "regress_x_to_y2": _signature(v1, {"inputs": serialized}, {"outputs": y2}, regress),
            "regress_x2_to_y3": _signature(v1, {"inputs": x2}, {"outputs": y3}, regress),
            "classify_x_to_y": _signature(v1, {"inputs": serialized}, {"scores": y}, classify),
        }, _asset_main_op(tf, v1, scratch)

    _build(path, graph)


def half_plus_two_tf2(path):
    import tensorflow as tf

    class HalfPlusTwo(tf.Module):
        def __init__(self):
            super().__init__()
            self.a, self.b, self.c = tf.Variable(0.5), tf.Variable(2.0), tf.Variable(3.0)
            self.spec = {"x": tf.io.FixedLenFeature([1], tf.float32),
                         "x2": tf.io.FixedLenFeature([1], tf.float32, default_value=[0.0])}

        def _x(self, serialized):
            return tf.io.parse_example(serialized, self.spec)["x"]

        @tf.function(input_signature=[tf.TensorSpec([None, 1], tf.float32, name="x")])
        def predict(self, x):
            return {"y": self.a * x + self.b}

        @tf.function(input_signature=[tf.TensorSpec([None], tf.string, name="inputs")])
        def classify_x_to_y(self, inputs):
            return {"scores": self.a * self._x(inputs) + self.b}

        @tf.function(input_signature=[tf.TensorSpec([None], tf.string, name="inputs")])
        def regress_x_to_y(self, inputs):
            return {"outputs": self.a * self._x(inputs) + self.b}

        @tf.function(input_signature=[tf.TensorSpec([None], tf.string, name="inputs")])
        def regress_x_to_y2(self, inputs):
            return {"outputs": self.a * self._x(inputs) + self.c}

    m = HalfPlusTwo()
    tf.saved_model.save(m, str(path), signatures={
        "serving_default": m.predict, "classify_x_to_y": m.classify_x_to_y,
        "regress_x_to_y": m.regress_x_to_y, "regress_x_to_y2": m.regress_x_to_y2})


def half_plus_three(path):
    def graph(tf, v1):
        predict, classify, regress = _methods(v1)
        a, b = v1.Variable(0.5, name="a"), v1.Variable(3.0, name="b")
        serialized = v1.placeholder(tf.string, shape=None, name="tf_example")
        # The first ParseExample op (TF1 exports before 2.0 hold it, not ParseExampleV2).
        x_parsed = tf.raw_ops.ParseExample(
            serialized=serialized, names=tf.constant([], tf.string), sparse_keys=[],
            dense_keys=[tf.constant("x")], dense_defaults=[tf.constant([], tf.float32)],
            sparse_types=[], dense_shapes=[[1]]).dense_values[0]
        x = tf.identity(x_parsed, name="x")
        y = tf.identity(a * x + b, name="y")
        one = v1.placeholder(tf.string, shape=[], name="one_example")
        x_one = v1.io.parse_single_example(one, {"x": v1.io.FixedLenFeature([1], tf.float32)})["x"]
        y_one = tf.identity(a * x_one + b, name="y_one")
        sparse = v1.io.parse_example(serialized, {"x": v1.io.VarLenFeature(tf.float32)})["x"]
        y_sparse = tf.identity(a * tf.sparse.reduce_sum(sparse, axis=1) + b, name="y_sparse")
        return {
            "serving_default": _signature(v1, {"x": x}, {"y": y}, predict),
            "regress_x_to_y": _signature(v1, {"inputs": serialized}, {"outputs": y}, regress),
            "classify_x_to_y": _signature(v1, {"inputs": serialized}, {"scores": y}, classify),
            "regress_single": _signature(v1, {"inputs": one}, {"outputs": y_one}, regress),
            "regress_sparse": _signature(v1, {"inputs": serialized}, {"outputs": y_sparse}, regress),
        }, None

    _build(path, graph)


def nothing_servable(path):
    def graph(tf, v1):
        serialized = v1.placeholder(tf.string, shape=[None], name="tf_example")
        sparse = v1.io.parse_example(serialized, {"x": v1.io.VarLenFeature(tf.float32)})["x"]
        y = tf.identity(tf.sparse.reduce_sum(sparse, axis=1) * 0.5 + 2, name="y")
        return {"regress_sparse": _signature(v1, {"inputs": serialized}, {"outputs": y}, _methods(v1)[2])}, None

    _build(path, graph)


def estimator(path):
    def graph(tf, v1):
        predict, classify, regress = _methods(v1)
        serialized = v1.placeholder(tf.string, shape=[None], name="input_example_tensor")
        f = v1.io.parse_example(serialized, {
            "age": v1.io.FixedLenFeature([1], tf.float32),
            "pos": v1.io.FixedLenFeature([2], tf.float32, default_value=[0.25, -1.0]),
            "n": v1.io.FixedLenFeature([1], tf.int64, default_value=[3]),
        })
        with v1.variable_scope("linear/linear_model"):
            w_age = v1.Variable([[0.03]], name="age/weights")
            w_pos = v1.Variable([[0.5], [-0.75]], name="pos/weights")
            w_n = v1.Variable([[-0.2]], name="n/weights")
            bias = v1.Variable([-1.0], name="bias_weights")
        logits = tf.identity(
            tf.matmul(f["age"], w_age) + tf.matmul(f["pos"], w_pos)
            + tf.matmul(tf.cast(f["n"], tf.float32), w_n) + bias, name="head/predictions/logits")
        logistic = tf.sigmoid(logits, name="head/predictions/logistic")
        probabilities = tf.concat([1 - logistic, logistic], axis=1, name="head/predictions/probabilities")
        class_ids = tf.cast(tf.cast(logits > 0, tf.int32), tf.int64, name="head/predictions/class_ids")
        classes = tf.strings.as_string(class_ids, name="head/predictions/str_classes")
        n = tf.shape(logits)[0]
        all_classes = tf.tile(tf.constant([["0", "1"]]), [n, 1], name="head/predictions/all_classes")
        all_class_ids = tf.tile(tf.constant([[0, 1]]), [n, 1], name="head/predictions/all_class_ids")
        classify_sig = _signature(v1, {"inputs": serialized},
                                  {"classes": all_classes, "scores": probabilities}, classify)
        return {
            "serving_default": classify_sig,
            "classification": classify_sig,
            "regression": _signature(v1, {"inputs": serialized}, {"outputs": logistic}, regress),
            "predict": _signature(v1, {"examples": serialized}, {
                "logits": logits, "logistic": logistic, "probabilities": probabilities,
                "class_ids": class_ids, "classes": classes, "all_classes": all_classes,
                "all_class_ids": all_class_ids}, predict),
        }, None

    _build(path, graph)


def tfs_saved_models(cache_root: Path) -> dict:
    """{name: <model base dir holding version 00000123>}, written on first use."""
    import tensorflow as tf

    key = hashlib.sha256(Path(__file__).read_bytes() + tf.__version__.encode()).hexdigest()[:16]
    root = cache_root / key
    names = ("half_plus_two", "half_plus_two_tf2", "half_plus_three", "estimator", "nothing_servable")
    if not (root / "done").exists():
        shutil.rmtree(root, ignore_errors=True)
        half_plus_two(root / "half_plus_two" / VERSION, root / "scratch")
        half_plus_two_tf2(root / "half_plus_two_tf2" / VERSION)
        half_plus_three(root / "half_plus_three" / VERSION)
        estimator(root / "estimator" / VERSION)
        nothing_servable(root / "nothing_servable" / VERSION)
        shutil.rmtree(root / "scratch", ignore_errors=True)
        (root / "done").write_text("ok")
    return {name: root / name for name in names}


if __name__ == "__main__":
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
    print(tfs_saved_models(Path(__file__).resolve().parents[1] / ".cache" / "tfs-savedmodels"))
