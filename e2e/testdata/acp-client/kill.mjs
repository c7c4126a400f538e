// kill.mjs: an editor's side of the Agent Client Protocol, with the
// client library of @zed-industries/agent-client-protocol, against
// `agentmesh acp` (e2e/acp_kill_test.go, TestACPNodeClientRunnerKilled).
// It spawns $AGENTMESH_TEST_BIN acp (editor.mjs), then: initialize,
// session/new and a prompt. Once that prompt has ended it writes the
// session id to $AGENTMESH_TEST_TURN_FILE and waits for
// $AGENTMESH_TEST_KILLED_FILE, which the Go test creates once it has
// SIGKILLed the runner that owns the session; then it sends the second
// prompt. The last stdout line is a JSON summary, which records a prompt
// that failed with its error; any other failure exits 1.
import { existsSync, writeFileSync } from "node:fs";
import { connect, env, finish, initialize, sleep } from "./editor.mjs";

const label = env("AGENTMESH_TEST_LABEL");
const prompts = [
  `What is the answer? (${label} turn-1)`,
  `What was the answer again? (${label} turn-2)`,
];
const turnFile = env("AGENTMESH_TEST_TURN_FILE");
const killedFile = env("AGENTMESH_TEST_KILLED_FILE");

let text = "";
class TestClient {
  async requestPermission(params) {
    throw new Error(`no permission is asked here: ${JSON.stringify(params)}`);
  }
  async sessionUpdate(params) {
    const u = params.update;
    if (u.sessionUpdate === "agent_message_chunk" && u.content?.type === "text") text += u.content.text;
  }
}

const agent = connect(() => new TestClient());
const { conn } = agent;

await finish("kill.mjs", agent, async () => {
  await initialize(conn);
  const session = await conn.newSession({ cwd: process.cwd(), mcpServers: [] });
  const stopReasons = [], texts = [], errors = [];
  for (const [i, p] of prompts.entries()) {
    if (i === 1) {
      writeFileSync(turnFile, session.sessionId);
      const deadline = Date.now() + 120_000;
      while (!existsSync(killedFile)) {
        if (Date.now() > deadline) throw new Error("the Go test never killed the runner");
        await sleep(100); // the Go test creates the file; nothing to wait on
      }
    }
    text = "";
    try {
      const res = await conn.prompt({ sessionId: session.sessionId, prompt: [{ type: "text", text: p }] });
      stopReasons.push(res.stopReason);
      errors.push(null);
    } catch (e) {
      stopReasons.push("");
      errors.push({ code: e?.code ?? null, message: String(e?.message ?? e), data: e?.data ?? null });
    }
    texts.push(text);
  }
  return { ok: true, session_id: session.sessionId, stop_reasons: stopReasons, errors, texts, prompts };
});
