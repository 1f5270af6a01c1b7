'use strict';
// Create a topic, produce through both paths, consume through the gateway; prints one JSON
// line with what it read.   node examples/quickstart.js [gateway] [topic]
const { StromGateway } = require('../src');

async function main() {
  const [address = 'localhost:9092', topic = 'node-quickstart'] = process.argv.slice(2);
  const gateway = new StromGateway(address);
  try {
    await gateway.createTopic(topic, { partitions: 1, replicationFactor: 1 });

    // The convenient path: records in, the gateway builds the batch.
    const viaRecords = await gateway.produceRecords(
      topic,
      [
        { key: 'k1', value: 'hello from node', headers: [{ key: 'lang', value: 'js' }] },
        { key: 'k1', value: 'second', headers: [{ key: 'nothing', value: null }] },
      ],
      { partition: 0, compression: 'COMPRESSION_GZIP' },
    );

    // The batch path: this process encodes the v2 batch itself.
    const viaBatch = await gateway.produceBatch(topic, 0, [
      { key: 'k2', value: 'batch record 1', timestampMs: 1700000000000 },
      { key: null, value: 'batch record 2', timestampMs: 1700000000001 },
    ]);

    const fetched = await gateway.fetchRecords(topic, 0, 0, { maxWaitMs: 100 });
    const raw = await gateway.fetch(topic, 0, viaBatch.base_offset, { maxWaitMs: 100 });
    const text = (b) => (b === null ? null : b.toString('utf8'));
    console.log(
      JSON.stringify({
        topic,
        produced: { records: viaRecords.base_offset, batch: viaBatch.base_offset },
        fetched: fetched.records.map((r) => ({
          offset: r.offset,
          key: text(r.key),
          value: text(r.value),
          headers: r.headers.map((h) => [h.key, text(h.value)]),
        })),
        raw: raw.records.map((r) => ({ offset: Number(r.offset), value: text(r.value) })),
        next_offset: fetched.next_offset,
      }),
    );
  } finally {
    gateway.close();
  }
}

main().catch((error) => {
  console.error(error);
  process.exit(1);
});
