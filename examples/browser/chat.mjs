// A chat page on the stock @ag-ui/client that survives a reload mid-run.
//
// The thread id lives in localStorage. On load, a page whose thread has started asks the
// server to join it: a run POST with forwardedProps {aguiPipes: {join: "thread"}} answers
// the thread's live run as one self-contained stream (the whole conversation so far, then
// the live tail), or the thread's history when nothing is live. No helper library: the
// reconnect is a plain HttpAgent.runAgent call (docs/browser.md).
import { HttpAgent } from "@ag-ui/client";

const agentUrl = new URL(new URLSearchParams(location.search).get("agent") ?? "/agent", location.href);
const threadId = localStorage.getItem("threadId") ?? crypto.randomUUID();
localStorage.setItem("threadId", threadId);

const agent = new HttpAgent({ url: agentUrl.href, threadId });
const list = document.querySelector("#messages");
const status = document.querySelector("#status");

function show(messages) {
  const items = messages
    .filter((message) => message.role === "user" || message.role === "assistant")
    .filter((message) => typeof message.content === "string" && message.content !== "")
    .map((message) => {
      const item = document.createElement("li");
      item.dataset.role = message.role;
      item.textContent = message.content;
      return item;
    });
  list.replaceChildren(...items);
}

async function run(parameters) {
  status.textContent = "running";
  try {
    await agent.runAgent(parameters, { onMessagesChanged: ({ messages }) => show(messages) });
    status.textContent = "done";
  } catch (error) {
    status.textContent = `failed: ${error.message ?? error}`;
  }
}

document.querySelector("#ask").addEventListener("submit", (event) => {
  event.preventDefault();
  const input = document.querySelector("#text");
  agent.addMessage({ id: crypto.randomUUID(), role: "user", content: input.value });
  localStorage.setItem("threadStarted", threadId);
  run({});
});

// A reload (or a second tab): take up the thread where it is.
if (localStorage.getItem("threadStarted") === threadId) {
  run({ forwardedProps: { aguiPipes: { join: "thread" } } });
}
