// Package e2e holds the end-to-end tests that drive the real agent CLIs
// (Claude Code, Codex, Gemini CLI and Pi, installed from npm at the versions
// the adapters were captured from) through the mesh against the loopback
// fake model API of pkg/adapter/cli/fakemodel, and the official Node OpenAI
// SDK (the npm package openai, pinned) against the HTTP gateway of
// `agentmesh up --gateway` (TestNodeSDK, testdata/node-sdk/check.mjs), the
// ACP agents claude-agent-acp, codex-acp and Gemini CLI's ACP mode
// (gemini --acp) as session runs of agentmesh up (TestACPAgents), and an
// ACP client in Node against `agentmesh acp` (TestACPNodeClient,
// testdata/acp-client/check.mjs). Its tests carry the build tag e2e, so `make test` never runs them;
// `make e2e-cli` installs the CLIs, the ACP agents and the SDKs into
// .cache/cli and runs them.
package e2e
