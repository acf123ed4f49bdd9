"""TensorFlow SavedModels for the compatibility suite, written by TensorFlow itself.

- half_plus_two: a TF1-style graph like TF Serving's own half_plus_two test model (y = 0.5 x + 2),
  with a predict signature and classify/regress signatures that read serialized tf.Examples.
- cnn: a small Keras CNN (fixed seed) wrapped in a tf.Module with two signatures:
  serving_default (float images) and serving_bytes (encoded images, decoded in the graph).

The models are written once per content of this file and TensorFlow version into
compat/.cache/savedmodels/<hash>/ and reused, so the server's conversion cache (keyed by the
models' bytes) also hits on later runs.
"""
import hashlib
import os
import shutil
from pathlib import Path

IMG = 32
NUM_CLASSES = 10

# The image settings the server needs to serve serving_bytes itself (visionserve.json).
CNN_VISION_CONFIG = {
    "image": {"width": IMG, "height": IMG, "resize": "stretch", "layout": "NHWC", "dtype": "float32",
              "scale": 1 / 255},
}


def _half_plus_two(path):
    import tensorflow as tf

    v1 = tf.compat.v1
    sdu = v1.saved_model.signature_def_utils
    info = v1.saved_model.utils.build_tensor_info
    sc = v1.saved_model.signature_constants
    with v1.Graph().as_default() as graph, v1.Session(graph=graph) as session:
        a = v1.Variable(0.5, name="a")
        b = v1.Variable(2.0, name="b")
        serialized = v1.placeholder(tf.string, shape=[None], name="tf_example")
        features = v1.io.parse_example(serialized, {"x": v1.io.FixedLenFeature([1], tf.float32)})
        x = tf.identity(features["x"], name="x")
        y = tf.identity(a * x + b, name="y")
        logits = tf.concat([-y, y], axis=1)
        scores = tf.nn.softmax(logits, name="scores")
        classes = tf.tile(tf.constant([["neg", "pos"]]), [tf.shape(y)[0], 1], name="classes")
        x_any = v1.placeholder(tf.float32, shape=None, name="x_any")
        y_any = tf.identity(a * x_any + b, name="y_any")
        signatures = {
            sc.DEFAULT_SERVING_SIGNATURE_DEF_KEY: sdu.build_signature_def(
                {"x": info(x)}, {"y": info(y)}, sc.PREDICT_METHOD_NAME),
            "predict_unknown_rank": sdu.predict_signature_def({"x": x_any}, {"y": y_any}),
            "regress_x_to_y": sdu.regression_signature_def(serialized, y),
            "classify_x_to_y": sdu.build_signature_def(
                {sc.CLASSIFY_INPUTS: info(serialized)}, {sc.CLASSIFY_OUTPUT_SCORES: info(y)},
                sc.CLASSIFY_METHOD_NAME),
            "classify_full": sdu.classification_signature_def(serialized, classes, scores),
        }
        session.run(v1.global_variables_initializer())
        builder = v1.saved_model.Builder(str(path))
        builder.add_meta_graph_and_variables(
            session, [v1.saved_model.tag_constants.SERVING], signature_def_map=signatures)
        builder.save()


def _cnn(path):
    import keras
    import tensorflow as tf

    keras.utils.set_random_seed(1234)
    inputs = keras.Input((IMG, IMG, 3), name="images")
    h = keras.layers.Conv2D(8, 3, padding="same", activation="relu")(inputs)
    h = keras.layers.MaxPooling2D()(h)
    h = keras.layers.Conv2D(16, 3, padding="same", activation="relu")(h)
    h = keras.layers.BatchNormalization()(h)
    h = keras.layers.GlobalAveragePooling2D()(h)
    h = keras.layers.Dense(NUM_CLASSES)(h)
    outputs = keras.layers.Softmax(name="probabilities")(h)
    model = keras.Model(inputs, outputs, name="tiny_cnn")

    class Serving(tf.Module):
        def __init__(self):
            super().__init__()
            self.model = model

        def _predict(self, images):
            probabilities = self.model(images, training=False)
            return {"probabilities": probabilities,
                    "classes": tf.argmax(probabilities, axis=-1, output_type=tf.int64)}

        @tf.function(input_signature=[tf.TensorSpec([None, IMG, IMG, 3], tf.float32, name="images")])
        def serving_default(self, images):
            return self._predict(images)

        @tf.function(input_signature=[tf.TensorSpec([None], tf.string, name="image_bytes")])
        def serving_bytes(self, image_bytes):
            def decode(data):
                image = tf.io.decode_image(data, channels=3, expand_animations=False)
                return tf.image.resize(image, [IMG, IMG]) / 255.0

            images = tf.map_fn(decode, image_bytes, fn_output_signature=tf.TensorSpec([IMG, IMG, 3], tf.float32))
            return self._predict(images)

    module = Serving()
    tf.saved_model.save(module, str(path), signatures={
        "serving_default": module.serving_default, "serving_bytes": module.serving_bytes})


def saved_models(cache_root: Path) -> dict:
    """{"half_plus_two": <version dir>, "cnn": <version dir>}, written on first use."""
    import tensorflow as tf

    key = hashlib.sha256(Path(__file__).read_bytes() + tf.__version__.encode()).hexdigest()[:16]
    root = cache_root / key
    done = root / "done"
    if not done.exists():
        shutil.rmtree(root, ignore_errors=True)
        _half_plus_two(root / "half_plus_two" / "1")
        _cnn(root / "cnn" / "1")
        done.write_text("ok")
    return {"half_plus_two": root / "half_plus_two" / "1", "cnn": root / "cnn" / "1"}


if __name__ == "__main__":
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
    print(saved_models(Path(__file__).resolve().parents[1] / ".cache" / "savedmodels"))
