// Reads large rows from Bighive's Cloud Bigtable API frontend with the
// official Node.js client, @google-cloud/bigtable, reached the way an
// application reaches the emulator (BIGTABLE_EMULATOR_HOST), with the
// client's default options. Run by e2e/node_test.go
// (TestBigtableNodeClientLargeRows), which writes the rows and asserts
// every result: this script prints one JSON object on stdout, each cell
// as its column, its type as the client gave it, its length in bytes
// and the SHA-256 of its bytes, and leaves the checking to the Go test.
// Any client error exits non-zero.
//
// The table name is the first argument; the row keys to read by key
// follow it.
'use strict';

const crypto = require('crypto');
const {Bigtable} = require('@google-cloud/bigtable');

// bytes is a cell value's bytes: the client gives a Buffer with
// decode: false, else a string decoded as UTF-8 (the values the test
// writes are ASCII or UTF-8 text, so its UTF-8 bytes are the value's),
// and a number for an 8-byte value it takes for a 64-bit integer (the
// test writes none: its type tells).
function bytes(v) {
  if (Buffer.isBuffer(v)) return v;
  if (typeof v === 'string') return Buffer.from(v, 'utf8');
  return Buffer.from(String(v), 'utf8');
}

// cells summarizes a row's cells: column, type, length and hash, in the
// order the client gives them (families, then qualifiers, as stored).
function cells(row) {
  const out = [];
  for (const [fam, cols] of Object.entries(row.data)) {
    for (const [col, vs] of Object.entries(cols)) {
      for (const c of vs) {
        const b = bytes(c.value);
        out.push({
          column: `${fam}:${col}`,
          type: Buffer.isBuffer(c.value) ? 'Buffer' : typeof c.value,
          length: b.length,
          sha256: crypto.createHash('sha256').update(b).digest('hex'),
        });
      }
    }
  }
  return out;
}

// stream reads the whole table with createReadStream and summarizes each
// row as it arrives, so that only one row is held at a time.
function stream(table, options) {
  return new Promise((resolve, reject) => {
    const out = {};
    table
      .createReadStream(options)
      .on('error', reject)
      .on('data', row => {
        out[row.id] = cells(row);
      })
      .on('end', () => resolve(out));
  });
}

async function main() {
  const [tableName, ...keys] = process.argv.slice(2);
  // metricsEnabled: false and METADATA_SERVER_DETECTION=none (set by the
  // test), as in bigtable.js: the script talks to the frontend only.
  const bigtable = new Bigtable({projectId: 'node-project', metricsEnabled: false});
  const table = bigtable.instance('node-instance').table(tableName);
  const out = {get: {}, millis: {}};

  let start = Date.now();
  for (const k of keys) {
    const [row] = await table.row(k).get();
    out.get[k] = cells(row);
  }
  out.millis.get = Date.now() - start;

  start = Date.now();
  out.stream = await stream(table);
  out.millis.stream = Date.now() - start;

  // decode: false gives every value as a Buffer, as it came.
  start = Date.now();
  out.streamBuffers = await stream(table, {decode: false});
  out.millis.streamBuffers = Date.now() - start;

  out.rssMiB = Math.round(process.memoryUsage().rss / (1 << 20));
  process.stdout.write(JSON.stringify(out) + '\n');
}

main().then(() => process.exit(0), err => {
  console.error(err && err.stack ? err.stack : err);
  if (err && err.code !== undefined) console.error(`gRPC code ${err.code}: ${err.details || ''}`);
  process.exit(1);
});
