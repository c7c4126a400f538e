// Package conformance provides the one capability-driven conformance suite
// that every adapter must pass (docs/contract.md §9.6, §1 and §4): Run checks an
// adapter's chunk streams against the stream rules, its capability
// declaration against what its fixtures prove, its provider-declared
// failures and session publication, and, for a subprocess adapter, every
// subprocess-safety property, each through the adapter's own wiring with a
// scriptable fake CLI (Fake) standing in for the real program.
//
// The package is test support: its functions take a *testing.T. Each
// adapter's own tests call Run (TestConformance in the adapter's package),
// so that the adapter's go test runs the suite; a test here fails when an
// adapter the build can host has no such call. A test binary that runs the
// suite over a subprocess adapter must call FakeMain first thing in its
// TestMain, because the suite starts that binary as the fake CLI.
//
// It is also the adapters' test kit: Testdata and Seeds find the
// repository's fixtures from any package; Cases, Parsing.Replay, Golden
// (which owns the -update flag) and MatchGolden run a CLI's captured
// transcripts through its parser and compare them with the golden files;
// SameAsEvent checks a parser's fast path; Fake is the one fake CLI; and
// ReplayServer, Paced, PromptCased, Call and Collect set up and run a
// remote adapter against its recorded responses.
package conformance
