import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { Code, ServingError } from '@visionserve/protocol';
import { modelFilesOf, parseConversionManifest } from '../src/repository/saved-model-manifest.js';

const OK = {
  status: 'ok',
  methodName: 'tensorflow/serving/predict',
  inputs: { x: { dtype: 'float32', shape: null, graphName: 'x:0' } },
  outputs: { y: { dtype: 'float32', shape: [-1, 1] } },
  onnx: 's0/model.onnx',
};

void describe('conversion manifests', () => {
  void it('reads what the converter writes, unknown rank included', () => {
    const m = parseConversionManifest({
      format: 1,
      converter: { tensorflow: '2.21.0', extra: 3 },
      signatures: {
        serving_default: OK,
        regress: {
          ...OK,
          methodName: 'tensorflow/serving/regress',
          examples: {
            inputKey: 'inputs',
            features: [{ key: 'x', dtype: 'float32', shape: [1], defaultValue: [0] }],
          },
        },
        serving_bytes: {
          status: 'unsupported',
          methodName: '',
          unsupportedOps: ['DecodeJpeg', 7],
          error: 'e',
        },
      },
    });
    assert.deepEqual(m.converter, { tensorflow: '2.21.0' });
    assert.equal(m.signatures['serving_default']!.inputs['x']!.shape, undefined);
    assert.deepEqual(m.signatures['regress']!.examples!.features[0]!.defaultValue, [0]);
    assert.deepEqual(m.signatures['serving_bytes']!.unsupportedOps, ['DecodeJpeg']);
  });

  void it('refuses anything unexpected (a cache entry is then converted again)', () => {
    for (const bad of [
      null,
      { format: 2, signatures: {} },
      { format: 1, signatures: { s: { ...OK, status: 'maybe' } } },
      { format: 1, signatures: { s: { ...OK, onnx: '../../etc/passwd' } } },
      { format: 1, signatures: { s: { ...OK, onnx: undefined } } },
      { format: 1, signatures: { s: { ...OK, inputs: { x: { dtype: 'complex64', shape: [] } } } } },
      { format: 1, signatures: { s: { ...OK, inputs: { x: { dtype: 'float32', shape: [1.5] } } } } },
      {
        format: 1,
        signatures: {
          s: { ...OK, examples: { inputKey: 'i', features: [{ key: 'x', dtype: 'float32', shape: [-1] }] } },
        },
      },
    ]) {
      assert.throws(() => parseConversionManifest(bad), /invalid conversion manifest/, JSON.stringify(bad));
    }
  });

  void it('gives the runtime the signatures that converted and the others with their reason', () => {
    const m = parseConversionManifest({
      format: 1,
      signatures: {
        serving_default: OK,
        serving_bytes: { status: 'unsupported', methodName: '', unsupportedOps: ['DecodeJpeg'] },
        broken: { status: 'error', methodName: '', error: 'ValueError: boom' },
      },
    });
    const partial = modelFilesOf('/cache/k', m);
    assert.deepEqual(Object.keys(partial.signatures), ['serving_default']);
    assert.equal(partial.signatures['serving_default']!.path, '/cache/k/s0/model.onnx');
    assert.deepEqual(partial.unserved, {
      serving_bytes: 'uses TensorFlow ops with no ONNX equivalent: DecodeJpeg',
      broken: 'did not convert: ValueError: boom',
    });
    // Signatures served another way (visionserve.json) are not reported.
    const files = modelFilesOf('/cache/k', m, new Set(['serving_bytes', 'broken']));
    assert.deepEqual(Object.keys(files.signatures), ['serving_default']);
    assert.equal(files.unserved, undefined);
  });

  void it('fails a version with nothing servable, naming every signature and why', () => {
    const m = parseConversionManifest({
      format: 1,
      signatures: {
        serving_bytes: { status: 'unsupported', methodName: '', unsupportedOps: ['DecodeJpeg'] },
        broken: { status: 'error', methodName: '', error: 'ValueError: boom' },
      },
    });
    assert.throws(
      () => modelFilesOf('/cache/k', m),
      (e: unknown) =>
        e instanceof ServingError &&
        e.code === Code.UNIMPLEMENTED &&
        /signature "serving_bytes" uses TensorFlow ops with no ONNX equivalent: DecodeJpeg; signature "broken" did not convert: ValueError: boom/.test(
          e.message,
        ),
    );
  });
});
