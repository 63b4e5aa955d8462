// The official TypeScript client's consumer-side checks, timed on an NDJSON file:
// parse -> enforceEvents -> transformChunks -> verifyEvents (the stages of
// AbstractAgent.runAgent() before application). Used by benchmarks/bench_consumer.py
// to compare with agui_pipes' decode -> ExpandChunks -> Verifier -> fold.
// Prints one JSON line: {"events": N, "delivered": M, "seconds": [per repetition]}.
// Usage: node consumer_reference.mjs FILE [--repeat N]
import { readFileSync } from "node:fs";
import { from, lastValueFrom } from "rxjs";
import { count } from "rxjs/operators";
import { enforceEvents, transformChunks, verifyEvents } from "@ag-ui/client";

const args = process.argv.slice(2);
const file = args[0];
const repeat = args.includes("--repeat") ? Number(args[args.indexOf("--repeat") + 1]) : 3;
process.env.SUPPRESS_TRANSFORMATION_WARNINGS = "true";

const seconds = [];
let events = 0;
let delivered = 0;
for (let r = 0; r < repeat; r++) {
  const text = readFileSync(file, "utf8");
  const start = process.hrtime.bigint();
  const parsed = [];
  let pos = 0;
  while (pos < text.length) {
    let nl = text.indexOf("\n", pos);
    if (nl === -1) nl = text.length;
    if (nl > pos) parsed.push(JSON.parse(text.slice(pos, nl)));
    pos = nl + 1;
  }
  delivered = await lastValueFrom(
    from(parsed).pipe(enforceEvents(undefined), transformChunks(undefined),
                      verifyEvents(undefined), count()),
  );
  seconds.push(Number(process.hrtime.bigint() - start) / 1e9);
  events = parsed.length;
}
process.stdout.write(JSON.stringify({ events, delivered, seconds }) + "\n");
