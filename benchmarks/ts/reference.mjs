// The official TypeScript client's inbound pipeline, timed on an NDJSON file:
// parse -> enforceEvents -> transformChunks -> verifyEvents -> SSE encode (EventEncoder).
// Prints one JSON line: {events, seconds: [wall, per repetition], cpuSeconds: [user+system
// CPU of this process, per repetition], outBytes}.
// Usage: node reference.mjs FILE [--repeat N]
import { readFileSync } from "node:fs";
import { from, lastValueFrom } from "rxjs";
import { toArray, map } from "rxjs/operators";
import { enforceEvents, transformChunks, verifyEvents } from "@ag-ui/client";
import { EventEncoder } from "@ag-ui/encoder";

const args = process.argv.slice(2);
const file = args[0];
const repeat = args.includes("--repeat") ? Number(args[args.indexOf("--repeat") + 1]) : 5;
process.env.SUPPRESS_TRANSFORMATION_WARNINGS = "true";

const seconds = [];
const cpuSeconds = [];
let events = 0;
let outBytes = 0;
for (let r = 0; r < repeat; r++) {
  const text = readFileSync(file, "utf8");
  const start = process.hrtime.bigint();
  const cpuStart = process.cpuUsage();
  const parsed = [];
  let pos = 0;
  while (pos < text.length) {
    let nl = text.indexOf("\n", pos);
    if (nl === -1) nl = text.length;
    if (nl > pos) parsed.push(JSON.parse(text.slice(pos, nl)));
    pos = nl + 1;
  }
  const encoder = new EventEncoder();
  let bytes = 0;
  await lastValueFrom(
    from(parsed).pipe(
      enforceEvents(undefined),
      transformChunks(undefined),
      verifyEvents(undefined),
      map((event) => {
        bytes += Buffer.byteLength(encoder.encode(event));
        return null;
      }),
      toArray(),
    ),
  );
  const elapsed = Number(process.hrtime.bigint() - start) / 1e9;
  const cpu = process.cpuUsage(cpuStart);
  seconds.push(elapsed);
  cpuSeconds.push((cpu.user + cpu.system) / 1e6);
  events = parsed.length;
  outBytes = bytes;
}
process.stdout.write(JSON.stringify({ events, seconds, cpuSeconds, outBytes }) + "\n");
