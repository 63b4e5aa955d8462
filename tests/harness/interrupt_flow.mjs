// One approval flow through the official TypeScript client, on one HttpAgent:
// run → the client's own pendingInterrupts → resume answering each → result.
//
// Input (a JSON file path argument): {"url", "threadId", "messages": [...],
//   "tools": [...], "answer": {"status": "resolved" | "cancelled", "payload": ...},
//   "byReason": {"<reason>": answer, ...}}
// — each pending interrupt gets the answer for its reason, else "answer".
// Output (one JSON line): {"first": {"error", "events", "pendingInterrupts"},
//   "second": {"error", "events", "pendingInterrupts", "messages"}} ("second" is
//   null when the first run left nothing pending or failed).
import { readFileSync } from "node:fs";
import { HttpAgent } from "@ag-ui/client";

const captured = [];
for (const name of ["log", "info", "debug", "warn", "error"]) {
  console[name] = (...parts) => captured.push(parts.map(String).join(" "));
}

async function run(agent, params) {
  const events = [];
  const result = { error: null };
  try {
    await agent.runAgent(params, { onEvent: ({ event }) => events.push(event) });
  } catch (err) {
    result.error = String((err && err.message) || err);
  }
  result.events = events;
  result.pendingInterrupts = agent.pendingInterrupts;
  result.messages = agent.messages;
  return result;
}

const c = JSON.parse(readFileSync(process.argv[2], "utf8"));
const agent = new HttpAgent({
  url: c.url,
  threadId: c.threadId,
  initialMessages: c.messages ?? [],
});
const tools = c.tools ?? [];
const first = await run(agent, { runId: "run-ask", tools });
let second = null;
if (first.error === null && first.pendingInterrupts.length > 0) {
  const resume = first.pendingInterrupts.map((interrupt) => ({
    interruptId: interrupt.id,
    ...((c.byReason ?? {})[interrupt.reason] ?? c.answer),
  }));
  second = await run(agent, { runId: "run-answer", tools, resume });
}
process.stdout.write(JSON.stringify({ first, second, console: captured }) + "\n");
