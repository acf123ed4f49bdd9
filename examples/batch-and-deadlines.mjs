#!/usr/bin/env node
// Client-side batching (many images, few requests) with a deadline per request, then the model's
// signature and status. Works over gRPC or REST: both clients implement the same predict().
//   node examples/batch-and-deadlines.mjs <image> [<image> ...]   (gRPC at 127.0.0.1:8500, model mobilenet)
import { readFile } from 'node:fs/promises';
import { Code, ServingError, classifyTopK, createTfsGrpcClient, predictBatched } from '@visionserve/client';
import { IMAGE_PRESETS, imageToTensor } from '@visionserve/client/image';

const images = process.argv.slice(2);
if (images.length === 0) {
  console.error('usage: node examples/batch-and-deadlines.mjs <image> [<image> ...]');
  process.exit(2);
}
const client = createTfsGrpcClient({ address: process.env.VS_GRPC ?? '127.0.0.1:8500' });
try {
  const meta = await client.getModelMetadata('mobilenet');
  const input = meta.signatures.serving_default.inputs.input;
  console.log(`mobilenet v${meta.model.version}: input ${input.tfDtype} [${input.shape}]`);
  console.log(
    'status:',
    (await client.getModelStatus('mobilenet')).map((s) => `v${s.version} ${s.state}`).join(', '),
  );

  const items = [];
  for (const path of images)
    items.push({ input: (await imageToTensor(await readFile(path), IMAGE_PRESETS.imagenet)).tensor });
  // Stacked along dimension 0 into requests of at most 8 images; outputs split back per image.
  const results = await predictBatched(client, 'mobilenet', items, { maxBatchSize: 8, timeoutMs: 5_000 });
  results.forEach((r, i) => {
    const [[best]] = classifyTopK(r.output, { kind: 'classification', topK: 1 }, undefined);
    console.log(`${images[i]}: class ${best.class_id}`);
  });

  // A deadline that cannot be met: the call fails with DEADLINE_EXCEEDED (sent to the server as grpc-timeout).
  await client.predict('mobilenet', items[0], { timeoutMs: 1 }).catch((error) => {
    if (!(error instanceof ServingError && error.code === Code.DEADLINE_EXCEEDED)) throw error;
    console.log('1 ms deadline -> DEADLINE_EXCEEDED, as expected');
  });
} finally {
  client.close();
}
