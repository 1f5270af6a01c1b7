'use strict';
// A small Node.js client for Strom: everything goes through the gateway (default
// localhost:9092), with stubs loaded from proto/ at run time by @grpc/proto-loader.
//
// Two data paths, as docs/gateway.md describes:
//   - produceRecords / fetchRecords: individual records; the gateway encodes and decodes the
//     batches (convenient, slower);
//   - produceBatch / fetch: the batch path; this client encodes an uncompressed v2 batch
//     itself (src/record_batch.js) and decodes what the leader returns.
// int64 fields come back as JS numbers (exact below 2^53: offsets and millisecond times).

const path = require('node:path');
const grpc = require('@grpc/grpc-js');
const protoLoader = require('@grpc/proto-loader');
const { decodeBatches, encodeBatch } = require('./record_batch');
const { channelCredentials } = require('./security');

const DEFAULT_PROTO_ROOT = path.resolve(__dirname, '..', '..', '..', 'proto');

/** The strom.protocol.v1 package, loaded from the .proto sources under protoRoot. */
function loadProtocol(protoRoot = process.env.STROM_PROTO_DIR || DEFAULT_PROTO_ROOT) {
  const files = ['strom/protocol/v1/gateway.proto', 'strom/protocol/v1/security.proto'];
  const definition = protoLoader.loadSync(files, {
    includeDirs: [protoRoot],
    keepCase: true,
    longs: Number,
    enums: String,
    defaults: true,
    oneofs: true,
  });
  return grpc.loadPackageDefinition(definition).strom.protocol.v1;
}

/** A per-partition or per-topic error_code other than NONE, as an Error with .code. */
class StromError extends Error {
  constructor(code, message) {
    super(`${code}: ${message || 'no details'}`);
    this.code = code;
  }
}

function check(result) {
  if (result.error_code && result.error_code !== 'NONE') {
    throw new StromError(result.error_code, result.error_message);
  }
  return result;
}

// proto3 `optional` fields: present only when the synthetic oneof names them.
const present = (message, field) => message[`_${field}`] === field;

class StromGateway {
  /**
   * `security`: Kafka's names, { securityProtocol: 'SASL_SSL', saslMechanism, saslPlainUsername,
   * saslPlainPassword, sslCafile } (docs/security.md); plaintext without it.
   */
  constructor(address = 'localhost:9092', { protoRoot, deadlineMs = 30000, security } = {}) {
    const v1 = loadProtocol(protoRoot);
    this.address = address;
    this.deadlineMs = deadlineMs;
    const credentials = channelCredentials(security, address, v1.Security);
    this.stub = new v1.Gateway(address, credentials, {
      'grpc.max_receive_message_length': 64 * 1024 * 1024,
      'grpc.max_send_message_length': 64 * 1024 * 1024,
    });
  }

  close() {
    this.stub.close();
  }

  /** Any Gateway RPC, as a promise: call('Metadata', { topics: [] }). */
  call(method, request, deadlineMs = this.deadlineMs) {
    return new Promise((resolve, reject) => {
      const deadline = new Date(Date.now() + deadlineMs);
      this.stub[method](request, { deadline }, (error, response) =>
        error ? reject(error) : resolve(response),
      );
    });
  }

  async createTopic(name, { partitions = 1, replicationFactor = 1, configs = {} } = {}) {
    const response = await this.call('CreateTopics', {
      topics: [{ name, num_partitions: partitions, replication_factor: replicationFactor, configs }],
      timeout_ms: 30000,
    });
    return check(response.topics[0]);
  }

  async metadata(topics = []) {
    return this.call('Metadata', { topics });
  }

  /**
   * Produce records (the gateway encodes them into one batch on one partition). partition -1
   * lets the gateway choose: murmur2 of the key (as every Kafka client), keyless in turn.
   * Returns { partition, base_offset, ... }.
   */
  async produceRecords(topic, records, { partition = -1, acks = -1, compression = 'COMPRESSION_NONE' } = {}) {
    const response = await this.call('ProduceRecords', {
      topic,
      partition,
      acks,
      timeout_ms: 30000,
      compression,
      records: records.map((r) => ({
        key: r.key === null || r.key === undefined ? undefined : Buffer.from(r.key),
        value: r.value === null || r.value === undefined ? undefined : Buffer.from(r.value),
        headers: (r.headers ?? []).map((h) => ({
          key: h.key,
          value: h.value === null || h.value === undefined ? undefined : Buffer.from(h.value),
        })),
        timestamp_ms: r.timestampMs ?? 0,
      })),
    });
    return check(response);
  }

  /** Records from offset on (decoded by the gateway): { records, next_offset, high_watermark }. */
  async fetchRecords(topic, partition, offset, { maxRecords = 0, maxBytes = 0, maxWaitMs = 500 } = {}) {
    const response = check(
      await this.call('FetchRecords', {
        topic,
        partition,
        offset,
        max_records: maxRecords,
        max_bytes: maxBytes,
        max_wait_ms: maxWaitMs,
      }),
    );
    response.records = response.records.map((r) => ({
      offset: r.offset,
      timestampMs: r.timestamp_ms,
      key: present(r, 'key') ? r.key : null,
      value: present(r, 'value') ? r.value : null,
      headers: r.headers.map((h) => ({ key: h.key, value: present(h, 'value') ? h.value : null })),
    }));
    return response;
  }

  /** Produce one batch encoded here (uncompressed v2) to one partition: the batch path. */
  async produceBatch(topic, partition, records, { acks = -1 } = {}) {
    const response = await this.call('Produce', {
      acks,
      timeout_ms: 30000,
      partitions: [{ topic, partition, records: encodeBatch(records) }],
    });
    return check(response.partitions[0]);
  }

  /** Fetch raw batches of one partition and decode them here (uncompressed batches only). */
  async fetch(topic, partition, offset, { maxBytes = 1 << 20, maxWaitMs = 500 } = {}) {
    const response = await this.call('Fetch', {
      replica_id: -1,
      max_wait_ms: maxWaitMs,
      min_bytes: 1,
      max_bytes: maxBytes,
      partitions: [{ topic, partition, fetch_offset: offset, partition_max_bytes: maxBytes }],
    });
    const result = check(response.partitions[0]);
    const records = decodeBatches(result.records).filter((r) => r.offset >= BigInt(offset));
    return { records, high_watermark: result.high_watermark };
  }
}

module.exports = { StromError, StromGateway, decodeBatches, encodeBatch, loadProtocol };
