/**
 * The intake's judge of identities that authenticate (ADR 0029): a presented key in the issued
 * shape (`sk-skeid-…`) is judged only as an issued key, and — once a `jwt:` section exists — a
 * bearer that parses as a JWT only as a JWT. Either is a customer key id with a grant, or a 401
 * that never falls back to an opaque customer key. Anything else is left to the customer key id
 * path (`proxy/intake.ts`).
 *
 * @module
 */
import { Refusal } from "../proxy/errors.ts";
import { headerKeyId, presentedKey } from "../proxy/identity.ts";
import type { IssuedKeyAuthority } from "./directory.ts";
import type { Grant, GrantPolicies } from "./grants.ts";
import { isIssuedKeyShape } from "./key_format.ts";

/** The refusal of an issued key: the same words whatever was wrong with it. */
export const INVALID_KEY_MESSAGE = "invalid or revoked key";

/** What judges a JWT bearer, when a `jwt:` section is in force. */
export interface JwtJudge {
  /** Whether the bearer is shaped as a JWT (three base64url parts, a JSON header). */
  isJwt(token: string): boolean;
  /** The grant of a valid token; throws a `Refusal` (401 naming the failed check) otherwise. */
  verify(token: string): Promise<Grant>;
}

/** What the intake asks (`IntakeContext.identities`). */
export interface IdentityJudge {
  /**
   * The customer key id of a request presenting an issued key or a JWT (a promise: the refusal
   * rejects it), or undefined when the request presents neither.
   */
  judge(headers: Headers, trustHeader: boolean): Promise<string> | undefined;
}

/** The gateway's judge over its issued-key authority, its grants and its JWT issuers. */
export class Identities implements IdentityJudge {
  readonly #issued: IssuedKeyAuthority;
  readonly #grants: GrantPolicies;
  readonly #jwt: () => JwtJudge | undefined;

  /** `jwt`: the judge of the `jwt:` section in force, undefined without one. */
  constructor(issued: IssuedKeyAuthority, grants: GrantPolicies, jwt: () => JwtJudge | undefined) {
    this.#issued = issued;
    this.#grants = grants;
    this.#jwt = jwt;
  }

  judge(headers: Headers, trustHeader: boolean): Promise<string> | undefined {
    if (trustHeader && headerKeyId(headers) !== undefined) return undefined;
    const key = presentedKey(headers);
    if (key === undefined) return undefined;
    if (isIssuedKeyShape(key)) return this.#granted(this.issuedGrant(key));
    const jwt = this.#jwt();
    if (jwt !== undefined && jwt.isJwt(key)) return this.#granted(jwt.verify(key));
    return undefined;
  }

  /** The grant of an issued key, or the 401 (the supervisor asks this for its workers). */
  async issuedGrant(key: string): Promise<Grant> {
    const grant = await this.#issued.authenticate(key);
    if (grant === undefined) {
      throw new Refusal(401, "authentication_error", INVALID_KEY_MESSAGE, "invalid_key");
    }
    return grant;
  }

  async #granted(pending: Promise<Grant>): Promise<string> {
    const grant = await pending;
    this.#grants.record(grant);
    return grant.id;
  }
}
