// Drives Bighive's Cloud Bigtable API frontend with the official Node.js
// client, @google-cloud/bigtable, reached the way an application reaches
// the emulator (BIGTABLE_EMULATOR_HOST). Run by e2e/node_test.go, which
// asserts every result: this script prints one JSON object on stdout and
// leaves the checking to the Go test. Any client error exits non-zero.
'use strict';

const {Bigtable} = require('@google-cloud/bigtable');

// rows turns the client's rows into plain {key: {"fam:col": [values]}}.
function rows(rs) {
  const out = {};
  for (const r of rs) {
    const cells = {};
    for (const [fam, cols] of Object.entries(r.data)) {
      for (const [col, vs] of Object.entries(cols)) {
        cells[`${fam}:${col}`] = vs.map(c => String(c.value));
      }
    }
    out[r.id] = cells;
  }
  return out;
}

const keys = rs => rs.map(r => r.id);

async function main() {
  // metricsEnabled: false, or the client exports its client-side metrics
  // to Cloud Monitoring; the test also sets METADATA_SERVER_DETECTION=none
  // so that nothing probes for a GCE metadata server: the script talks to
  // the frontend on loopback and to nothing else.
  const bigtable = new Bigtable({projectId: 'node-project', metricsEnabled: false});
  const instance = bigtable.instance('node-instance');
  const out = {};

  const [table] = await instance.createTable('nodetbl', {
    families: ['cf', {name: 'meta', rule: {versions: 1}}],
    // Split keys go to a bytes field as they are: a string there would be
    // read as base64, so they are Buffers.
    splits: [Buffer.from('k'), Buffer.from('u')],
  });
  const [families] = await table.getFamilies();
  out.families = families.map(f => f.id).sort();
  // Each family's GC rule as the client shows it: null when the server
  // sends none (cf has no rule), as Cloud Bigtable does.
  out.familyRules = Object.fromEntries(families.map(f => [f.id, f.metadata.gcRule]));
  out.cfMetadata = (await table.family('cf').getMetadata())[0];
  out.tables = (await instance.getTables())[0].map(t => t.id).sort();

  const ts = 1000; // explicit microsecond timestamps keep the cells exact
  const put = [];
  for (const k of ['apple', 'banana', 'cherry', 'kiwi', 'lemon', 'mango', 'user#1', 'user#2', 'user#3', 'zebra']) {
    put.push({key: k, data: {cf: {name: {value: `name-${k}`, timestamp: ts}, size: {value: String(k.length), timestamp: ts}}}});
  }
  await table.insert(put);
  await table.row('apple').save({meta: {tag: {value: 'fruit', timestamp: ts}}});

  out.byKey = rows((await table.getRows({keys: ['banana', 'zebra', 'absent']}))[0]);
  const [apple] = await table.row('apple').get();
  out.apple = rows([apple]);
  const [exists] = await table.row('absent').exists();
  out.absentExists = exists;
  // Node's ranges are inclusive at both ends unless told otherwise.
  out.rangeClosed = keys((await table.getRows({start: 'banana', end: 'lemon'}))[0]);
  out.rangeHalfOpen = keys((await table.getRows({ranges: [{start: 'banana', end: {value: 'lemon', inclusive: false}}]}))[0]);
  out.prefix = keys((await table.getRows({prefix: 'user#'}))[0]);
  out.limit = keys((await table.getRows({limit: 3}))[0]);
  out.filterColumn = rows((await table.getRows({start: 'a', end: 'c', filter: [{column: 'size'}]}))[0]);
  out.filterValue = rows((await table.getRows({filter: [{column: 'name'}, {value: /^name-(kiwi|mango)$/}]}))[0]);
  out.filterFamily = rows((await table.getRows({filter: {family: 'meta'}}))[0]);

  // Conditional mutations: one predicate that matches, one that does not.
  const [matched] = await table.row('kiwi').filter([{column: 'name'}, {value: 'name-kiwi'}], {
    onMatch: [{method: 'insert', data: {cf: {cond: {value: 'matched', timestamp: ts}}}}],
    onNoMatch: [{method: 'insert', data: {cf: {cond: {value: 'unmatched', timestamp: ts}}}}],
  });
  const [notMatched] = await table.row('lemon').filter([{column: 'name'}, {value: 'no-such-value'}], {
    onMatch: [{method: 'insert', data: {cf: {cond: {value: 'matched', timestamp: ts}}}}],
    onNoMatch: [{method: 'insert', data: {cf: {cond: {value: 'unmatched', timestamp: ts}}}}],
  });
  out.condMatched = matched;
  out.condNotMatched = notMatched;
  out.condRows = rows((await table.getRows({keys: ['kiwi', 'lemon'], filter: {column: 'cond'}}))[0]);

  // Increments: the first makes the cell, the rest add.
  const [c1] = await table.row('counter').increment('cf:hits', 5);
  const [c2] = await table.row('counter').increment('cf:hits');
  const [c3] = await table.row('counter').increment('cf:hits', -2);
  out.increments = [Number(c1), Number(c2), Number(c3)];

  // Appends, cell and row deletes, a server-assigned timestamp, a new family.
  await table.row('mango').createRules([{column: 'cf:name', append: '-ripe'}]);
  await table.row('cherry').deleteCells(['cf:size']);
  await table.row('zebra').delete();
  out.edited = rows((await table.getRows({keys: ['cherry', 'mango', 'zebra'], filter: {family: 'cf'}}))[0]);
  await table.mutate({key: 'servertime', method: 'insert', data: {cf: {t: {value: 'now', timestamp: -1}}}});
  const [st] = await table.row('servertime').get();
  out.serverTimestamp = String(st.data.cf.t[0].timestamp);
  await table.createFamily('extra', {rule: {versions: 2}});
  await table.createFamily('norule');
  const [after] = await table.getFamilies();
  out.familiesAfterCreate = after.map(f => f.id).sort();
  out.rulesAfterCreate = Object.fromEntries(after.map(f => [f.id, f.metadata.gcRule]));
  await table.row('servertime').delete();

  const [samples] = await table.sampleRowKeys();
  out.samples = samples.map(s => ({key: Buffer.from(s.key).toString(), offset: Number(s.offset)}));

  try {
    await instance.table('no-such-table').getRows();
    out.missingTableCode = 0;
  } catch (err) {
    out.missingTableCode = err.code;
  }

  await table.deleteRows('user#');
  out.afterDeleteRows = keys((await table.getRows())[0]);

  await table.delete();
  out.existsAfterDelete = (await table.exists())[0];
  out.tablesAfterDelete = (await instance.getTables())[0].map(t => t.id).sort();

  process.stdout.write(JSON.stringify(out) + '\n');
}

main().then(() => process.exit(0), err => {
  console.error(err && err.stack ? err.stack : err);
  if (err && err.code !== undefined) console.error(`gRPC code ${err.code}: ${err.details || ''}`);
  process.exit(1);
});
