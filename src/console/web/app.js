// The Skeid operator's console: one page over the admin API (`/skeid/*`), signed in with a
// server-side session (an HttpOnly cookie the script never sees, and a CSRF token kept in memory
// only). Every datum is attacker-chosen text as far as this page knows (model names, key names,
// error messages): it is only ever set with textContent or as an attribute value, never parsed
// as HTML.

/** @typedef {{ csrf: string, expiresAt: string }} Session */

/** @type {Session | null} */
let session = null;
/** True until the first page is mounted (it is mounted before the session check answers). */
let booting = true;
/** Whether the sign-in form is what the page shows. */
let showingSignIn = false;

const main = /** @type {HTMLElement} */ (document.getElementById("main"));
const top = /** @type {HTMLElement} */ (document.getElementById("top"));
const streamStatus = /** @type {HTMLElement} */ (document.getElementById("stream"));

/** Thrown by api() once a 401 sent the page back to sign-in (callers just stop). */
class SignedOut extends Error {}

// ---- DOM helpers ---------------------------------------------------------------------------

/**
 * An element with text children or element children. Attribute values are set with
 * setAttribute (never an `on*` handler: `on` holds listeners), text with textContent.
 * @param {string} tag
 * @param {Record<string, unknown>} [props]
 * @param {...(Node | string | number | null | undefined | false)} children
 * @returns {HTMLElement}
 */
function h(tag, props = {}, ...children) {
  const el = document.createElement(tag);
  for (const [k, v] of Object.entries(props)) {
    if (v === undefined || v === null || v === false) continue;
    if (k === "on") {
      for (const [ev, fn] of Object.entries(/** @type {Record<string, EventListener>} */ (v))) {
        el.addEventListener(ev, fn);
      }
    } else if (k === "text") el.textContent = String(v);
    else if (k === "className") el.className = String(v);
    else if (k.startsWith("on")) throw new Error(`h(): use props.on for ${k}`);
    else el.setAttribute(k, v === true ? "" : String(v));
  }
  for (const c of children) {
    if (c === null || c === undefined || c === false || c === "") continue;
    el.append(typeof c === "string" || typeof c === "number" ? String(c) : c);
  }
  return el;
}

const SVG_NS = "http://www.w3.org/2000/svg";

/**
 * An SVG element with attributes.
 * @param {string} tag
 * @param {Record<string, string | number>} attrs
 * @returns {SVGElement}
 */
function s(tag, attrs = {}) {
  const el = document.createElementNS(SVG_NS, tag);
  for (const [k, v] of Object.entries(attrs)) el.setAttribute(k, String(v));
  return el;
}

/** @param {HTMLElement} el @param {string} text */
function setText(el, text) {
  if (el.textContent !== text) el.textContent = text;
}

/**
 * For the benchmark and the tests: a page's data is in the document (`body[data-<page>-drawn]`
 * and the mark `skeid:<page>-drawn`), and `skeid:<page>-painted` once the frame that shows it
 * has been laid out and painted (a task queued from that frame's animation callback runs after
 * its rendering steps).
 * @param {string} page @param {string} value
 */
function drawn(page, value) {
  performance.mark(`skeid:${page}-drawn`);
  document.body.dataset[`${page}Drawn`] = value;
  requestAnimationFrame(() => setTimeout(() => performance.mark(`skeid:${page}-painted`), 0));
}

// ---- formatting ----------------------------------------------------------------------------

/**
 * A number as en-US writes it (`1,234,567.891`: thousands grouped, at most three decimals).
 * By hand rather than with Intl.NumberFormat: making one costs a fresh page tens of
 * milliseconds (its locale data loads) before the first screen can be drawn.
 * @param {unknown} n
 */
function num(n) {
  if (typeof n !== "number" || !Number.isFinite(n)) return "—";
  const [int, frac] = Math.abs(n).toFixed(3).split(".");
  const digits = frac.replace(/0+$/, "");
  const grouped = int.replace(/\B(?=(\d{3})+(?!\d))/g, ",");
  return `${n < 0 && (int !== "0" || digits) ? "-" : ""}${grouped}${digits ? `.${digits}` : ""}`;
}
/** @param {unknown} n */
function usd(n) {
  if (typeof n !== "number" || !Number.isFinite(n)) return "—";
  return n >= 1 ? `$${n.toFixed(2)}` : `$${n.toFixed(n === 0 ? 2 : 4)}`;
}
/** @param {unknown} n */
function ms(n) {
  return typeof n === "number" && Number.isFinite(n) ? `${Math.round(n)} ms` : "—";
}
/** @param {unknown} n */
function pct(n) {
  return typeof n === "number" && Number.isFinite(n) ? `${(n * 100).toFixed(1)} %` : "—";
}
/** @param {unknown} t */
function when(t) {
  if (t === null || t === undefined || t === "") return "—";
  const d = typeof t === "number" ? new Date(t) : new Date(String(t));
  if (Number.isNaN(d.getTime())) return String(t);
  return d.toISOString().replace("T", " ").replace(/\.\d+Z$/, "Z");
}
/** A future instant as "until HH:MM:SS (in N s)", or null when it is past or absent. @param {unknown} t */
function until(t) {
  if (t === null || t === undefined || t === "" || t === 0) return null;
  const at = typeof t === "number" ? t : Date.parse(String(t));
  if (!Number.isFinite(at) || at <= Date.now()) return null;
  const secs = Math.ceil((at - Date.now()) / 1000);
  return `until ${new Date(at).toISOString().slice(11, 19)}Z (in ${secs} s)`;
}
/** Any JSON value as one line of text. @param {unknown} v @returns {string} */
function flat(v) {
  if (v === null || v === undefined) return "—";
  if (typeof v !== "object") return String(v);
  if (Array.isArray(v)) return v.map(flat).join(", ");
  const parts = Object.entries(/** @type {Record<string, unknown>} */ (v))
    .filter(([, x]) => x !== null && x !== undefined)
    .map(([k, x]) => `${k}: ${typeof x === "object" ? flat(x) : String(x)}`);
  return parts.length ? parts.join(", ") : "—";
}

// ---- the admin API -------------------------------------------------------------------------

/**
 * The answers to the page's first calls — the session check and the first page's data — that the
 * gateway put into the page's HTML (ADR 0051), by path. Each is taken once, in place of asking.
 * @type {Map<string, { status: number, body: any }>}
 */
