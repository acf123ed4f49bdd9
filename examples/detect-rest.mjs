#!/usr/bin/env node
// Object detection with a TF Object Detection API style model over the TF Serving REST API.
//   node examples/detect-rest.mjs <image> [rest-url=http://127.0.0.1:8501] [model=detector] [label-map.pbtxt]
import { readFile } from 'node:fs/promises';
import { createTfsRestClient, decodeDetections, parseLabelMap } from '@visionserve/client';
import { IMAGE_PRESETS, imageToTensor } from '@visionserve/client/image';

const [imagePath, baseUrl = 'http://127.0.0.1:8501', model = 'detector', labelMapPath] =
  process.argv.slice(2);
if (!imagePath) {
  console.error('usage: node examples/detect-rest.mjs <image> [rest-url] [model] [label-map.pbtxt]');
  process.exit(2);
}
const labels = labelMapPath ? parseLabelMap(await readFile(labelMapPath, 'utf8'), labelMapPath) : undefined;
const { tensor, originalWidth, originalHeight } = await imageToTensor(
  await readFile(imagePath),
  IMAGE_PRESETS.tfod,
);

const client = createTfsRestClient({ baseUrl });
try {
  // The first call fetches the model's metadata once to type the JSON answer.
  const { outputs } = await client.predict(model, { input_tensor: tensor }, { timeoutMs: 10_000 });
  // TF-OD outputs (detection_boxes/classes/scores, num_detections); boxes also in pixels of the photo.
  const [{ detections }] = decodeDetections(outputs, { kind: 'detection', scoreThreshold: 0.5 }, labels, {
    width: originalWidth,
    height: originalHeight,
  });
  for (const d of detections) {
    const { xmin, xmax, ymin, ymax } = d.box_pixels;
    console.log(
      `${(d.label ?? `class ${d.class_id}`).padEnd(14)} ${d.score.toFixed(2)}  x ${xmin}-${xmax}  y ${ymin}-${ymax}`,
    );
  }
} finally {
  client.close();
}
