// check.mjs: an editor's side of the Agent Client Protocol, with the
// client library of @zed-industries/agent-client-protocol, against
// `agentmesh acp` (e2e/acp_test.go, TestACPNodeClient). It spawns
// $AGENTMESH_TEST_BIN acp --profile $AGENTMESH_TEST_PROFILE --server
// $AGENTMESH_TEST_NATS_URL --tenant $AGENTMESH_TEST_TENANT, then:
// initialize, session/new, a prompt and a follow-up in the same session,
// a prompt whose shell tool call asks permission (allowed by
// requestPermission below), and a prompt whose model stream hangs,
// cancelled with session/cancel once the file $AGENTMESH_TEST_CANCEL_FILE
// exists (the Go test creates it when the fake model API has the
// request). The last stdout line is a JSON summary; any failure exits 1.
import { spawn } from "node:child_process";
import { existsSync } from "node:fs";
import { Readable, Writable } from "node:stream";
import * as acp from "@zed-industries/agent-client-protocol";

const env = (name) => {
  const v = process.env[name];
  if (!v) throw new Error(`${name} is not set`);
  return v;
};
const label = env("AGENTMESH_TEST_LABEL");
const prompts = [
  `What is the answer? (${label} turn-1)`,
  `What was the answer again? (${label} turn-2)`,
  `Run the shell command 'echo hello-from-tool' and tell me what it printed. (${label} tool) ${env("AGENTMESH_TEST_TOOL")}`,
  `What is the answer? (${label} stall) ${env("AGENTMESH_TEST_STALL")}`,
];
const cancelFile = env("AGENTMESH_TEST_CANCEL_FILE");

const child = spawn(env("AGENTMESH_TEST_BIN"), [
  "acp", "--profile", env("AGENTMESH_TEST_PROFILE"),
  "--server", env("AGENTMESH_TEST_NATS_URL"), "--tenant", env("AGENTMESH_TEST_TENANT"),
], { stdio: ["pipe", "pipe", "inherit"] });
const exited = new Promise((resolve) => child.on("exit", (code, signal) => resolve({ code, signal })));

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

const stream = acp.ndJsonStream(Writable.toWeb(child.stdin), Readable.toWeb(child.stdout));
const conn = new acp.ClientSideConnection(() => new TestClient(), stream);

const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

async function main() {
  const init = await conn.initialize({
    protocolVersion: acp.PROTOCOL_VERSION,
    clientCapabilities: { fs: { readTextFile: false, writeTextFile: false }, terminal: false },
  });
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

let summary, failure;
try {
  summary = await main();
} catch (e) {
  failure = e;
}
child.stdin.end();
const timer = setTimeout(() => child.kill("SIGTERM"), 15_000);
const { code, signal } = await exited;
clearTimeout(timer);
if (failure) {
  console.error("check.mjs:", failure);
  process.exit(1);
}
console.error(`agentmesh acp exited: code ${code}, signal ${signal}`);
console.log(JSON.stringify(summary));
