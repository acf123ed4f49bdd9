#!/usr/bin/env node
// HPACK request header blocks: our decoder (packages/h2/src/, @visionserve/h2) on
// the blocks real gRPC clients send, in one process:
//   grpcio-first   a new decoder (a new connection) and the stock Python grpcio client's first
//                  Predict call on it: every field a literal with incremental indexing (252 bytes)
//   grpcio-steady  a later grpcio call: all 9 fields indexed from the dynamic table (9 bytes;
//                  from its third call on, every block of a 20-call capture was like this)
//   node-first     a new decoder and a node:http2 client's first gRPC call (Huffman-coded literals)
//   node-average   a new decoder and 20 node:http2 calls of one connection, per block (indexed
//                  fields plus a new Huffman-coded grpc-timeout literal each call)
// The grpcio blocks were captured from grpcio 1.85.1 (tensorflow.serving.PredictionService/Predict,
// 10 s deadline, calls 1-3 of a channel); the node:http2 ones are captured at start-up over loopback.
//
//   npx tsc -b packages/cli && node bench/hpack-decode.mjs [--ms 300] [--json out.json]
//
// Reports the median over 7 rounds of wall-clock microseconds per block (each round runs for
// --ms milliseconds), counting the onHeader callback that stores the fields into an array.
import { once } from 'node:events';
import { writeFile } from 'node:fs/promises';
import http2 from 'node:http2';
import { createServer } from 'node:net';
import { parseArgs } from 'node:util';
import { createHpackDecoder } from '../packages/h2/dist/src/index.js';

const { values: args } = parseArgs({
  options: { ms: { type: 'string', default: '300' }, json: { type: 'string' } },
});
const ROUND_MS = Number(args.ms);

// grpcio 1.85.1 / grpc-c 58.0.0, three Predict calls on one channel, 10 s deadline.
const GRPCIO = [
  '40053a706174682d2f74656e736f72666c6f772e73657276696e672e50726564696374696f6e536572766963652f50726564696374' +
    '400a3a617574686f726974790f3132372e302e302e313a34363331398386400c636f6e74656e742d74797065106170706c696361' +
    '74696f6e2f677270634002746508747261696c6572734014677270632d6163636570742d656e636f64696e67176964656e7469' +
    '74792c206465666c6174652c20677a6970400c677270632d74696d656f757403313053400a757365722d6167656e7430677270' +
    '632d707974686f6e2f312e38352e3120677270632d632f35382e302e3020286c696e75783b2063687474703229',
  'c4c38386c2c1c0400c677270632d74696d656f75740631303130306dbf',
  'c5c48386c3c2c1bebf',
].map((hex) => Buffer.from(hex, 'hex'));

/** Header blocks of `calls` gRPC-shaped requests from a node:http2 client, as sent on the wire. */
async function captureNodeBlocks(calls) {
  const blocks = [];
  const server = createServer((socket) => {
    socket.write(Buffer.from('000000040000000000', 'hex'));
    let pending = Buffer.alloc(0);
    let preface = false;
    socket.on('data', (chunk) => {
      pending = Buffer.concat([pending, chunk]);
      if (!preface) {
        if (pending.length < 24) return;
        pending = pending.subarray(24);
        preface = true;
      }
      while (pending.length >= 9) {
        const length = pending.readUIntBE(0, 3);
        if (pending.length < 9 + length) return;
        const [type, flags] = [pending[3], pending[4]];
        const stream = pending.readUInt32BE(5);
        const payload = Buffer.from(pending.subarray(9, 9 + length));
        pending = pending.subarray(9 + length);
        if (type === 4 && (flags & 1) === 0) socket.write(Buffer.from('000000040100000000', 'hex'));
        if (type !== 1) continue;
        if ((flags & 0x2c) !== 0x04) throw new Error('capture expects unpadded HEADERS with END_HEADERS');
        blocks.push(payload);
        // :status 200, then trailers grpc-status: 0, ending the stream.
        const head = Buffer.alloc(9);
        const frame = (t, f, body) => {
          head.writeUIntBE(body.length, 0, 3);
          head[3] = t;
          head[4] = f;
          head.writeUInt32BE(stream, 5);
          return Buffer.concat([head, body]);
        };
        socket.write(frame(1, 4, Buffer.from([0x88])));
        socket.write(frame(1, 5, Buffer.from('000b677270632d7374617475730130', 'hex')));
      }
    });
  });
  server.listen(0, '127.0.0.1');
  await once(server, 'listening');
  const session = http2.connect(`http://127.0.0.1:${server.address().port}`);
  for (let call = 0; call < calls; call++) {
    const request = session.request({
      ':method': 'POST',
      ':path': '/tensorflow.serving.PredictionService/Predict',
      'content-type': 'application/grpc',
      te: 'trailers',
      'grpc-timeout': `${10000 - call}m`,
      'user-agent': 'grpc-node-js/1.12.0',
      'grpc-accept-encoding': 'identity,deflate,gzip',
    });
    request.end();
    request.resume();
    await once(request, 'close');
  }
  session.close();
  server.close();
  return blocks;
}

function median(values) {
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.floor(sorted.length / 2)];
}

/**
 * Microseconds per block: `prepare()` returns a decoder in the state the block expects (untimed
 * when `fresh` is false: one decoder serves the whole round).
 */
function measure(prepare, block, fresh) {
  const fields = [];
  const onHeader = (name, value) => {
    fields.push(name, value);
  };
  const rounds = [];
  for (let round = 0; round < 8; round++) {
    let decoder = prepare();
    let n = 0;
    const start = performance.now();
    let now = start;
    while (now - start < ROUND_MS) {
      for (let i = 0; i < 200; i++) {
        if (fresh) decoder = prepare();
        fields.length = 0;
        decoder.decode(block, onHeader);
      }
      n += 200;
      now = performance.now();
    }
    if (round > 0) rounds.push(((now - start) * 1000) / n);
  }
  return median(rounds);
}

const node = await captureNodeBlocks(20);
const withBlocks = (blocks) => () => {
  const decoder = createHpackDecoder();
  for (const block of blocks) decoder.decode(block, () => undefined);
  return decoder;
};
/** A new decoder per pass that decodes all of `blocks`: microseconds per block. */
function connection(blocks) {
  const empty = Buffer.alloc(0);
  const sequence = () => {
    const decoder = createHpackDecoder();
    for (let index = 0; index < blocks.length - 1; index++) decoder.decode(blocks[index], () => undefined);
    return decoder;
  };
  // The last block is decoded by measure() itself, with the array-building callback.
  return measure(sequence, blocks.at(-1) ?? empty, true) / blocks.length;
}
const results = {
  'grpcio-first': connection(GRPCIO.slice(0, 1)),
  'grpcio-steady': measure(withBlocks(GRPCIO.slice(0, 2)), GRPCIO[2], false),
  'node-first': connection(node.slice(0, 1)),
  'node-average': connection(node),
};
const sizes = {
  'grpcio-first': GRPCIO[0].length,
  'grpcio-steady': GRPCIO[2].length,
  'node-first': node[0].length,
  'node-average': Math.round(node.reduce((sum, block) => sum + block.length, 0) / node.length),
};
for (const [name, us] of Object.entries(results)) {
  console.log(`${name.padEnd(14)} ${String(sizes[name]).padStart(4)} bytes  ${us.toFixed(3)} µs/block`);
}
if (args.json !== undefined)
  await writeFile(args.json, JSON.stringify({ roundMs: ROUND_MS, sizes, results }, null, 2));
