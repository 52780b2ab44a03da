/**
 * A wrong query parameter of a usage route (the series, the events page): the admin route answers
 * 400 `{ok: false, error, param}` naming it.
 *
 * @module
 */

/** A query parameter that is wrong; `message` starts with its name. */
export class QueryParamError extends Error {
  constructor(readonly param: string, message: string) {
    super(`${param}: ${message}`);
  }
}
