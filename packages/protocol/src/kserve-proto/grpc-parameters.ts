/**
 * `inference.InferParameter` (the oneof of bool, int64, string, double and uint64 values) and
 * the protocol-neutral InferParameters the KServe operations use.
 */
import { create } from '@bufbuild/protobuf';
import { invalidArgument } from '../errors.js';
import type { InferParameterValue, InferParameters } from '../kserve/infer-types.js';
import { type InferParameter, InferParameterSchema } from '../gen/inference/inference_pb.js';

const preview = (key: string): string => (key.length > 64 ? `${key.slice(0, 64)}...` : key);

/** A 64-bit integer as a number when it is exact, else as a bigint. */
function integer(value: bigint): number | bigint {
  return value >= -BigInt(Number.MAX_SAFE_INTEGER) && value <= BigInt(Number.MAX_SAFE_INTEGER)
    ? Number(value)
    : value;
}

/** One parameter's value; INVALID_ARGUMENT naming `what` when none of the oneof is set. */
export function parameterValue(parameter: InferParameter, key: string, what: string): InferParameterValue {
  const choice = parameter.parameterChoice;
  switch (choice.case) {
    case 'boolParam':
    case 'stringParam':
    case 'doubleParam':
      return choice.value;
    case 'int64Param':
    case 'uint64Param':
      return integer(choice.value);
    default:
      throw invalidArgument(`${what}: parameter '${preview(key)}' has no value`);
  }
}

/** A parameters map of a message as InferParameters. */
export function parametersFromProto(
  parameters: Readonly<Record<string, InferParameter>>,
  what: string,
): InferParameters {
  const out: Record<string, InferParameterValue> = {};
  for (const [key, parameter] of Object.entries(parameters)) out[key] = parameterValue(parameter, key, what);
  return out;
}

/**
 * InferParameters as a message's parameters map, the way tritonclient sends them: booleans
 * as bool_param, strings as string_param, integers (numbers without a fraction, bigints) as
 * int64_param, other numbers as double_param.
 */
export function parametersToProto(parameters: InferParameters | undefined): Record<string, InferParameter> {
  const out: Record<string, InferParameter> = {};
  for (const [key, value] of Object.entries(parameters ?? {})) {
    let choice: InferParameter['parameterChoice'];
    if (typeof value === 'boolean') choice = { case: 'boolParam', value };
    else if (typeof value === 'string') choice = { case: 'stringParam', value };
    else if (typeof value === 'bigint') choice = { case: 'int64Param', value };
    else if (Number.isSafeInteger(value)) choice = { case: 'int64Param', value: BigInt(value) };
    else choice = { case: 'doubleParam', value };
    out[key] = create(InferParameterSchema, { parameterChoice: choice });
  }
  return out;
}
