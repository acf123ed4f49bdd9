/** Child-process entry of in-process-probe.ts (started with fork; flags = `visionserve serve` flags). */
import { type Tensor, byteSize, isStringData } from '@visionserve/protocol';
import { parseFlags, resolveServerConfig } from '@visionserve/server';
import { startVisionServer } from '@visionserve/server';
import { silentLogger } from '@visionserve/server';
import { closedLoop, openLoop, warmUp } from './load-loop.js';
import type { FromProbe, ToProbe } from './in-process-probe.js';
import { ownCpuMs } from './proc-cpu.js';

const send = (message: FromProbe): void => {
  process.send?.(message);
};

/** A private copy: the service takes ownership of input buffers (they are transferred to a worker). */
function copy(t: Tensor): Tensor {
  return { dtype: t.dtype, shape: t.shape, data: isStringData(t.data) ? [...t.data] : t.data.slice() };
}

async function main(): Promise<void> {
  const config = resolveServerConfig({
    ...parseFlags(process.argv.slice(2)),
    grpcPort: -1,
    restPort: -1,
    sagemakerPort: -1,
  });
  const server = await startVisionServer(config, silentLogger);
  process.on('message', (message: ToProbe) => {
    if (message.type === 'exit') {
      void server.close().then(() => process.exit(0));
      return;
    }
    const b = message.block;
    let outputBytes = 0;
    const call = async (): Promise<void> => {
      const inputs: Record<string, Tensor> = {};
      for (const [alias, t] of Object.entries(b.inputs)) inputs[alias] = copy(t);
      const response = await server.service.predict({ model: { name: b.model }, inputs });
      outputBytes = Object.values(response.outputs).reduce((n, t) => n + byteSize(t), 0);
    };
    void (async () => {
      try {
        const limits = { durationMs: b.durationMs, minRequests: b.minRequests, maxRequests: b.maxRequests };
        await warmUp(call, b.warmup);
        const cpu0 = ownCpuMs();
        const result =
          b.mode === 'closed'
            ? await closedLoop(call, b.concurrency, limits)
            : await openLoop(call, b.ratePerSecond, limits);
        send({ type: 'result', result: { ...result, cpuMs: ownCpuMs() - cpu0, outputBytes } });
      } catch (error) {
        send({ type: 'failed', message: error instanceof Error ? error.message : String(error) });
      }
    })();
  });
  send({ type: 'ready' });
}

main().catch((error: unknown) => {
  send({ type: 'failed', message: error instanceof Error ? error.message : String(error) });
  process.exitCode = 1;
});