const firstAnswers = (() => {
  const block = document.getElementById("skeid-first-answers");
  try {
    const parsed = JSON.parse(block?.textContent || "{}");
    return new Map(Object.entries(parsed && typeof parsed === "object" ? parsed : {}));
  } catch {
    return new Map();
  }
})();

/**
 * One admin API call with the session cookie; writes carry the CSRF token. A 401 (the session
 * expired, was forged or ended) sends the page back to sign-in.
 * @param {string} method
 * @param {string} path
 * @param {unknown} [body]
 * @returns {Promise<{ status: number, ok: boolean, data: any }>}
 */
async function api(method, path, body) {
  /** @type {Record<string, string>} */
  const headers = { accept: "application/json" };
  if (method !== "GET" && session) headers["x-csrf-token"] = session.csrf;
  if (body !== undefined) headers["content-type"] = "application/json";
  const first = method === "GET" ? firstAnswers.get(path) : undefined;
  /** @type {number} */
  let status;
  let data = null;
  if (first) {
    firstAnswers.delete(path);
    // Answered after the caller's own synchronous part, as a fetch is: the first page finishes
    // mounting before its answer puts it into the document.
    await null;
    status = first.status;
    data = first.body ?? null;
  } else {
    let res;
    try {
      res = await fetch(path, {
        method,
        headers,
        body: body === undefined ? undefined : JSON.stringify(body),
        credentials: "same-origin",
        cache: "no-store",
      });
    } catch (e) {
      // The first page's call failed: the page goes into the document to say so.
      if (!path.startsWith("/skeid/session")) attach();
      throw e;
    }
    status = res.status;
    try {
      data = await res.json();
    } catch {
      data = null;
    }
  }
  if (status === 401 && !path.startsWith("/skeid/session")) {
    signedOut("Your session has ended. Sign in again.");
    throw new SignedOut();
  }
  // The first page's call answered: the page goes into the document, to be filled there.
  if (!path.startsWith("/skeid/session")) attach();
  return { status, ok: status >= 200 && status < 300, data };
}

/** @param {any} data @param {number} status */
function errorText(data, status) {
  const e = data && (data.error ?? data.message);
  const msg = typeof e === "string" ? e : e && typeof e.message === "string" ? e.message : "";
  return msg ? `${msg} (HTTP ${status})` : `HTTP ${status}`;
}

// ---- the live stream: one EventSource shared by everything that shows live data -------------

/** @typedef {(snapshot: any) => void} LiveListener */

const live = {
  /** @type {EventSource | null} */
  source: null,
  /** @type {Set<LiveListener>} */
  listeners: new Set(),
  /** @type {ReturnType<typeof setTimeout> | undefined} */
  retry: undefined,
  /** @type {any} */
  last: null,

  /** @param {LiveListener} fn @returns {() => void} the unsubscribe */
  subscribe(fn) {
    this.listeners.add(fn);
    if (this.last) fn(this.last);
    if (!this.source) this.open();
    return () => {
      this.listeners.delete(fn);
      if (this.listeners.size === 0) this.close();
    };
  },

  open() {
    clearTimeout(this.retry);
    const src = new EventSource("/skeid/live");
    this.source = src;
    this.status("connecting…", "connecting");
    src.addEventListener("open", () => this.status("live", "ok"));
    src.addEventListener("live", (ev) => {
      let snap;
      try {
        snap = JSON.parse(/** @type {MessageEvent} */ (ev).data);
      } catch {
        return;
      }
      this.last = snap;
      this.status("live", "ok");
      for (const fn of this.listeners) fn(snap);
    });
    src.addEventListener("error", () => {
      this.status("disconnected — reconnecting", "down");
      // CONNECTING: the browser retries by itself. CLOSED: it gave up (an answer that was not a
      // stream, e.g. 401); ask whether the session still holds, then open a new one.
      if (src.readyState !== EventSource.CLOSED) return;
      this.source = null;
      this.retry = setTimeout(async () => {
        if (this.listeners.size === 0) return;
        const r = await fetch("/skeid/session", { credentials: "same-origin", cache: "no-store" })
          .catch(() => null);
        if (r && r.status === 401) {
          signedOut("Your session has ended. Sign in again.");
          return;
        }
        if (this.listeners.size > 0 && !this.source) this.open();
      }, 1000);
    });
  },

  close() {
    clearTimeout(this.retry);
    this.source?.close();
    this.source = null;
    this.last = null;
    this.status("", "");
  },

  /** @param {string} text @param {string} state */
  status(text, state) {
    setText(streamStatus, text ? `Stream: ${text}` : "");
    streamStatus.dataset.state = state;
  },
};

// ---- pages ---------------------------------------------------------------------------------

/**
 * A page: `waits` when its first screen comes from an admin API call (the page is built off
 * the document until that call answers, on the first page of a load: see route()).
 * @typedef {{ title: string, waits?: boolean, mount: (root: HTMLElement, params: URLSearchParams) => (() => void) | void }} Page
 */

/** A page's heading and a status line for what its buttons did. @param {HTMLElement} root @param {string} title */
function pageHead(root, title) {
  const heading = h("h1", { text: title, tabindex: "-1" });
  const note = h("p", { className: "note", role: "status", "aria-live": "polite" });
  root.append(heading, note);
  return { heading, note };
}

/** A table with a header row; answers it and its body. @param {string[]} cols @param {string} [className] */
function table(cols, className = "") {
  const body = h("tbody");
  const t = h(
    "table",
    { className },
    h("thead", {}, h("tr", {}, ...cols.map((c) => h("th", { scope: "col", text: c })))),
    body,
  );
  return { table: h("div", { className: "scroll" }, t), body };
}

/** A body cell labelled with its column (the narrow layout shows the label). @param {string} label @param {string | Node} [content] */
function td(label, content = "") {
  return h("td", { "data-label": label }, content);
}

// ---- Live ----------------------------------------------------------------------------------

/** @param {any} n */
function nodeHealth(n) {
  const ejected = until(n.ejected_until);
  const backoff = until(n.backoff_until);
  /** @type {string[]} */
  const parts = [];
  let state = "ok";
  if (!n.healthy) {
    parts.push(n.health_reason ? `unhealthy (${n.health_reason})` : "unhealthy");
    state = "bad";
  } else parts.push("healthy");
  if (ejected) {
    parts.push(`ejected ${ejected}`);
    state = "bad";
  }
  if (backoff) {
    parts.push(`backoff ${backoff}`);
    if (state === "ok") state = "warn";
  }
  if (n.draining) {
    parts.push("draining");
    if (state === "ok") state = "warn";
  }
  return { text: parts.join("; "), state };
}

