// Package e2e holds the end-to-end test that drives the real agent CLIs
// (Claude Code, Codex, Gemini CLI and Pi, installed from npm at the versions
// the adapters were captured from) through the mesh against the loopback
// fake model API of pkg/adapter/cli/fakemodel. Its tests carry the build tag e2e, so
// `make test` never runs them; `make e2e-cli` installs the CLIs into
// .cache/cli and runs them.
package e2e
