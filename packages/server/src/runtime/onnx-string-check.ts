import { invalidArgument, type Tensor } from '@visionserve/protocol';

const utf8 = new TextDecoder('utf-8', { fatal: true });

/**
 * onnxruntime-node's string tensors hold JavaScript strings that reach the runtime as
 * NUL-terminated C strings: an element that is not UTF-8, or holds a NUL byte, would reach
 * the model altered (replacement characters, cut at the NUL). Such inputs are refused with
 * INVALID_ARGUMENT instead of being run on altered data.
 */
export function checkOnnxStringInput(name: string, tensor: Tensor): void {
  if (tensor.dtype !== 'string') return;
  const elements = tensor.data as readonly Uint8Array[];
  for (let i = 0; i < elements.length; i++) {
    const element = elements[i]!;
    let text = true;
    if (element.includes(0)) text = false;
    else {
      try {
        utf8.decode(element);
      } catch {
        text = false;
      }
    }
    if (!text) {
      throw invalidArgument(
        `Input "${name}" element ${i} is not UTF-8 text without NUL bytes; ONNX string tensors carry text only`,
      );
    }
  }
}
