'use strict';
// Kafka's v2 record batch ("magic 2"), uncompressed, as docs/record-batch-format.md lays it
// out: enough for a thin client to produce through the gateway's Produce RPC and to read what
// Fetch returns. Compressed batches are refused by the decoder (ask the gateway's
// FetchRecords instead, or add a codec).

const HEADER_SIZE = 61;
const MAGIC = 2;
const ATTR_COMPRESSION_MASK = 0x07;
const ATTR_LOG_APPEND_TIME = 0x08;
const ATTR_CONTROL = 0x20;

// CRC-32C (Castagnoli, reflected polynomial 0x82F63B78), table driven.
const CRC_TABLE = (() => {
  const table = new Uint32Array(256);
  for (let n = 0; n < 256; n++) {
    let c = n;
    for (let k = 0; k < 8; k++) c = c & 1 ? (c >>> 1) ^ 0x82f63b78 : c >>> 1;
    table[n] = c >>> 0;
  }
  return table;
})();

function crc32c(bytes) {
  let crc = 0xffffffff;
  for (let i = 0; i < bytes.length; i++) crc = CRC_TABLE[(crc ^ bytes[i]) & 0xff] ^ (crc >>> 8);
  return (crc ^ 0xffffffff) >>> 0;
}

// Zigzag varint of a BigInt (varint and varlong share the encoding; only the range differs).
function writeVarlong(out, value) {
  let z = (BigInt.asIntN(64, value) << 1n) ^ (BigInt.asIntN(64, value) >> 63n);
  z = BigInt.asUintN(64, z);
  while (z >= 0x80n) {
    out.push(Number(z & 0x7fn) | 0x80);
    z >>= 7n;
  }
  out.push(Number(z));
}

function readVarlong(buf, pos) {
  let z = 0n;
  let shift = 0n;
  for (let i = 0; i < 10; i++) {
    if (pos.at >= buf.length) throw new Error('truncated varint');
    const byte = buf[pos.at++];
    z |= BigInt(byte & 0x7f) << shift;
    if ((byte & 0x80) === 0) return (z >> 1n) ^ -(z & 1n);
    shift += 7n;
  }
  throw new Error('varint longer than 10 bytes');
}

const readVarint = (buf, pos) => Number(readVarlong(buf, pos));

function toBytes(value, what) {
  if (value === null || value === undefined) return null;
  if (typeof value === 'string') return Buffer.from(value, 'utf8');
  if (value instanceof Uint8Array) return Buffer.from(value.buffer, value.byteOffset, value.length);
  throw new TypeError(`${what} must be a string, a Buffer/Uint8Array or null`);
}

function writeBytes(out, bytes) {
  if (bytes === null) {
    writeVarlong(out, -1n);
    return;
  }
  writeVarlong(out, BigInt(bytes.length));
  for (const b of bytes) out.push(b);
}

/**
 * Encode records into one uncompressed v2 batch (a Buffer).
 *
 * records: [{ key, value, headers: [{ key: string, value }], timestampMs }], where key and
 * values are strings, Buffers or null (null and empty differ) and timestampMs defaults to now.
 * The producer fields are "none" (producer id -1, epoch -1, sequence -1): not idempotent.
 * base_offset is 0 and partition_leader_epoch -1; the leader assigns both.
 */