/** @param {any} c */
function capacityText(c) {
  if (!c) return "no reading";
  const age = typeof c.age_ms === "number" ? `, ${(c.age_ms / 1000).toFixed(1)} s old` : "";
  return `${num(c.used)} / ${num(c.limit)} (${c.source ?? "?"}${age})`;
}

/** @param {any} p */
function probeText(p) {
  if (!p) return "—";
  const rest = Object.entries(p).filter(([k, v]) =>
    k !== "state" && k !== "node_id" && (typeof v === "string" || typeof v === "number")
  ).slice(0, 2).map(([k, v]) => `${k}: ${v}`);
  return rest.length ? `${p.state ?? "?"} (${rest.join(", ")})` : String(p.state ?? "?");
}

/** The Live page's node columns (each row's cells are labelled with them), before its actions. */
const NODE_COLUMNS = [
  "Node",
  "Health",
  "In flight",
  "Capacity",
  "Probe",
  "Req/s",
  "Errors",
  "TTFT p50 / p90",
];

/** @type {Page} */
const livePage = {
  title: "Live",
  mount(root) {
    const { note } = pageHead(root, "Live");
    const at = h("p", { className: "muted", text: "Waiting for the first snapshot…" });
    const nodes = table([...NODE_COLUMNS, "Actions"], "nodes");
    const tiers = table(["Alias", "Tier", "Queue", "Oldest wait", "Who waits"]);
    const workers = table(["Worker", "Started", "Restarts", "Requests", "In flight"]);
    root.append(
      at,
      h("h2", { text: "Nodes" }),
      nodes.table,
      h("h2", { text: "Queues by alias tier" }),
      tiers.table,
      h("h2", { text: "Workers" }),
      workers.table,
    );

    /** @type {Map<string, { row: HTMLElement, cells: HTMLElement[], health: HTMLButtonElement, drain: HTMLButtonElement, node: any }>} */
    const rows = new Map();

    /** @param {HTMLButtonElement} btn @param {string} path @param {object} body @param {string} done */
    async function act(btn, path, body, done) {
      btn.disabled = true;
      try {
        const r = await api("POST", path, body);
        setText(note, r.ok ? done : `Failed: ${errorText(r.data, r.status)}`);
      } catch (e) {
        if (!(e instanceof SignedOut)) setText(note, `Failed: ${String(e)}`);
      } finally {
        btn.disabled = false;
      }
    }

    /** @param {string} id */
    function newRow(id) {
      const cells = NODE_COLUMNS.map((label) => td(label));
      const health = /** @type {HTMLButtonElement} */ (h("button", { type: "button" }));
      const drain = /** @type {HTMLButtonElement} */ (h("button", { type: "button" }));
      const path = `/skeid/nodes/${encodeURIComponent(id)}`;
      const entry = {
        row: h("tr", { "data-node": id }),
        cells,
        health,
        drain,
        node: /** @type {any} */ (null),
      };
      health.addEventListener("click", () => {
        const on = !entry.node?.healthy;
        act(
          health,
          `${path}/health`,
          { healthy: on },
          `${id} marked ${on ? "healthy" : "unhealthy"}`,
        );
      });
      drain.addEventListener("click", () => {
        const on = !entry.node?.draining;
        act(
          drain,
          `${path}/drain`,
          { draining: on },
          `${id} ${on ? "draining" : "no longer draining"}`,
        );
      });
      entry.row.append(...cells, td("Actions", h("span", { className: "actions" }, health, drain)));
      return entry;
    }

    /** @param {any} snap */
    function render(snap) {
      setText(at, `Snapshot at ${when(snap.at)}`);
      const seen = new Set();
      for (const n of Array.isArray(snap.nodes) ? snap.nodes : []) {
        const id = String(n.id);
        seen.add(id);
        let entry = rows.get(id);
        if (!entry) {
          entry = newRow(id);
          rows.set(id, entry);
        }
        entry.node = n;
        const hl = nodeHealth(n);
        const lm = n.last_minute ?? {};
        const [c0, c1, c2, c3, c4, c5, c6, c7] = entry.cells;
        if (!c0.firstChild) {
          c0.append(
            h("strong", { className: "id", text: id }),
            h("br"),
            h("small", { className: "muted" }),
          );
        }
        setText(
          /** @type {HTMLElement} */ (c0.lastChild),
          Array.isArray(n.models) ? n.models.join(", ") : "",
        );
        setText(c1, hl.text);
        c1.dataset.state = hl.state;
        const max = typeof n.max_conns === "number" ? n.max_conns : null;
        setText(c2, `${num(n.inflight)} / ${max === null ? "∞" : num(max)}`);
        c2.dataset.inflight = String(n.inflight ?? "");
        setText(c3, capacityText(n.capacity));
        setText(c4, probeText(n.probe));
        setText(c5, typeof lm.rps === "number" ? lm.rps.toFixed(2) : "—");
        setText(c6, `${pct(lm.error_rate)} (${num(lm.errors)} of ${num(lm.requests)})`);
        setText(c7, `${ms(lm.ttft_p50_ms)} / ${ms(lm.ttft_p90_ms)}`);
        setText(entry.health, n.healthy ? "Mark unhealthy" : "Mark healthy");
        setText(entry.drain, n.draining ? "Undrain" : "Drain");
        entry.health.setAttribute(
          "aria-label",
          `${n.healthy ? "Mark unhealthy" : "Mark healthy"} ${id}`,
        );
        entry.drain.setAttribute("aria-label", `${n.draining ? "Undrain" : "Drain"} ${id}`);
        // Appending in snapshot order keeps rows in place (append moves an element only when out of place).
        if (nodes.body.lastChild !== entry.row) nodes.body.append(entry.row);
      }
      for (const [id, entry] of rows) {
        if (!seen.has(id)) {
          entry.row.remove();
          rows.delete(id);
        }
      }
      if (rows.size === 0 && !nodes.body.querySelector(".empty")) {
        nodes.body.append(
          h("tr", { className: "empty" }, h("td", { colspan: "9", text: "No nodes." })),
        );
      } else if (rows.size > 0) nodes.body.querySelector(".empty")?.remove();

      tiers.body.replaceChildren(
        ...(Array.isArray(snap.tiers) && snap.tiers.length
          ? snap.tiers.map((/** @type {any} */ t) =>
            h(
              "tr",
              {},
              td("Alias", String(t.alias)),
              td("Tier", String(t.tier)),
              td("Queue", num(t.queue_length)),
              td("Oldest wait", ms(t.oldest_wait_ms)),
              td(
                "Who waits",
                Array.isArray(t.waiting) && t.waiting.length
                  ? t.waiting.map((/** @type {any} */ w) =>
                    `${w.key_id} (band ${w.band}): ${num(w.queued)} queued, oldest ${
                      ms(w.oldest_wait_ms)
                    }`
                  ).join("; ")
                  : "nobody",
              ),
            )
          )
          : [
            h(
              "tr",
              {},
              h("td", {
                colspan: "5",
                text: "Nobody waits: no request is queued for a tier's capacity.",
              }),
            ),
          ]),
      );
      workers.body.replaceChildren(
        ...(Array.isArray(snap.workers) ? snap.workers : []).map((/** @type {any} */ w) =>
          h(
            "tr",
            {},
            td("Worker", `#${w.index}`),
            td("Started", when(w.started_at)),
            td("Restarts", num(w.restarts)),
            td("Requests", num(w.requests)),
            td("In flight", num(w.inflight)),
          )
        ),
      );
    }
    return live.subscribe(render);
  },
};

