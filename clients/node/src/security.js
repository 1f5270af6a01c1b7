'use strict';
// Security for the Node client, with Kafka's option names (docs/security.md):
//   { securityProtocol: 'SASL_SSL', saslMechanism: 'SCRAM-SHA-256',
//     saslPlainUsername, saslPlainPassword, sslCafile }
// TLS trusts sslCafile; with SASL every call carries a token from the gateway's
// Security/Authenticate (a SCRAM exchange, RFC 5802), logged in again before it expires.

const crypto = require('node:crypto');
const fs = require('node:fs');
const grpc = require('@grpc/grpc-js');

const HASHES = { 'SCRAM-SHA-256': 'sha256', 'SCRAM-SHA-512': 'sha512' };
const MIN_ITERATIONS = 4096;

const escapeName = (name) => name.replace(/=/g, '=3D').replace(/,/g, '=2C');

function attributes(message) {
  const found = {};
  for (const part of message.split(',')) {
    const at = part.indexOf('=');
    if (at === 1 && !(part[0] in found)) found[part[0]] = part.slice(2);
  }
  return found;
}

/** One client-side SCRAM exchange: first(), final(serverFirst), verify(serverFinal). */
class ScramClient {
  constructor(mechanism, username, password, nonce = crypto.randomBytes(18).toString('base64url')) {
    this.hash = HASHES[mechanism.toUpperCase()];
    if (!this.hash) throw new Error(`unsupported SASL mechanism ${mechanism}`);
    this.mechanism = mechanism.toUpperCase();
    this.password = password;
    this.nonce = nonce;
    this.firstBare = `n=${escapeName(username)},r=${nonce}`;
  }

  first() {
    return Buffer.from(`n,,${this.firstBare}`);
  }

  final(serverFirst) {
    const text = serverFirst.toString();
    const { r: nonce, s: salt, i: iterations } = attributes(text);
    if (!nonce || !nonce.startsWith(this.nonce) || !salt || !/^\d+$/.test(iterations || '')) {
      throw new Error('malformed SCRAM server-first-message');
    }
    if (Number(iterations) < MIN_ITERATIONS) throw new Error(`only ${iterations} iterations`);
    const salted = crypto.pbkdf2Sync(
      this.password, Buffer.from(salt, 'base64'), Number(iterations),
      this.hash === 'sha256' ? 32 : 64, this.hash,
    );
    const hmac = (key, data) => crypto.createHmac(this.hash, key).update(data).digest();
    const withoutProof = `c=${Buffer.from('n,,').toString('base64')},r=${nonce}`;
    const authMessage = `${this.firstBare},${text},${withoutProof}`;
    const clientKey = hmac(salted, 'Client Key');
    const storedKey = crypto.createHash(this.hash).update(clientKey).digest();
    const signature = hmac(storedKey, authMessage);
    const proof = Buffer.from(clientKey.map((byte, i) => byte ^ signature[i]));
    this.serverSignature = hmac(hmac(salted, 'Server Key'), authMessage);
    return Buffer.from(`${withoutProof},p=${proof.toString('base64')}`);
  }

  verify(serverFinal) {
    const { v, e } = attributes(serverFinal.toString());
    if (e) throw new Error(`SCRAM: ${e}`);
    const given = Buffer.from(v || '', 'base64');
    if (!this.serverSignature || given.length !== this.serverSignature.length
        || !crypto.timingSafeEqual(given, this.serverSignature)) {
      throw new Error("the server's SCRAM signature does not match");
    }
  }
}

function unary(stub, method, request, deadlineMs) {
  return new Promise((resolve, reject) => {
    stub[method](request, { deadline: new Date(Date.now() + deadlineMs) }, (error, response) =>
      error ? reject(error) : resolve(response));
  });
}

/** Log in to a gateway's Security service: { token, lifetimeMs, principal }. */
async function login(securityStub, { saslMechanism = 'SCRAM-SHA-256', saslPlainUsername, saslPlainPassword }, deadlineMs = 30000) {
  const scram = new ScramClient(saslMechanism, saslPlainUsername, saslPlainPassword);
  const first = await unary(securityStub, 'Authenticate',
    { mechanism: scram.mechanism, message: scram.first() }, deadlineMs);
  if (first.error_code && first.error_code !== 'NONE') {
    throw new Error(`${first.error_code}: ${first.error_message}`);
  }
  const final = await unary(securityStub, 'Authenticate', {
    mechanism: scram.mechanism, message: scram.final(first.message), session_id: first.session_id,
  }, deadlineMs);
  if (final.error_code && final.error_code !== 'NONE') {
    throw new Error(`${final.error_code}: ${final.error_message}`);
  }
  scram.verify(final.message);
  return { token: final.token, lifetimeMs: Number(final.token_lifetime_ms), principal: final.principal };
}

/** Channel credentials for `security` (undefined or PLAINTEXT: insecure). */
function channelCredentials(security, address, SecurityService) {
  const protocol = (security?.securityProtocol || 'PLAINTEXT').toUpperCase();
  if (protocol === 'PLAINTEXT') return grpc.credentials.createInsecure();
  if (protocol !== 'SSL' && protocol !== 'SASL_SSL') {
    throw new Error(`securityProtocol ${protocol}: the Node client supports PLAINTEXT, SSL, SASL_SSL`);
  }
  const tls = grpc.credentials.createSsl(security.sslCafile ? fs.readFileSync(security.sslCafile) : null);
  if (protocol === 'SSL') return tls;
  const securityStub = new SecurityService(address, tls);
  let current = null; // { token, expiresAt, refreshAt }
  let pending = null;
  const fresh = async () => {
    const now = Date.now();
    if (current && now < current.refreshAt) return current.token;
    if (!pending) {
      pending = login(securityStub, security).then((result) => {
        const at = Date.now();
        current = { token: result.token, expiresAt: at + result.lifetimeMs * 0.98, refreshAt: at + result.lifetimeMs * 0.8 };
        return result.token;
      }).finally(() => { pending = null; });
    }
    if (current && now < current.expiresAt) return current.token; // refresh in the background
    return pending;
  };
  const perCall = grpc.credentials.createFromMetadataGenerator((_params, callback) => {
    fresh().then((token) => {
      const metadata = new grpc.Metadata();
      metadata.add('authorization', `Bearer ${token}`);
      callback(null, metadata);
    }, (error) => {
      const metadata = new grpc.Metadata();
      metadata.add('strom-login-error', String(error.message || error).slice(0, 300));
      callback(null, metadata);
    });
  });
  return grpc.credentials.combineChannelCredentials(tls, perCall);
}

module.exports = { ScramClient, channelCredentials, login };
