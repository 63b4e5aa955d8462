// Batched differential oracle around the official TypeScript client.
//
// One node process judges a whole batch of AG-UI streams, because starting
// node (and loading @ag-ui/client) costs far more than replaying a stream: a
// property test that checks thousands of streams could not afford one process
// per stream.
//
// Input (a file path argument, or stdin when the argument is missing or "-"):
// a JSON array of cases. A case is either a bare array of wire events or an
// object
//   {"stream": [...events...]           replayed in-process, or
//    "url": "http://...", "headers": {}  run against a live endpoint (HttpAgent:
//                                        POST RunAgentInput, SSE back),
//    "method": "GET",                    with "url": HttpAgent GETs the url instead (no
//                                        body): a durable endpoint's thread history or
//                                        resume route ("headers" may carry Last-Event-ID),
//    "prefixSse": "...",                 with "url": SSE text the agent's fetch yields
//                                        before the response body — what a client that
//                                        was cut and resumed has seen on its first
//                                        connection, so the agent sees the joined stream,
//    "deny": ["tool", ...] | "allow": ["tool", ...],   (FilterToolCallsMiddleware)
//    "threadId": "...", "runId": "...", "initialMessages": [...], "initialState": {...},
//    "tools": [...], "context": [...], "forwardedProps": {...}, "resume": [...],
//    "abortAfterEvents": n,   call agent.abortRun() once n events were delivered
//    "timeoutMs": n}          abort and fail the case after n ms (default 30000 for url)
// Output: one JSON line per case, in input order:
//   {"outcome": "completed" | "failed", "error": string | null,
//    "events": [...what onEvent delivered...], "messages": [...], "state": ...,
//    "warnings": ["console output of the client while it ran this case", ...]}
//
// Each case gets a brand-new agent, so no messages, state or middleware state
// leak from one case into the next. Everything the client writes to the console
// is captured per case, which also keeps stdout reserved for results.
import { readFileSync } from "node:fs";
import { from } from "rxjs";
import { AbstractAgent, FilterToolCallsMiddleware, HttpAgent } from "@ag-ui/client";

// Empty means "do not suppress": we want the chunk-transformation warnings.
process.env.SUPPRESS_TRANSFORMATION_WARNINGS = "";

let captured = [];
const capture = (...parts) => {
  captured.push(parts.map((p) => (typeof p === "string" ? p : safeString(p))).join(" "));
};
console.log = capture;
console.info = capture;
console.debug = capture;
console.warn = capture;
console.error = capture;

// Rejections the client raises outside the runAgent() promise still belong to
// the case being replayed; record them instead of crashing the batch.
let strayErrors = [];
process.on("unhandledRejection", (reason) => strayErrors.push(describe(reason)));

function safeString(value) {
  if (value instanceof Error) return describe(value);
  try {
    return JSON.stringify(value);
  } catch {
    return String(value);
  }
}

function describe(err) {
  return String((err && err.message) || err);
}

class ReplayAgent extends AbstractAgent {
  constructor(config, stream) {
    super(config);
    this.stream = stream;
  }

  run() {
    return from(this.stream);
  }

  clone() {
    // Middleware may clone the agent; the clone must replay the same events.
    const copy = super.clone();
    copy.stream = this.stream;
    return copy;
  }
}

function normalise(raw, index) {
  const c = Array.isArray(raw) ? { stream: raw } : raw;
  if (c === null || typeof c !== "object" || (!Array.isArray(c.stream) && typeof c.url !== "string")) {
    throw new Error(
      `case #${index}: expected an array of events, or an object with a "stream" array or a "url"`,
    );
  }
  if (c.deny !== undefined && c.allow !== undefined) {
    throw new Error(`case #${index}: give "deny" or "allow", not both`);
  }
  return c;
}

function threadIdOf(c) {
  if (typeof c.threadId === "string") return c.threadId;
  if (!Array.isArray(c.stream)) return "oracle-thread";
  const first = c.stream.find((e) => e && e.type === "RUN_STARTED" && typeof e.threadId === "string");
  return first ? first.threadId : "oracle-thread";
}