// ---- Keys ----------------------------------------------------------------------------------

/** @param {any} b */
function budgetCell(b) {
  if (!b) return "no budget";
  // A budget caps USD, tokens or both: {usd, tokens} in limit, spent and left.
  /** @param {any} v @param {"usd" | "tokens"} unit */
  const part = (
    v,
    unit,
  ) => (typeof v === "number" ? v : v && typeof v[unit] === "number" ? v[unit] : null);
  const unit = part(b.limit, "usd") !== null ? "usd" : "tokens";
  const show = unit === "usd" ? usd : (/** @type {unknown} */ v) => `${num(v)} tokens`;
  const limit = part(b.limit, unit) ?? 0;
  const spent = part(b.spent, unit) ?? 0;
  const left = part(b.left, unit);
  const bar = h("progress", {
    max: String(limit || 1),
    value: String(Math.min(spent, limit || 1)),
    "aria-label": "budget spent",
  });
  const share = limit > 0 ? ` (${((spent / limit) * 100).toFixed(0)} %)` : "";
  return h(
    "span",
    { className: "budget" },
    h("span", { className: "spent", text: `${show(spent)} of ${show(limit)}${share}` }),
    bar,
    h("small", {
      className: "muted",
      text: `left ${left === null ? "—" : show(left)}, ${b.period ?? ""} period, resets ${
        when(b.resets_at)
      }`,
    }),
  );
}

/** @type {Page} */
const keysPage = {
  title: "Keys",
  waits: true,
  mount(root) {
    const { note } = pageHead(root, "Keys");
    const t = table([
      "Key",
      "Policy",
      "Limits",
      "This minute",
      "Budget",
      "Share",
      "Last seen",
    ], "keys");
    root.append(t.table);
    let stopped = false;
    /** @type {ReturnType<typeof setTimeout> | undefined} */
    let timer;
    async function load() {
      try {
        const r = await api("GET", "/skeid/tenancy");
        if (stopped) return;
        if (!r.ok) {
          setText(note, `Could not load keys: ${errorText(r.data, r.status)}`);
        } else {
          setText(note, "");
          const keys = Array.isArray(r.data?.keys) ? r.data.keys : [];
          t.body.replaceChildren(
            ...(keys.length ? keys : [null]).map((/** @type {any} */ k) =>
              k === null ? h("tr", {}, h("td", { colspan: "7", text: "No customer keys." })) : h(
                "tr",
                { "data-key": String(k.key_id) },
                td(
                  "Key",
                  h(
                    "span",
                    {},
                    h("strong", { className: "id", text: String(k.key_id) }),
                    h("br"),
                    h("small", {
                      className: "muted",
                      text: [k.name, k.source].filter(Boolean).join(" · "),
                    }),
                  ),
                ),
                td("Policy", flat(k.policy)),
                td("Limits", flat(k.limits)),
                td(
                  "This minute",
                  `${num(k.windows?.requests_this_minute)} requests, ${
                    num(k.windows?.tokens_this_minute)
                  } tokens`,
                ),
                td("Budget", budgetCell(k.budget)),
                td(
                  "Share",
                  k.share ? `weight ${k.share.weight}, priority ${k.share.priority}` : "—",
                ),
                td("Last seen", when(k.last_seen)),
              )
            ),
          );
        }
      } catch (e) {
        if (e instanceof SignedOut) return;
        setText(note, `Could not load keys: ${String(e)}`);
      }
      if (!stopped) timer = setTimeout(load, 2000);
    }
    load();
    return () => {
      stopped = true;
      clearTimeout(timer);
    };
  },
};

// ---- Usage ---------------------------------------------------------------------------------

const HOUR = 3_600_000;
const PALETTE = ["#2563eb", "#d97706", "#059669", "#db2777", "#7c3aed", "#0891b2", "#6b7280"];
const METRICS = /** @type {const} */ ([
  ["requests", "Requests", num],
  ["input_tokens", "Input tokens", num],
  ["output_tokens", "Output tokens", num],
  ["cached_tokens", "Cached tokens", num],
  ["cost_usd", "Cost", usd],
]);

/** The query of a range that ends with the current hour. @param {string} range @param {string} by */
function seriesQuery(range, by) {
  const hourStart = Math.floor(Date.now() / HOUR) * HOUR;
  const to = new Date(hourStart + HOUR).toISOString();
  if (range === "hour") return { from: new Date(hourStart).toISOString(), to, by, step: "hour" };
  if (range === "day") {
    return { from: new Date(hourStart - 23 * HOUR).toISOString(), to, by, step: "hour" };
  }
  const dayStart = Math.floor(Date.now() / (24 * HOUR)) * 24 * HOUR;
  return { from: new Date(dayStart - 29 * 24 * HOUR).toISOString(), to, by, step: "day" };
}

/**
 * A stacked bar chart of one metric, drawn as SVG from the buckets: a bar per bucket, a
 * segment per group (colour by group; the legend names them in text).
 * @param {string} title @param {(v: number) => string} fmt @param {any[]} buckets
 * @param {string} metric @param {Map<string, string>} colours
 */
