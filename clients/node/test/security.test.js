'use strict';
// SCRAM-SHA-256 against RFC 7677's example exchange (section 3).
const test = require('node:test');
const assert = require('node:assert');
const { ScramClient } = require('../src/security');

test('SCRAM-SHA-256 matches RFC 7677', () => {
  const client = new ScramClient('SCRAM-SHA-256', 'user', 'pencil', 'rOprNGfwEbeRWgbNEkqO');
  assert.strictEqual(client.first().toString(), 'n,,n=user,r=rOprNGfwEbeRWgbNEkqO');
  const final = client.final(Buffer.from(
    'r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,s=W22ZaJ0SNY7soEsUEjb6gQ==,i=4096'));
  assert.strictEqual(final.toString(),
    'c=biws,r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,'
    + 'p=dHzbZapWIk4jUhN+Ute9ytag9zjfMHgsqmmiz7AndVQ=');
  client.verify(Buffer.from('v=6rriTRBi23WpRR/wtup+mMhUZUn/dB5nLTJRsjl95G4='));
  assert.throws(() => client.verify(Buffer.from('v=AAAA')), /does not match/);
});
