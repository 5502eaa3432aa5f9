import { createCipheriv, createDecipheriv, hkdfSync, randomBytes } from "node:crypto";
import { sessionSecret } from "@/lib/auth/secret";
import type { Config } from "@/lib/server/config";
import { InvalidCursorError } from "@/lib/idempotency/errors";

/**
 * The filters a cursor is valid for. A cursor handed out for one listing is refused in any other,
 * so a tenant's token (whose listings are always of its own scope) never opens another's cursor.
 */
export interface CursorFilter {
  state?: string;
  tool?: string;
  scope?: string;
  prefix?: string;
}

const VERSION = 1;
const NONCE_BYTES = 12;
const TAG_BYTES = 16;
const LENGTH_BYTES = 2;
/**
 * Plaintexts are padded to a multiple of this, so a cursor's length says next to nothing about the
 * position inside it (a store's position may be another scope's key, read past while filtering).
 */
const PAD_TO = 256;
const MIN_SEALED = 1 + NONCE_BYTES + PAD_TO + TAG_BYTES;
const BASE64URL = /^[A-Za-z0-9_-]+$/;

/**
 * Seals the key stores' list cursors for the world outside the server. A store's cursor is a raw
 * position (score and index member for Redis, sort value, scope and key for SQL); a filtered
 * listing may stop at a record it read past and did not return, which can belong to another scope.
 * So the cursor leaves the server encrypted and authenticated: AES-256-GCM under a key derived with
 * HKDF-SHA256 from the server's secret (IDEMGATE_SECRET, or the one generated into the data
 * directory on first start, the same secret that protects console sessions), a random 96-bit nonce
 * per cursor, and the listing's filters bound as additional authenticated data.
 *
 * Sealed form: base64url(version ‖ nonce ‖ ciphertext ‖ tag), the plaintext being the store's
 * cursor (UTF-8) behind its 2-byte length and padded with zeros to a multiple of 256 bytes.
 */
export class CursorSeal {
  private readonly key: Buffer;

  constructor(secret: string) {
    this.key = Buffer.from(hkdfSync("sha256", Buffer.from(secret, "utf8"), Buffer.alloc(0), "idemgate list cursor v1: aes-256-gcm", 32));
  }

  seal(raw: string, filter: CursorFilter): string {
    const body = Buffer.from(raw, "utf8");
    if (body.length >= 2 ** (8 * LENGTH_BYTES)) throw new RangeError(`a list cursor of ${body.length} bytes cannot be sealed`);
    const plain = Buffer.alloc(Math.ceil((LENGTH_BYTES + body.length) / PAD_TO) * PAD_TO);
    plain.writeUInt16BE(body.length, 0);
    body.copy(plain, LENGTH_BYTES);
    const nonce = randomBytes(NONCE_BYTES);
    const cipher = createCipheriv("aes-256-gcm", this.key, nonce, { authTagLength: TAG_BYTES });
    cipher.setAAD(context(filter));
    const sealed = Buffer.concat([Buffer.from([VERSION]), nonce, cipher.update(plain), cipher.final(), cipher.getAuthTag()]);
    return sealed.toString("base64url");
  }

  /** The store's cursor inside `sealed`; InvalidCursorError unless this server sealed it for `filter`. */
  open(sealed: string, filter: CursorFilter): string {
    if (!BASE64URL.test(sealed)) throw new InvalidCursorError();
    const bytes = Buffer.from(sealed, "base64url");
    if (bytes.length < MIN_SEALED || bytes[0] !== VERSION || (bytes.length - MIN_SEALED) % PAD_TO !== 0) throw new InvalidCursorError();
    const nonce = bytes.subarray(1, 1 + NONCE_BYTES);
    const tag = bytes.subarray(bytes.length - TAG_BYTES);
    const decipher = createDecipheriv("aes-256-gcm", this.key, nonce, { authTagLength: TAG_BYTES });
    decipher.setAAD(context(filter));
    decipher.setAuthTag(tag);
    let plain: Buffer;
    try {
      plain = Buffer.concat([decipher.update(bytes.subarray(1 + NONCE_BYTES, bytes.length - TAG_BYTES)), decipher.final()]);
    } catch {
      // the tag does not match: another secret, another listing, or changed bytes
      throw new InvalidCursorError();
    }
    const length = plain.readUInt16BE(0);
    if (LENGTH_BYTES + length > plain.length) throw new InvalidCursorError();
    return plain.subarray(LENGTH_BYTES, LENGTH_BYTES + length).toString("utf8");
  }
}

/** What the tag binds besides the ciphertext: the format and the listing's filters. */
function context(filter: CursorFilter): Buffer {
  return Buffer.from(
    `idemgate list cursor v${VERSION}\n` + JSON.stringify([filter.scope ?? null, filter.tool ?? null, filter.state ?? null, filter.prefix ?? null]),
    "utf8",
  );
}

const seals = new WeakMap<Config, CursorSeal>();

/** The server's cursor seal, keyed by its secret (read or generated once per configuration). */
export function cursorSeal(config: Config): CursorSeal {
  let seal = seals.get(config);
  if (!seal) {
    seal = new CursorSeal(sessionSecret(config));
    seals.set(config, seal);
  }
  return seal;
}
