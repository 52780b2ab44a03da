/**
 * A worker's judge of issued keys (ADR 0029): every presented issued key is asked of the
 * supervisor, whose directory holds the one copy of the group's keys. A revocation is therefore
 * in force in every worker at the next request, with nothing to invalidate; the cost is one
 * message round trip for a request that presents an issued key.
 *
 * @module
 */
import type { IssuedKeyAuthority } from "../customer_keys/directory.ts";
import type { Grant } from "../customer_keys/grants.ts";
import type { FromWorker } from "./protocol.ts";

/** The worker's side of `issued_auth`. */
export class RemoteIssuedKeys implements IssuedKeyAuthority {
  readonly #post: (msg: FromWorker) => void;
  readonly #nextId: () => number;
  readonly #asked = new Map<number, (grant: Grant | null) => void>();

  /** `post` reaches the supervisor; `nextId` numbers the questions (shared with other asks). */
  constructor(post: (msg: FromWorker) => void, nextId: () => number) {
    this.#post = post;
    this.#nextId = nextId;
  }

  /** The supervisor answered question `id`. */
  answered(id: number, grant: Grant | null): void {
    this.#asked.get(id)?.(grant);
    this.#asked.delete(id);
  }

  async authenticate(presented: string): Promise<Grant | undefined> {
    const id = this.#nextId();
    const answer = new Promise<Grant | null>((resolve) => this.#asked.set(id, resolve));
    this.#post({ type: "issued_auth", id, key: presented });
    return (await answer) ?? undefined;
  }
}
