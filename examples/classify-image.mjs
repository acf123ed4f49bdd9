#!/usr/bin/env node
// Classify an image with a model served by visionserve or TF Serving, over gRPC.
//   node examples/classify-image.mjs <image> [grpc-address=127.0.0.1:8500] [model=mobilenet] [labels-file]
// The labels file is one label a line (an ImageNet synset file's WordNet ids are dropped) or a
// TF Object Detection API label map (.pbtxt).
// Needs sharp for the image helper (npm install sharp); the client itself has no native dependencies.
import { readFile } from 'node:fs/promises';
import { classifyTopK, createTfsGrpcClient, parseLabels } from '@visionserve/client';
import { IMAGE_PRESETS, imageToTensor } from '@visionserve/client/image';

const [imagePath, address = '127.0.0.1:8500', model = 'mobilenet', labelsPath] = process.argv.slice(2);
if (!imagePath) {
  console.error('usage: node examples/classify-image.mjs <image> [grpc-address] [model] [labels-file]');
  process.exit(2);
}
const labels = labelsPath ? parseLabels(await readFile(labelsPath, 'utf8'), labelsPath) : undefined;
const { tensor } = await imageToTensor(await readFile(imagePath), IMAGE_PRESETS.imagenet);

const client = createTfsGrpcClient({ address, defaultTimeoutMs: 10_000 });
try {
  const { outputs, model: served } = await client.predict(model, { input: tensor });
  // softmax 'auto': applied to logits, skipped when a row already sums to 1.
  const [top] = classifyTopK(outputs.output, { kind: 'classification', softmax: 'auto', topK: 3 }, labels);
  console.log(`${served.name} v${served.version}:`);
  for (const c of top) console.log(`  ${c.class_id} ${c.label ?? ''} ${c.score.toFixed(3)}`);
} catch (error) {
  // Every failure is a ServingError with the server's code (gRPC numbering) and message.
  console.error(`${error.name} code=${error.code}: ${error.message}`);
  process.exitCode = 1;
} finally {
  client.close();
}
