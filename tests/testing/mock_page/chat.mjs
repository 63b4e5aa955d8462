// A minimal chat on the stock @ag-ui/client HttpAgent, pointed at the page's own origin.
//
// Each Send starts a new conversation (a new thread). The page does what a frontend does
// and reports it in the DOM for the test to read:
// - #messages: the client's messages (user, reasoning, assistant, tool results) and a
//   card for each call of the frontend tool `show_weather`, which the page answers with a
//   tool message and a second run — the tool round trip;
// - #status: "done"; "interrupted: <message>" with an Approve button that resumes the
//   run; "run error: <message>" for a RUN_ERROR; "failed: <the client's error>" when
//   runAgent rejects; and the page's own two checks, which the client does not make:
//   "incomplete: ..." for a body that ended with no RUN_FINISHED or RUN_ERROR, and
//   "stalled: ..." when no event came for the watchdog's time (?watchdog=MS, default
//   3000) — the run is then aborted;
// - #http: every response's status, and its retry-after header when it has one;
// - #state: the client's state as JSON.
// #status's data-conversation counts the Sends, so a test knows which conversation the
// status it reads belongs to.
import { HttpAgent } from "@ag-ui/client";

const params = new URLSearchParams(location.search);
const agentUrl = new URL(params.get("agent") ?? "/", location.href).href;
const watchdogMs = Number(params.get("watchdog") ?? "3000");
const TOOLS = [
  {
    name: "show_weather",
    description: "Show the weather as a card",
    parameters: { type: "object", properties: { temp: { type: "number" } } },
  },
];

const $ = (selector) => document.querySelector(selector);
const status = $("#status");
let agent = null;
let pending = null;
let conversations = 0;

function item(role, text) {
  const li = document.createElement("li");
  li.dataset.role = role;
  li.textContent = text;
  return li;
}

function show(messages) {
  const items = [];
  for (const message of messages) {
    if (typeof message.content === "string" && message.content !== "") {
      items.push(item(message.role, message.content));
    }
    for (const call of message.toolCalls ?? []) {
      if (call.function.name === "show_weather") {
        items.push(item("card", card(call.function.arguments)));
      }
    }
  }
  $("#messages").replaceChildren(...items);
  $("#state").textContent = JSON.stringify(agent.state);
}

// A card while the call's arguments stream is "...", then the temperature they name.
function card(args) {
  try {
    return `${JSON.parse(args).temp} degrees`;
  } catch {
    return "...";
  }
}

// What the page's frontend tool answers: every show_weather call without a result yet.
function unansweredCards(messages) {
  const answered = new Set(messages.filter((m) => m.role === "tool").map((m) => m.toolCallId));
  return messages
    .flatMap((m) => m.toolCalls ?? [])
    .filter((call) => call.function.name === "show_weather" && !answered.has(call.id));
}

function observingFetch(url, init) {
  return fetch(url, init).then((response) => {
    const retry = response.headers.get("retry-after");
    const line = `${response.status}${retry === null ? "" : ` retry-after ${retry}`}`;
    $("#http").textContent = [$("#http").textContent, line].filter(Boolean).join("; ");
    return response;
  });
}

async function run(parameters) {
  status.textContent = "running";
  let ended = null;
  let stalled = false;
  let timer;
  const watch = () => {
    clearTimeout(timer);
    timer = setTimeout(() => {
      stalled = true;
      agent.abortRun();
    }, watchdogMs);
  };
  const subscriber = {
    onEvent: watch,
    onMessagesChanged: ({ messages }) => show(messages),
    onStateChanged: ({ messages }) => show(messages),
    onRunFinishedEvent: ({ event }) => {
      ended = event;
    },
    onRunErrorEvent: ({ event }) => {
      ended = event;
    },
  };
  watch();
  try {
    await agent.runAgent({ tools: TOOLS, ...parameters }, subscriber);
  } catch (error) {
    status.textContent = `failed: ${error.message ?? error}`;
    return;
  } finally {
    clearTimeout(timer);
  }
  show(agent.messages);
  if (stalled) {
    status.textContent = `stalled: no event for ${watchdogMs} ms, the run was abandoned`;
  } else if (ended === null) {
    status.textContent = "incomplete: the stream ended with no RUN_FINISHED or RUN_ERROR";
  } else if (ended.type === "RUN_ERROR") {
    status.textContent = `run error: ${ended.message}`;
  } else if (ended.outcome?.type === "interrupt") {
    pending = ended.outcome.interrupts;
    $("#question").textContent = pending.map((interrupt) => interrupt.message).join(" ");
    $("#approval").hidden = false;
    status.textContent = `interrupted: ${$("#question").textContent}`;
  } else if (unansweredCards(agent.messages).length > 0) {
    for (const call of unansweredCards(agent.messages)) {
      agent.addMessage({ id: crypto.randomUUID(), role: "tool", toolCallId: call.id, content: "shown" });
    }
    await run({});
  } else {
    status.textContent = "done";
  }
}

$("#ask").addEventListener("submit", (event) => {
  event.preventDefault();
  const fault = $("#fault").value;
  agent = new HttpAgent({
    url: agentUrl,
    threadId: crypto.randomUUID(),
    headers: fault ? { "x-agui-mock-fault": fault } : {},
    fetch: observingFetch,
  });
  $("#http").textContent = "";
  $("#approval").hidden = true;
  status.dataset.conversation = String(++conversations);
  agent.addMessage({ id: crypto.randomUUID(), role: "user", content: $("#text").value });
  show(agent.messages);
  run({});
});

$("#approve").addEventListener("click", () => {
  $("#approval").hidden = true;
  const resume = pending.map((interrupt) => ({
    interruptId: interrupt.id,
    status: "resolved",
    payload: { approved: true },
  }));
  run({ resume });
});

$("#send").disabled = false;
status.textContent = "idle";
