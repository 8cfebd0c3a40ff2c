// Prints OpenClaw's transcript events as JSON lines, in order. Runs inside the sandbox after the agent stopped.
//
//     node openclaw_transcript.mjs STATE_DIR
//
// OpenClaw keeps each agent's transcript in STATE_DIR/agents/<agent>/agent/openclaw-agent.sqlite, table
// transcript_events: the event in event_json, or (for large events) zstd-compressed in event_zstd. Node's own
// node:sqlite and zlib read both, so nothing beyond the Node runtime OpenClaw already needs is required.
import { DatabaseSync } from "node:sqlite";
import { existsSync, readdirSync } from "node:fs";
import { join } from "node:path";
import zlib from "node:zlib";

const MAX_EVENT_BYTES = 4 * 1024 * 1024;
const stateDir = process.argv[2];
const agentsDir = join(stateDir, "agents");
const agents = existsSync(agentsDir) ? readdirSync(agentsDir).sort() : [];
for (const agent of agents) {
  const path = join(agentsDir, agent, "agent", "openclaw-agent.sqlite");
  if (!existsSync(path)) continue;
  const db = new DatabaseSync(path, { readOnly: true });
  const rows = db.prepare(
    "SELECT session_id, seq, event_json, event_zstd, event_utf8_bytes FROM transcript_events ORDER BY session_id, seq",
  );
  for (const row of rows.iterate()) {
    let text = row.event_json;
    if (text == null && row.event_zstd != null) {
      const size = Math.min(Number(row.event_utf8_bytes) || MAX_EVENT_BYTES, MAX_EVENT_BYTES);
      text = zlib.zstdDecompressSync(row.event_zstd, { maxOutputLength: size }).toString("utf8");
    }
    if (text == null) continue;
    process.stdout.write(JSON.stringify({ agent, session: row.session_id, seq: Number(row.seq), event: JSON.parse(text) }) + "\n");
  }
  db.close();
}
