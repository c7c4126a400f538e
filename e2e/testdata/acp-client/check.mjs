// check.mjs: an editor's side of the Agent Client Protocol, with the
// client library of @zed-industries/agent-client-protocol, against
// `agentmesh acp` (e2e/acp_test.go, TestACPNodeClient). It spawns
// $AGENTMESH_TEST_BIN acp (editor.mjs), then: initialize, session/new, a
// prompt and a follow-up in the same session, a prompt whose shell tool
// call asks permission (allowed by requestPermission below), and a prompt
// whose model stream hangs, cancelled with session/cancel once the file
// $AGENTMESH_TEST_CANCEL_FILE exists (the Go test creates it when the fake
// model API has the request). The last stdout line is a JSON summary; any
// failure exits 1.
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

const agent = connect(() => new TestClient());
const { conn } = agent;

await finish("check.mjs", agent, async () => {
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
});