// HttpAgent with its request made a GET (no body): the durable routes stream
// a run or a thread's history in answer to a GET.
class GetAgent extends HttpAgent {
  requestInit(input) {
    const init = super.requestInit(input);
    const headers = { ...init.headers };
    delete headers["Content-Type"];
    return { method: "GET", headers, signal: init.signal };
  }
}

// A fetch whose response body is `prefix` (SSE text) followed by the real body:
// the bytes a resuming client joins, as one stream for HttpAgent's parser.
function prefixedFetch(prefix) {
  return async (url, init) => {
    const response = await fetch(url, init);
    if (!response.ok || response.body === null) return response;
    const reader = response.body.getReader();
    const body = new ReadableStream({
      start(controller) {
        controller.enqueue(new TextEncoder().encode(prefix));
      },
      async pull(controller) {
        const { done, value } = await reader.read();
        if (done) controller.close();
        else controller.enqueue(value);
      },
      cancel(reason) {
        return reader.cancel(reason);
      },
    });
    return new Response(body, { status: response.status, headers: response.headers });
  };
}

function makeAgent(c) {
  const config = {
    threadId: threadIdOf(c),
    initialMessages: c.initialMessages ?? [],
    initialState: c.initialState ?? {},
  };
  if (typeof c.url === "string") {
    const http = { ...config, url: c.url, headers: c.headers ?? {} };
    if (typeof c.prefixSse === "string") http.fetch = prefixedFetch(c.prefixSse);
    return c.method === "GET" ? new GetAgent(http) : new HttpAgent(http);
  }
  return new ReplayAgent(config, c.stream);
}

function runParameters(c) {
  const params = { runId: c.runId ?? "oracle-run" };
  for (const key of ["tools", "context", "forwardedProps", "resume"]) {
    if (c[key] !== undefined) params[key] = c[key];
  }
  return params;
}

async function judge(c) {
  captured = [];
  strayErrors = [];
  const agent = makeAgent(c);
  if (c.deny !== undefined) agent.use(new FilterToolCallsMiddleware({ disallowedToolCalls: c.deny }));
  if (c.allow !== undefined) agent.use(new FilterToolCallsMiddleware({ allowedToolCalls: c.allow }));
  const events = [];
  const result = { outcome: "completed", error: null };
  const onEvent = ({ event }) => {
    events.push(event);
    if (c.abortAfterEvents !== undefined && events.length === c.abortAfterEvents) agent.abortRun();
  };
  const timeoutMs = c.timeoutMs ?? (typeof c.url === "string" ? 30000 : undefined);
  let timer;
  const timeout = new Promise((_, reject) => {
    if (timeoutMs === undefined) return;
    timer = setTimeout(() => {
      agent.abortRun();
      reject(new Error(`oracle timeout: the run did not settle within ${timeoutMs} ms`));
    }, timeoutMs);
  });
  try {
    await Promise.race([agent.runAgent(runParameters(c), { onEvent }), timeout]);
  } catch (err) {
    result.outcome = "failed";
    result.error = describe(err);
  } finally {
    clearTimeout(timer);
  }
  // Let queued microtasks/rejections of this run settle before reading results.
  await new Promise((resolve) => setImmediate(resolve));
  if (result.error === null && strayErrors.length > 0) {
    result.outcome = "failed";
    result.error = strayErrors[0];
  }
  result.events = events;
  result.messages = agent.messages;
  result.state = agent.state === undefined ? null : agent.state;
  result.warnings = captured;
  return result;
}

const source = process.argv[2];
const text = readFileSync(source === undefined || source === "-" ? 0 : source, "utf8");
const doc = JSON.parse(text);
if (!Array.isArray(doc)) {
  process.stderr.write("oracle.mjs: input must be a JSON array of cases\n");
  process.exit(2);
}
const cases = doc.map(normalise);
for (const c of cases) {
  const result = await judge(c);
  process.stdout.write(JSON.stringify(result) + "\n");
}
// Exit now rather than when idle keep-alive sockets of HttpAgent's fetch time out.
// Writes to a pipe or file are synchronous in node, so nothing is lost.
process.exit(0);
