/**
 * A fake model for one test: started on 127.0.0.1:0, closed when the test's function ends,
 * whatever happened in it.
 *
 * @module
 */
import { type FakeModel, type FakeModelOptions, startFakeModel } from "../../src/fake/model.ts";

/** Runs `fn` against a fresh fake model (started with `options`), then closes it. */
export async function withFakeModel<T>(
  fn: (fake: FakeModel) => Promise<T>,
  options: FakeModelOptions = {},
): Promise<T> {
  const fake = startFakeModel(options);
  try {
    return await fn(fake);
  } finally {
    await fake.close();
  }
}
