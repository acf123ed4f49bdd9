import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { Code, ServingError, overloadedError } from '../src/errors.js';

describe('overloadedError', () => {
  it('is UNAVAILABLE with reason overloaded, carries no stack frames, and leaves the stack limit as it was', () => {
    const before = Error.stackTraceLimit;
    const error = overloadedError('Server is overloaded: queue full');
    assert.ok(error instanceof ServingError);
    assert.equal(error.code, Code.UNAVAILABLE);
    assert.equal(error.reason, 'overloaded');
    assert.equal(error.message, 'Server is overloaded: queue full');
    assert.doesNotMatch(error.stack ?? '', /\n\s+at /);
    assert.equal(Error.stackTraceLimit, before);
    assert.match(new ServingError(Code.INTERNAL, 'x').stack ?? '', /\n\s+at /, 'other errors keep theirs');
  });
});
