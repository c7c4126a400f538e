// Package conformance provides the one capability-driven conformance suite
// that every adapter must pass (docs/contract.md §9.6, §1 and §4): Run checks an
// adapter's chunk streams against the stream rules, its capability
// declaration against what its fixtures prove, its provider-declared
// failures and session publication, and, for a subprocess adapter, every
// subprocess-safety property, each through the adapter's own wiring with a
// scriptable fake CLI (Fake) standing in for the real program.
//
// The package is test support: its functions take a *testing.T. The
// parametrization over the registered adapters lives in conformance_test.go;
// a test binary that runs the suite must call FakeMain first thing in its
// TestMain, because the suite starts that binary as the fake CLI.
package conformance
