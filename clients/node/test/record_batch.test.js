'use strict';
const test = require('node:test');
const assert = require('node:assert');
const { crc32c, decodeBatches, encodeBatch } = require('../src/record_batch');

test('crc32c check value', () => {
  assert.strictEqual(crc32c(Buffer.from('123456789')), 0xe3069283);
});

test('encode then decode', () => {
  const batch = encodeBatch(
    [
      { key: 'k', value: 'v1', timestampMs: 1000, headers: [{ key: 'h', value: null }] },
      { key: null, value: Buffer.alloc(0), timestampMs: 999 },
      { key: 'k2', value: null, timestampMs: 1002 },
    ],
  );
  const records = decodeBatches(batch);
  assert.deepStrictEqual(records.map((r) => r.offset), [0n, 1n, 2n]);
  assert.deepStrictEqual(records.map((r) => r.timestampMs), [1000n, 999n, 1002n]);
  assert.strictEqual(records[0].key.toString(), 'k');
  assert.deepStrictEqual(records[0].headers, [{ key: 'h', value: null }]);
  assert.strictEqual(records[1].key, null);
  assert.strictEqual(records[1].value.length, 0);
  assert.strictEqual(records[2].value, null);
  assert.strictEqual(batch.readBigInt64BE(35), 1002n); // max_timestamp
});

test('a truncated tail is skipped', () => {
  const one = encodeBatch([{ value: 'a', timestampMs: 1 }]);
  const two = Buffer.concat([one, one.subarray(0, 30)]);
  assert.strictEqual(decodeBatches(two).length, 1);
});