function chart(title, fmt, buckets, metric, colours) {
  const W = 480, H = 150, padL = 8, padB = 18, padT = 6;
  const totals = buckets.map((b) =>
    b.groups.reduce((/** @type {number} */ a, /** @type {any} */ g) => a + (g[metric] || 0), 0)
  );
  const max = Math.max(0, ...totals);
  const total = totals.reduce((a, b) => a + b, 0);
  const svg = s("svg", {
    viewBox: `0 0 ${W} ${H}`,
    role: "img",
    "aria-label": `${title} per ${buckets.length} buckets, total ${fmt(total)}`,
    class: "chart",
  });
  const plotW = W - padL * 2, plotH = H - padB - padT;
  svg.append(
    s("line", { x1: padL, x2: W - padL, y1: padT + plotH, y2: padT + plotH, class: "axis" }),
  );
  const bw = plotW / Math.max(1, buckets.length);
  // One path per colour, a rectangle per segment in it: a few elements a chart, where a rect
  // per segment made hundreds. Over each bucket lies a transparent strip whose tooltip names
  // every group's value in that bucket (made on the first hover: showTip).
  /** @type {Map<string, string>} */
  const paths = new Map();
  /** @type {SVGElement[]} */
  const strips = [];
  const w = Math.max(0.5, bw * 0.8).toFixed(2);
  buckets.forEach((b, i) => {
    let y = padT + plotH;
    const x = (padL + i * bw + bw * 0.1).toFixed(2);
    /** @type {string[]} */
    const parts = [];
    for (const g of b.groups) {
      const v = g[metric] || 0;
      if (v <= 0 || max <= 0) continue;
      const hgt = (v / max) * plotH;
      y -= hgt;
      const fill = colours.get(g.name) ?? PALETTE[PALETTE.length - 1];
      const d = `M${x} ${y.toFixed(2)}h${w}v${Math.max(0.5, hgt).toFixed(2)}h-${w}z`;
      paths.set(fill, (paths.get(fill) ?? "") + d);
      parts.push(`${g.name || "(none)"} ${fmt(v)}`);
    }
    if (parts.length === 0) return;
    strips.push(s("rect", {
      x: (padL + i * bw).toFixed(2),
      y: padT,
      width: bw.toFixed(2),
      height: plotH,
      class: "bucket",
      "data-tip": `${b.start}: ${parts.join(", ")}`,
    }));
  });
  for (const [fill, d] of paths) svg.append(s("path", { d, fill }));
  svg.append(...strips);
  const label = (
    /** @type {number} */ x,
    /** @type {string} */ text,
    /** @type {string} */ anchor,
  ) => {
    const t = s("text", { x, y: H - 4, "text-anchor": anchor, class: "tick" });
    t.textContent = text;
    svg.append(t);
  };
  if (buckets.length) {
    label(padL, buckets[0].start.slice(5, 13).replace("T", " "), "start");
    label(W - padL, buckets[buckets.length - 1].start.slice(5, 13).replace("T", " "), "end");
  }
  const top = s("text", { x: padL + 2, y: padT + 10, class: "tick" });
  top.textContent = `max ${fmt(max)}`;
  svg.append(top);
  return h(
    "figure",
    { className: "card", "data-metric": metric },
    h("figcaption", {}, h("span", { text: title }), h("strong", { text: fmt(total) })),
    svg,
  );
}

/**
 * A chart bucket's tooltip: its `<title>` (text), made from its `data-tip` the first time a
 * pointer comes over it.
 * @param {Event} ev
 */
function showTip(ev) {
  const r = /** @type {Element} */ (ev.target);
  const tip = r.getAttribute("data-tip");
  if (tip === null || r.firstChild) return;
  const title = s("title");
  title.textContent = tip;
  r.append(title);
}

/** @type {Page} */
const usagePage = {
  title: "Usage",
  waits: true,
  mount(root, params) {
    const { note } = pageHead(root, "Usage");
    const range = /** @type {HTMLSelectElement} */ (h(
      "select",
      { id: "usage-range" },
      h("option", { value: "hour", text: "This hour" }),
      h("option", { value: "day", text: "Last 24 hours", selected: true }),
      h("option", { value: "30d", text: "Last 30 days" }),
    ));
    const by = /** @type {HTMLSelectElement} */ (h(
      "select",
      { id: "usage-by" },
      h("option", { value: "key", text: "Customer key" }),
      h("option", { value: "alias", text: "Alias (requested model)" }),
      h("option", { value: "model", text: "Served model", selected: true }),
      h("option", { value: "node", text: "Node" }),
    ));
    const csv = h("a", {
      className: "button",
      href: "#",
      download: "skeid-usage.csv",
      text: "Download CSV",
    });
    const since = h("p", { className: "notice", hidden: true });
    const charts = h("div", { className: "charts", on: { pointerover: showTip } });
    const legend = h("ul", { className: "legend", "aria-label": "Groups" });
    const t = table(["Group", "Requests", "Errors", "Input", "Output", "Cached", "Cost"], "usage");
    root.append(
      h(
        "div",
        { className: "controls" },
        h("label", { for: "usage-range" }, "Range "),
        range,
        h("label", { for: "usage-by" }, "Split by "),
        by,
        csv,
      ),
      since,
      legend,
      charts,
      h("h2", { text: "Totals over the range" }),
      t.table,
    );
    let seq = 0;
    async function load() {
      const mySeq = ++seq;
      const q = seriesQuery(range.value, by.value);
      const qs = new URLSearchParams(q).toString();
      csv.setAttribute("href", `/skeid/usage/series?${qs}&format=csv`);
      setText(note, "Loading…");
      let r;
      try {
        r = await api("GET", `/skeid/usage/series?${qs}`);
      } catch (e) {
        if (!(e instanceof SignedOut)) setText(note, `Could not load usage: ${String(e)}`);
        return;
      }
      if (mySeq !== seq) return;
      if (!r.ok) {
        setText(
          note,
          r.data?.enabled === false
            ? "No usage store is configured (usage_store in the config), so there is no usage to chart."
            : `Could not load usage: ${errorText(r.data, r.status)}`,
        );
        charts.replaceChildren();
        return;
      }
      const a = r.data;
      setText(note, `${when(a.from)} to ${when(a.to)}, per ${a.step}, from the ${a.backend} store`);
      since.hidden = !a.since_start;
      setText(
        since,
        a.since_start
          ? "The jsonlog store keeps no roll-ups on disk: these charts cover the time since this gateway started."
          : "",
      );
      /** @type {Map<string, any>} */
      const sums = new Map();
      for (const b of a.buckets) {
        for (const g of b.groups) {
          const acc = sums.get(g.name) ??
            {
              name: g.name,
              requests: 0,
              errors: 0,
              input_tokens: 0,
              output_tokens: 0,
              cached_tokens: 0,
              cost_usd: 0,
            };
          for (
            const k of [
              "requests",
              "errors",
              "input_tokens",
              "output_tokens",
              "cached_tokens",
              "cost_usd",
            ]
          ) {
            acc[k] += g[k] || 0;
          }
          sums.set(g.name, acc);
        }
      }
      const groups = [...sums.values()].sort((x, y) => y.requests - x.requests);
      /** @type {Map<string, string>} */
      const colours = new Map();
      groups.forEach((g, i) => colours.set(g.name, PALETTE[Math.min(i, PALETTE.length - 1)]));
      legend.replaceChildren(
        ...groups.slice(0, PALETTE.length).map((g) => {
          const sw = s("svg", { width: 12, height: 12, "aria-hidden": "true" });
          sw.append(s("rect", { width: 12, height: 12, fill: colours.get(g.name) ?? "" }));
          return h("li", {}, sw, h("span", { text: g.name || "(none)" }));
        }),
        ...(groups.length > PALETTE.length
          ? [h("li", { text: `and ${groups.length - PALETTE.length + 1} more in grey` })]
          : []),
      );
      charts.replaceChildren(
        ...METRICS.map(([m, title, fmt]) => chart(title, fmt, a.buckets, m, colours)),
      );
      t.body.replaceChildren(
        ...(groups.length ? groups : [null]).map((g) =>
          g === null ? h("tr", {}, h("td", { colspan: "7", text: "No usage in this range." })) : h(
            "tr",
            {},
            td("Group", g.name || "(none)"),
            td("Requests", num(g.requests)),
            td("Errors", num(g.errors)),
            td("Input", num(g.input_tokens)),
            td("Output", num(g.output_tokens)),
            td("Cached", num(g.cached_tokens)),
            td("Cost", usd(g.cost_usd)),
          )
        ),
      );
      drawn("usage", String(mySeq));
    }
    for (const [select, name] of /** @type {const} */ ([[range, "range"], [by, "by"]])) {
      const wanted = params.get(name);
      if (wanted && [...select.options].some((o) => o.value === wanted)) select.value = wanted;
    }
    range.addEventListener("change", load);
    by.addEventListener("change", load);
    load();
    return () => {
      seq++;
    };
  },
};

