/// <reference lib="deno.worker" />
/**
 * A worker that takes a share board's lock as worker 1 when told to, and says how that went in
 * a shared word: 1 it timed out (ShareBoardLockTimeout), 2 it got the lock, 3 another error.
 * Used by share_board_test.ts: the holder is the test's own thread, so this side must not hang it.
 */
import { InflightTable } from "../../src/core/inflight_table.ts";
import {
  ShareBoard,
  ShareBoardLockTimeout,
  type ShareBoardSize,
} from "../../src/workers/share_board.ts";

interface Start {
  board: SharedArrayBuffer;
  keys: SharedArrayBuffer;
  size: ShareBoardSize;
  /** [go, result, waited ms] */
  signal: SharedArrayBuffer;
}

self.onmessage = (e: MessageEvent<Start>) => {
  const { board, keys, size, signal } = e.data;
  const words = new Int32Array(signal);
  const table = new InflightTable(keys, { capacity: size.keys, workers: size.workers }, 1);
  const b = new ShareBoard(board, size, 1, table, () => 0);
  self.postMessage("ready");
  Atomics.wait(words, 0, 0);
  const started = performance.now();
  let result = 3;
  try {
    b.locked(() => {
      result = 2;
    });
  } catch (err) {
    result = err instanceof ShareBoardLockTimeout ? 1 : 3;
  }
  Atomics.store(words, 2, Math.round(performance.now() - started));
  Atomics.store(words, 1, result);
  Atomics.notify(words, 1);
};