function encodeBatch(records, { nowMs = Date.now() } = {}) {
  if (!records.length) throw new Error('a batch holds at least one record');
  const stamps = records.map((r) => BigInt(r.timestampMs ?? nowMs));
  const first = stamps[0];
  const max = stamps.reduce((a, b) => (b > a ? b : a));
  const body = [];
  records.forEach((record, index) => {
    const rec = [0]; // attributes
    writeVarlong(rec, stamps[index] - first);
    writeVarlong(rec, BigInt(index));
    writeBytes(rec, toBytes(record.key, 'key'));
    writeBytes(rec, toBytes(record.value, 'value'));
    const headers = record.headers ?? [];
    writeVarlong(rec, BigInt(headers.length));
    for (const header of headers) {
      writeBytes(rec, Buffer.from(header.key, 'utf8'));
      writeBytes(rec, toBytes(header.value, 'header value'));
    }
    writeVarlong(body, BigInt(rec.length));
    for (const b of rec) body.push(b);
  });
  const batch = Buffer.alloc(HEADER_SIZE + body.length);
  batch.writeBigInt64BE(0n, 0); // base_offset
  batch.writeInt32BE(batch.length - 12, 8); // batch_length
  batch.writeInt32BE(-1, 12); // partition_leader_epoch
  batch.writeInt8(MAGIC, 16);
  batch.writeInt16BE(0, 21); // attributes: no compression, CreateTime
  batch.writeInt32BE(records.length - 1, 23); // last_offset_delta
  batch.writeBigInt64BE(first, 27);
  batch.writeBigInt64BE(max, 35);
  batch.writeBigInt64BE(-1n, 43); // producer_id
  batch.writeInt16BE(-1, 51); // producer_epoch
  batch.writeInt32BE(-1, 53); // base_sequence
  batch.writeInt32BE(records.length, 57);
  Buffer.from(body).copy(batch, HEADER_SIZE);
  batch.writeUInt32BE(crc32c(batch.subarray(21)), 17);
  return batch;
}

function readBytes(buf, pos) {
  const length = readVarint(buf, pos);
  if (length < 0) return null;
  const bytes = buf.subarray(pos.at, pos.at + length);
  pos.at += length;
  return Buffer.from(bytes);
}

/**
 * Decode the batches of a fetch result (Buffer) into records
 * [{ offset, timestampMs, key, value, headers }] (offsets and timestamps as BigInt). A
 * truncated last batch (a fetch cut at max_bytes) is skipped; control batches are skipped.
 */
function decodeBatches(buf) {
  const out = [];
  let at = 0;
  while (buf.length - at >= HEADER_SIZE) {
    const size = buf.readInt32BE(at + 8) + 12;
    if (at + size > buf.length) break; // truncated tail
    const batch = buf.subarray(at, at + size);
    at += size;
    if (batch.readInt8(16) !== MAGIC) throw new Error('not a v2 batch');
    if (batch.readUInt32BE(17) !== crc32c(batch.subarray(21))) throw new Error('CRC mismatch');
    const attributes = batch.readInt16BE(21);
    if (attributes & ATTR_COMPRESSION_MASK) {
      throw new Error('compressed batch: use FetchRecords, or decompress first');
    }
    if (attributes & ATTR_CONTROL) continue;
    const baseOffset = batch.readBigInt64BE(0);
    const firstTimestamp = batch.readBigInt64BE(27);
    const maxTimestamp = batch.readBigInt64BE(35);
    const count = batch.readInt32BE(57);
    const pos = { at: HEADER_SIZE };
    for (let i = 0; i < count; i++) {
      const length = readVarint(batch, pos);
      const end = pos.at + length;
      pos.at += 1; // attributes
      const timestampDelta = readVarlong(batch, pos);
      const offsetDelta = readVarlong(batch, pos);
      const key = readBytes(batch, pos);
      const value = readBytes(batch, pos);
      const headerCount = readVarint(batch, pos);
      const headers = [];
      for (let h = 0; h < headerCount; h++) {
        const name = readBytes(batch, pos).toString('utf8');
        headers.push({ key: name, value: readBytes(batch, pos) });
      }
      if (pos.at !== end) throw new Error(`record ${i}: length mismatch`);
      out.push({
        offset: baseOffset + offsetDelta,
        timestampMs: attributes & ATTR_LOG_APPEND_TIME ? maxTimestamp : firstTimestamp + timestampDelta,
        key,
        value,
        headers,
      });
    }
  }
  return out;
}

module.exports = { crc32c, decodeBatches, encodeBatch, HEADER_SIZE };