// ---- Requests ------------------------------------------------------------------------------

const FILTERS = /** @type {const} */ ([
  ["api_key_id", "Key"],
  ["model", "Model"],
  ["node", "Node"],
  ["status", "Status"],
  ["error_type", "Error type"],
]);

/** @type {Page} */
const requestsPage = {
  title: "Requests",
  waits: true,
  mount(root, params) {
    const { note } = pageHead(root, "Requests");
    /** @type {Record<string, HTMLInputElement>} */
    const inputs = {};
    const form = h(
      "form",
      { className: "controls filters", role: "search" },
      ...FILTERS.map(([name, label]) => {
        const input = /** @type {HTMLInputElement} */ (h("input", {
          id: `f-${name}`,
          name,
          autocomplete: "off",
          size: name === "status" ? "5" : "14",
          placeholder: name === "status" ? "e.g. 429" : "",
        }));
        inputs[name] = input;
        return h(
          "span",
          { className: "field" },
          h("label", { for: `f-${name}`, text: label }),
          input,
        );
      }),
      h("button", { type: "submit", text: "Filter" }),
      h("button", { type: "reset", text: "Clear" }),
    );
    const t = table([
      "Time",
      "Key",
      "Model",
      "Node",
      "Status",
      "Tokens in / out",
      "Cost",
      "Duration",
    ], "requests");
    const older = /** @type {HTMLButtonElement} */ (h("button", {
      type: "button",
      text: "Older",
      hidden: true,
    }));
    const detail = h("section", { className: "detail", hidden: true, "aria-label": "Event" });
    root.append(form, t.table, h("p", {}, older), detail);
    /** @type {string | null} */
    let next = null;
    // `/skeid/ui/requests?limit=N` (1–200) sets the page size; filters may ride there too.
    const asked = Number(params.get("limit"));
    const pageSize = Number.isInteger(asked) && asked >= 1 && asked <= 200 ? asked : 50;
    for (const [name] of FILTERS) {
      const v = params.get(name);
      if (v) inputs[name].value = v;
    }

    /** @param {string} id */
    async function show(id) {
      detail.hidden = false;
      detail.replaceChildren(h("h2", { text: `Event ${id}` }), h("p", { text: "Loading…" }));
      try {
        const r = await api("GET", `/skeid/usage/events/${encodeURIComponent(id)}`);
        const body = r.ok
          ? JSON.stringify(r.data?.event ?? r.data, null, 2)
          : errorText(r.data, r.status);
        const close = h("button", { type: "button", text: "Close" });
        close.addEventListener("click", () => {
          detail.hidden = true;
        });
        detail.replaceChildren(h("h2", { text: `Event ${id}` }), h("pre", { text: body }), close);
        close.focus();
      } catch (e) {
        if (!(e instanceof SignedOut)) detail.replaceChildren(h("p", { text: String(e) }));
      }
    }

    /** @param {boolean} more */
    async function load(more) {
      const q = new URLSearchParams({ limit: String(pageSize) });
      for (const [name] of FILTERS) {
        const v = inputs[name].value.trim();
        if (v) q.set(name, v);
      }
      if (more && next) q.set("before", next);
      setText(note, "Loading…");
      let r;
      try {
        r = await api("GET", `/skeid/usage/events?${q}`);
      } catch (e) {
        if (!(e instanceof SignedOut)) setText(note, `Could not load requests: ${String(e)}`);
        return;
      }
      if (!r.ok) {
        setText(note, `Could not load requests: ${errorText(r.data, r.status)}`);
        return;
      }
      const events = Array.isArray(r.data?.events) ? r.data.events : [];
      next = typeof r.data?.next === "string" && r.data.next ? r.data.next : null;
      older.hidden = next === null;
      const rows = events.map((/** @type {any} */ e) => {
        const id = String(e.event_id ?? e.id ?? "");
        const open = h("button", {
          type: "button",
          className: "link",
          text: when(e.created_at),
          "aria-label": `Show event ${id}`,
        });
        const model = e.requested_model && e.requested_model !== e.model
          ? `${e.requested_model} → ${e.model}`
          : String(e.model ?? "");
        const status = `${e.status_code ?? ""}${
          e.ok ? " ok" : e.error_type ? ` ${e.error_type}` : " error"
        }`;
        return h(
          "tr",
          { "data-event": id },
          td("Time", open),
          td("Key", String(e.api_key_id ?? "")),
          td("Model", model),
          td("Node", String(e.node_id ?? "")),
          h("td", { "data-label": "Status", "data-state": e.ok ? "ok" : "bad", text: status }),
          td("Tokens in / out", `${num(e.input_tokens)} / ${num(e.output_tokens)}`),
          td("Cost", usd(e.cost_total_usd)),
          td("Duration", ms(e.duration_ms)),
        );
      });
      if (more) t.body.append(...rows);
      else {
        t.body.replaceChildren(
          ...(rows.length
            ? rows
            : [h("tr", {}, h("td", { colspan: "8", text: "No matching requests." }))]),
        );
      }
      const shown = t.body.querySelectorAll("tr[data-event]").length;
      setText(
        note,
        `${shown} request${shown === 1 ? "" : "s"} shown, newest first${
          r.data?.source ? ` (from ${r.data.source})` : ""
        }`,
      );
      drawn("requests", String(shown));
    }
    form.addEventListener("submit", (ev) => {
      ev.preventDefault();
      load(false);
    });
    form.addEventListener("reset", () => setTimeout(() => load(false), 0));
    older.addEventListener("click", () => load(true));
    // One listener for every row's button (rows come fifty at a time).
    t.body.addEventListener("click", (ev) => {
      const open = /** @type {Element} */ (ev.target).closest("tr[data-event] button.link");
      const row = open?.closest("tr[data-event]");
      if (row instanceof HTMLElement) show(row.dataset.event ?? "");
    });
    load(false);
  },
};

