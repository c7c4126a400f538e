// Package e2e holds the end-to-end tests that drive the real agent CLIs
// (Claude Code, Codex, Gemini CLI and Pi, installed from npm at the versions
// the adapters were captured from) through the mesh against the loopback
// fake model API of pkg/adapter/cli/fakemodel, and the official Node OpenAI
// SDK (the npm package openai, pinned) against the HTTP gateway of
// `agentmesh up --gateway` (TestNodeSDK, testdata/node-sdk/check.mjs). Its
// tests carry the build tag e2e, so `make test` never runs them;
// `make e2e-cli` installs the CLIs and the SDK into .cache/cli and runs them.
package e2e
