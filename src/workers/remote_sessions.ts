/**
 * A worker's console sessions (ADR 0035): every question goes to the supervisor, whose store is
 * the group's one, so a session made on one worker is good on all of them and a sign-out ends it
 * everywhere at once. The cost is one message round trip per cookie-authenticated admin request.
 *
 * @module
 */
import type { ConsoleSession, NewSession, SessionStore } from "../admin/sessions.ts";
import type { FromWorker, SessionAnswer, SessionOp } from "./protocol.ts";

/** Runs a session question on a store (the supervisor's side of `session`). */
export async function answerSession(store: SessionStore, op: SessionOp): Promise<SessionAnswer> {
  switch (op.op) {
    case "create":
      return await store.create(op.keyHash, op.ttlMs);
    case "find":
      return (await store.find(op.token, op.keyHash)) ?? null;
    case "end":
      await store.end(op.token);
      return null;
    case "wait":
      return await store.signInWait(op.addr);
    case "failed":
      return await store.signInFailed(op.addr);
  }
}

/** The worker's side of `session`. */
export class RemoteSessions implements SessionStore {
  readonly #post: (msg: FromWorker) => void;
  readonly #nextId: () => number;
  readonly #asked = new Map<number, (answer: SessionAnswer) => void>();

  /** `post` reaches the supervisor; `nextId` numbers the questions (shared with other asks). */
  constructor(post: (msg: FromWorker) => void, nextId: () => number) {
    this.#post = post;
    this.#nextId = nextId;
  }

  /** The supervisor answered question `id`. */
  answered(id: number, answer: SessionAnswer): void {
    this.#asked.get(id)?.(answer);
    this.#asked.delete(id);
  }

  #ask(op: SessionOp): Promise<SessionAnswer> {
    const id = this.#nextId();
    const answer = new Promise<SessionAnswer>((resolve) => this.#asked.set(id, resolve));
    this.#post({ type: "session", id, op });
    return answer;
  }

  async create(keyHash: string, ttlMs: number): Promise<NewSession> {
    return await this.#ask({ op: "create", keyHash, ttlMs }) as NewSession;
  }
  async find(token: string, keyHash: string): Promise<ConsoleSession | undefined> {
    return (await this.#ask({ op: "find", token, keyHash }) as ConsoleSession | null) ??
      undefined;
  }
  async end(token: string): Promise<void> {
    await this.#ask({ op: "end", token });
  }
  async signInWait(addr: string): Promise<number> {
    return await this.#ask({ op: "wait", addr }) as number;
  }
  async signInFailed(addr: string): Promise<number> {
    return await this.#ask({ op: "failed", addr }) as number;
  }
}