// ---- Config --------------------------------------------------------------------------------

/** @param {[string, string | Node][]} pairs */
function dl(pairs) {
  return h(
    "dl",
    { className: "facts" },
    ...pairs.flatMap(([k, v]) => [h("dt", { text: k }), h("dd", {}, v)]),
  );
}

/** @param {any[]} errors */
function errorList(errors) {
  return h(
    "ul",
    { className: "errors" },
    ...errors.map((e) =>
      h(
        "li",
        {},
        h("code", { text: String(e.path ?? "") }),
        e.line ? ` (line ${e.line})` : "",
        `: ${e.message ?? flat(e)}`,
      )
    ),
  );
}

/** @type {Page} */
const configPage = {
  title: "Config",
  waits: true,
  mount(root) {
    const { note } = pageHead(root, "Config");
    const facts = h("div");
    const check = /** @type {HTMLButtonElement} */ (h("button", {
      type: "button",
      text: "Dry run the file on disk",
    }));
    const reload =
      /** @type {HTMLButtonElement} */ (h("button", { type: "button", text: "Reload" }));
    const result = h("section", { className: "result", "aria-live": "polite" });
    root.append(facts, h("div", { className: "controls" }, check, reload), result);

    async function load() {
      let r;
      try {
        r = await api("GET", "/skeid/config");
      } catch (e) {
        if (!(e instanceof SignedOut)) setText(note, String(e));
        return;
      }
      if (!r.ok) {
        setText(note, `Could not load the config: ${errorText(r.data, r.status)}`);
        return;
      }
      const c = r.data;
      const failure = c.last_failure;
      facts.replaceChildren(
        dl([
          ["File", String(c.path ?? "—")],
          ["SHA-256", h("code", { text: String(c.file_sha256 ?? "—") })],
          ["Applied at", when(c.applied_at)],
          [
            "Reload status",
            c.ok === false
              ? `failing since ${when(c.failed_at)}: ${c.error ?? "unknown error"}`
              : `ok${c.failures ? ` (${num(c.failures)} failed reloads since start)` : ""}`,
          ],
          [
            "Last change",
            c.last_change
              ? `${when(c.last_change.at)}: ${flat(c.last_change.sections) || "no sections"}`
              : "none since start",
          ],
        ]),
        h("h2", { text: "Last failed reload" }),
        failure
          ? h(
            "div",
            { className: "failure" },
            h("p", { text: `At ${when(failure.at)}; the config in force stayed.` }),
            errorList(Array.isArray(failure.errors) ? failure.errors : []),
          )
          : h("p", { className: "muted", text: "None since start." }),
      );
    }

    check.addEventListener("click", async () => {
      check.disabled = true;
      try {
        const r = await api("POST", "/skeid/config/check");
        const a = r.data ?? {};
        if (r.ok && a.ok) {
          const sections = flat(a.changes?.sections);
          result.replaceChildren(
            h("h2", { text: "Dry run: the file is valid" }),
            h("p", {
              text: sections && sections !== "—"
                ? `A reload would change: ${sections}.`
                : "A reload would change nothing.",
            }),
            h("p", { className: "muted", text: `${a.path ?? ""} sha256 ${a.file_sha256 ?? "—"}` }),
          );
        } else {
          result.replaceChildren(
            h("h2", { text: "Dry run: the file has errors" }),
            Array.isArray(a.errors) && a.errors.length
              ? errorList(a.errors)
              : h("p", { text: errorText(a, r.status) }),
          );
        }
      } catch (e) {
        if (!(e instanceof SignedOut)) result.replaceChildren(h("p", { text: String(e) }));
      } finally {
        check.disabled = false;
      }
    });
    reload.addEventListener("click", async () => {
      reload.disabled = true;
      try {
        const r = await api("POST", "/skeid/config/reload");
        result.replaceChildren(
          h("h2", { text: r.ok ? "Reloaded" : "Reload failed; the config in force stayed" }),
          h("p", { text: r.ok ? flat(r.data?.status) : errorText(r.data, r.status) }),
        );
        await load();
      } catch (e) {
        if (!(e instanceof SignedOut)) result.replaceChildren(h("p", { text: String(e) }));
      } finally {
        reload.disabled = false;
      }
    });
    load();
  },
};

// ---- Sign-in -------------------------------------------------------------------------------

