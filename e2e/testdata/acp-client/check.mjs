// check.mjs: an editor's side of the Agent Client Protocol, with the
// client library of @zed-industries/agent-client-protocol, against
// `agentmesh acp` (e2e/acp_test.go, TestACPNodeClient). It spawns
// $AGENTMESH_TEST_BIN acp (editor.mjs), then: initialize, session/new, a
// prompt and a follow-up in the same session, a prompt whose shell tool
// call asks permission (allowed by requestPermission below), and a prompt
// whose model stream hangs, cancelled with session/cancel once the file
// $AGENTMESH_TEST_CANCEL_FILE exists (the Go test creates it when the fake
// model API has the request). Then it leaves (the agent's stdin closed)
// and, as an editor reopening the project, spawns a second agent and
// loads the session (session/load): every session/update that arrives
// before the load answers is its replay; one after it is counted late.
// The last stdout line is a JSON summary; any failure exits 1.
import { existsSync } from "node:fs";
import { connect, env, finish, initialize, sleep } from "./editor.mjs";

const label = env("AGENTMESH_TEST_LABEL");
const prompts = [
  `What is the answer? (${label} turn-1)`,
  `What was the answer again? (${label} turn-2)`,
  `Run the shell command 'echo hello-from-tool' and tell me what it printed. (${label} tool) ${env("AGENTMESH_TEST_TOOL")}`,
  `What is the answer? (${label} stall) ${env("AGENTMESH_TEST_STALL")}`,
];
const cancelFile = env("AGENTMESH_TEST_CANCEL_FILE");

let text = "";
const permission = {};
class TestClient {
  async requestPermission(params) {
    const allow = params.options.find((o) => o.kind === "allow_once");
    if (!allow) throw new Error(`no allow_once option in ${JSON.stringify(params.options)}`);
    permission.title = params.toolCall?.title ?? "";
    permission.option = allow.optionId;
    return { outcome: { outcome: "selected", optionId: allow.optionId } };
  }
  async sessionUpdate(params) {
    const u = params.update;
    if (u.sessionUpdate === "agent_message_chunk" && u.content?.type === "text") text += u.content.text;
  }
}

// ReplayClient records what a session/load replays.
const replay = { updates: [], late: 0 };
let loaded = false;
class ReplayClient {
  async requestPermission() {
    throw new Error("a replay asks no permission");
  }
  async sessionUpdate(params) {
    if (loaded) {
      replay.late++;
      return;
    }
    const u = params.update;
    replay.updates.push({
      kind: u.sessionUpdate,
      text: u.content?.type === "text" ? u.content.text : undefined,
      tool_call_id: u.toolCallId,
      title: u.title ?? undefined,
      status: u.status ?? undefined,
    });
  }
}

const first = connect(() => new TestClient());
const { conn } = first;

// finish closes the first agent again (a no-op) once main is done; main
// closes the second, which a failure leaves to end with this process.
await finish("check.mjs", first, async () => {
  const summary = await session();
  first.child.stdin.end(); // the editor leaves: its session run is cancelled
  await first.exited;
  const again = connect(() => new ReplayClient());
  await initialize(again.conn);
  await again.conn.loadSession({ sessionId: summary.session_id, cwd: process.cwd(), mcpServers: [] });
  loaded = true;
  await sleep(500); // anything the agent sends after its answer is late
  again.child.stdin.end();
  await again.exited;
  return { ...summary, replay };
});

async function session() {
  const init = await initialize(conn);
  const session = await conn.newSession({ cwd: process.cwd(), mcpServers: [] });
  const stopReasons = [], texts = [];
  for (const [i, p] of prompts.entries()) {
    text = "";
    const pending = conn.prompt({ sessionId: session.sessionId, prompt: [{ type: "text", text: p }] });
    if (i === prompts.length - 1) {
      const deadline = Date.now() + 60_000;
      while (!existsSync(cancelFile)) {
        if (Date.now() > deadline) throw new Error("the model never got the hanging prompt");
        await sleep(100); // the Go test creates the file; nothing to wait on
      }
      await conn.cancel({ sessionId: session.sessionId });
    }
    const res = await pending;
    stopReasons.push(res.stopReason);
    texts.push(text);
  }
  return { ok: true, protocol_version: init.protocolVersion, session_id: session.sessionId, stop_reasons: stopReasons, texts, prompts, permission };
}
