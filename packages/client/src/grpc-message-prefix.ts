/**
 * The 5-byte prefix of a unary gRPC response's one message, read from DATA chunks as they come
 * (both receive paths use it: grpc-response-receiver.ts, grpc-message-assembler.ts): the
 * compression flag and the declared length are checked as soon as the prefix is whole, and at
 * the end whether the response carried exactly one whole message.
 */
import { Code, ServingError } from '@visionserve/protocol';

export class MessagePrefix {
  private readonly bytes = new Uint8Array(5);
  private filled = 0;
  /** The declared message length, once `complete`. */
  length = 0;

  constructor(private readonly maxReceiveBytes: number) {}

  get complete(): boolean {
    return this.filled === 5;
  }

  /**
   * Takes prefix bytes from the start of `chunk` (call only while not `complete`): how many it
   * took, or the error when the whole prefix names a message this client does not accept.
   */
  take(chunk: Uint8Array): number | ServingError {
    const at = Math.min(5 - this.filled, chunk.byteLength);
    this.bytes.set(chunk.subarray(0, at), this.filled);
    this.filled += at;
    if (this.filled < 5) return at;
    if (this.bytes[0] !== 0) {
      return new ServingError(Code.UNIMPLEMENTED, 'Compressed responses are not supported');
    }
    this.length = new DataView(this.bytes.buffer).getUint32(1);
    if (this.length > this.maxReceiveBytes) {
      return new ServingError(
        Code.RESOURCE_EXHAUSTED,
        `Received message larger than max (${this.length} vs. ${this.maxReceiveBytes})`,
      );
    }
    return at;
  }

  /** At the end of the response, with `received` message bytes: the error if that is not one whole message. */
  endError(received: number): ServingError | undefined {
    if (this.filled === 0) return new ServingError(Code.INTERNAL, 'Response carried no message');
    if (this.filled < 5)
      return new ServingError(Code.INTERNAL, 'Response ended inside the 5-byte message prefix');
    if (received < this.length) {
      return new ServingError(
        Code.INTERNAL,
        `Response ended after ${received} of the message's ${this.length} bytes`,
      );
    }
    return undefined;
  }
}