/** @param {string} [message] */
function signInPage(message) {
  showingSignIn = true;
  top.hidden = true;
  live.close();
  const input = /** @type {HTMLInputElement} */ (h("input", {
    id: "admin-key",
    type: "password",
    autocomplete: "off",
    spellcheck: "false",
    required: true,
  }));
  const msg = h("p", { className: "message", role: "alert", text: message ?? "" });
  const submit =
    /** @type {HTMLButtonElement} */ (h("button", { type: "submit", text: "Sign in" }));
  const form = h(
    "form",
    { className: "signin" },
    h("h1", { text: "Skeid console" }),
    h("p", {
      className: "muted",
      text:
        "Sign in with the gateway's admin key. It is exchanged for a session and not kept in this browser.",
    }),
    h("label", { for: "admin-key", text: "Admin key" }),
    input,
    submit,
    msg,
  );
  form.addEventListener("submit", async (ev) => {
    ev.preventDefault();
    submit.disabled = true;
    const key = input.value;
    // The key leaves the field at once: it lives only in this request's body.
    input.value = "";
    try {
      const r = await api("POST", "/skeid/session", { admin_key: key });
      if (r.ok && r.data && typeof r.data.csrf_token === "string") {
        session = { csrf: r.data.csrf_token, expiresAt: String(r.data.expires_at ?? "") };
        route();
        return;
      }
      setText(
        msg,
        r.status === 401
          ? "Wrong admin key (401). The attempt was counted."
          : r.status === 429
          ? "Too many failed sign-ins from this address (429). Wait a minute, then try again."
          : `Sign-in failed: ${errorText(r.data, r.status)}`,
      );
    } catch (e) {
      setText(msg, `Sign-in failed: ${String(e)}`);
    } finally {
      submit.disabled = false;
    }
    input.focus();
  });
  main.replaceChildren(form);
  input.focus();
}

/** @param {string} message */
function signedOut(message) {
  // Before the first session check answered, a 401 only means "not signed in yet".
  const had = session !== null;
  session = null;
  unmount();
  if (!had && showingSignIn) return;
  signInPage(had ? message : undefined);
}

// ---- routing -------------------------------------------------------------------------------

/** @type {Record<string, Page>} */
const PAGES = {
  live: livePage,
  keys: keysPage,
  usage: usagePage,
  requests: requestsPage,
  config: configPage,
};

/** @type {(() => void) | void} */
let current;
function unmount() {
  if (typeof current === "function") current();
  current = undefined;
  offDocument = null;
}

/**
 * The first page of a load, built off the document until its first call answers: the
 * browser then lays out and paints the page once, with its data, instead of laying out its
 * empty frame first while the answer waits behind that work. Until then the
 * document shows "Loading…".
 * @type {HTMLElement | null}
 */
let offDocument = null;

/** Puts the first page into the document (once its first call answered). */
function attach() {
  if (offDocument === null) return;
  main.replaceChildren(...offDocument.childNodes);
  offDocument = null;
}

/**
 * An address of the old form (`/skeid/ui#/usage?range=30d`) becomes the page's own
 * (`/skeid/ui/usage?range=30d`), so links kept from before still open their view; one naming no
 * page (an old `#/signin`) becomes the landing page's, which a reload also finds. True when it
 * was one.
 */
function fromHash() {
  const m = location.hash.match(/^#\/(\w+)(?:\?(.*))?$/);
  if (m) {
    const to = PAGES[m[1]] ? `/skeid/ui/${m[1]}${m[2] ? `?${m[2]}` : ""}` : "/skeid/ui";
    history.replaceState(null, "", to);
  }
  return m !== null;
}

/** The address (path and query) of the page last mounted. */
let mountedAt = "";

function route() {
  if (!session && !booting) return;
  showingSignIn = false;
  // Each page has its address (`/skeid/ui/usage?range=30d&by=key`): its settings ride in the
  // query, so a link opens that view, and the gateway can name its first calls in the HTML.
  const m = location.pathname.match(/^\/skeid\/ui\/(\w+)\/?$/);
  const name = m && PAGES[m[1]] ? m[1] : "live";
  const params = new URLSearchParams(location.search);
  const page = PAGES[name];
  mountedAt = location.pathname + location.search;
  unmount();
  top.hidden = session === null;
  for (const a of top.querySelectorAll("nav a")) {
    if (/** @type {HTMLElement} */ (a).dataset.page === name) {
      a.setAttribute("aria-current", "page");
    } else a.removeAttribute("aria-current");
  }
  document.title = `${page.title} · Skeid console`;
  const root = booting && page.waits ? h("div") : main;
  if (root === main) main.replaceChildren();
  current = page.mount(root, params);
  if (root !== main) offDocument = root;
  // Focus follows a change of page (a reader hears the new heading). The first page of a load
  // starts at the top anyway, and its focus would lay the page out once before its data.
  if (!booting) main.querySelector("h1")?.focus();
}

// Back and forward change the page; a fragment of its own (the skip link's `#main`) does not.
globalThis.addEventListener("popstate", () => {
  if (location.pathname + location.search !== mountedAt) route();
});
globalThis.addEventListener("hashchange", () => {
  if (fromHash()) route();
});
// The nav bar's links change the page in place (a click with a modifier opens a new tab as
// usual; the new tab loads that page's address).
top.querySelector("nav")?.addEventListener("click", (ev) => {
  const e = /** @type {MouseEvent} */ (ev);
  const a = /** @type {HTMLElement} */ (e.target).closest("a[data-page]");
  if (!(a instanceof HTMLAnchorElement)) return;
  if (e.button !== 0 || e.metaKey || e.ctrlKey || e.shiftKey || e.altKey) return;
  e.preventDefault();
  if (a.href === location.href) return;
  history.pushState(null, "", a.href);
  route();
});
document.getElementById("signout")?.addEventListener("click", async () => {
  try {
    await api("DELETE", "/skeid/session");
  } catch {
    // signed out either way
  }
  session = null;
  unmount();
  history.replaceState(null, "", "/skeid/ui");
  signInPage("Signed out.");
});

// The first page is mounted at once, while the session check is under way: both usually
// answer from the page's HTML, and otherwise travel together (one round trip less before the
// first chart). Without a session its calls answer 401 and the sign-in page takes over; writes
// wait for the check (they need the CSRF token it brings).
(async () => {
  fromHash();
  if (firstAnswers.get("/skeid/session")?.status === 401) {
    // The HTML says there is no session: the sign-in form at once, no page mounted behind it.
    firstAnswers.clear();
    booting = false;
    signInPage();
    return;
  }
  const check = api("GET", "/skeid/session").catch(() => null);
  route();
  booting = false;
  // The first page has taken its answers (its first calls are made as it mounts). One it did not
  // take (its clock and the gateway's on two sides of an hour) is not kept to be shown as
  // current later.
  firstAnswers.clear();
  const r = await check;
  if (r && r.ok && r.data && typeof r.data.csrf_token === "string") {
    session = { csrf: r.data.csrf_token, expiresAt: String(r.data.expires_at ?? "") };
    if (!showingSignIn) top.hidden = false;
    else route();
    return;
  }
  if (!showingSignIn) {
    unmount();
    signInPage();
  }
})();
