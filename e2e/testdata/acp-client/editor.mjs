// editor.mjs: what check.mjs and kill.mjs share, the editor's side of
// `agentmesh acp` with the client library of
// @zed-industries/agent-client-protocol.
import { spawn } from "node:child_process";
import { Readable, Writable } from "node:stream";
import * as acp from "@zed-industries/agent-client-protocol";

export { acp };

// env returns the variable name, which must be set.
export const env = (name) => {
  const v = process.env[name];
  if (!v) throw new Error(`${name} is not set`);
  return v;
};

export const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

// connect spawns $AGENTMESH_TEST_BIN acp --profile $AGENTMESH_TEST_PROFILE
// --server $AGENTMESH_TEST_NATS_URL --tenant $AGENTMESH_TEST_TENANT and
// returns a client-side connection to it, with handlers from makeClient,
// and the child.
export function connect(makeClient) {
  const child = spawn(env("AGENTMESH_TEST_BIN"), [
    "acp", "--profile", env("AGENTMESH_TEST_PROFILE"),
    "--server", env("AGENTMESH_TEST_NATS_URL"), "--tenant", env("AGENTMESH_TEST_TENANT"),
  ], { stdio: ["pipe", "pipe", "inherit"] });
  const exited = new Promise((resolve) => child.on("exit", (code, signal) => resolve({ code, signal })));
  const stream = acp.ndJsonStream(Writable.toWeb(child.stdin), Readable.toWeb(child.stdout));
  return { conn: new acp.ClientSideConnection(makeClient, stream), child, exited };
}

// initialize is the editor's initialize: no file system, no terminal.
export function initialize(conn) {
  return conn.initialize({
    protocolVersion: acp.PROTOCOL_VERSION,
    clientCapabilities: { fs: { readTextFile: false, writeTextFile: false }, terminal: false },
  });
}

// finish runs main, closes the agent's stdin and waits up to 15s for it to
// exit (then SIGTERM), and prints main's summary as the last stdout line;
// if main threw, it exits 1 with the error on stderr, named by script.
export async function finish(script, agent, main) {
  let summary, failure;
  try {
    summary = await main();
  } catch (e) {
    failure = e;
  }
  agent.child.stdin.end();
  const timer = setTimeout(() => agent.child.kill("SIGTERM"), 15_000);
  const { code, signal } = await agent.exited;
  clearTimeout(timer);
  if (failure) {
    console.error(`${script}:`, failure);
    process.exit(1);
  }
  console.error(`agentmesh acp exited: code ${code}, signal ${signal}`);
  console.log(JSON.stringify(summary));
}
