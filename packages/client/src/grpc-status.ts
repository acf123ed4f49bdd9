/** The gRPC status a response's headers or trailers carry (grpc-status, percent-decoded grpc-message). */
import { type Code, codeFromNumber } from '@visionserve/protocol';

export function grpcStatusFrom(
  headers: Readonly<Record<string, string | string[] | undefined>>,
): { code: Code; message: string } | undefined {
  const raw = headers['grpc-status'];
  if (raw === undefined) return undefined;
  const n = Number(Array.isArray(raw) ? raw[0] : raw);
  const code = codeFromNumber(n);
  const msg = headers['grpc-message'];
  let message = typeof msg === 'string' ? msg : '';
  try {
    message = decodeURIComponent(message);
  } catch {
    // keep the raw text
  }
  return { code, message };
}
