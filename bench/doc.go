// Package bench provides the measurements behind `make bench`: the mesh's
// chunk throughput and submit→first-chunk latency, each against a raw
// JetStream baseline, the mesh's throughput from a fast-emitting fake
// agent CLI against reading that CLI's stdout directly, and two routers'
// routing rate against a raw JetStream work queue. Each baseline is
// measured in the same run on the same machine, so that the benchmarks
// report ratios rather than absolute figures that only hold on one machine.
//
// StartMesh runs a router, a runner host and a sweeper (mesh.Run) with the
// fixture adapter and any others given; StartRaw opens plain JetStream
// publishers and ordered consumers; NewCLI configures the claude-code
// adapter to run the test binary as a fake Claude Code CLI (FakeCLI), and
// NewACP adapter acp to run it as a fake ACP agent (acpfake);
// StartRouters runs routers only (mesh.Run without runner and sweeper)
// sharing the submit stream, and StartRawQueue a plain work-queue stream
// with a shared durable pull consumer. Each offers one method per
// measurement:
//
//	Mesh.Throughput         many fixture runs at once, chunks received by clients
//	Raw.Throughput          the same count of same-size messages, async publish + ordered consume
//	Mesh.FirstChunkLatency  client.Submit → first chunk event from client.Events
//	Raw.HopLatency          one synchronous publish → an ordered consumer already pulling
//	Mesh.StoredPerRun       one-chunk runs, counting the messages stored on every stream
//	Raw.StoredPerHop        synchronous publishes counted the same way (1 a hop)
//	Mesh.HeldFootprint      runs held in flight at once: heap + stacks idle, followed, in flight
//	Mesh.CLIThroughput      many claude-code runs of the fake CLI at once, text chunks received by clients
//	CLI.DirectThroughput    the same fake CLIs' stdout read in this process, lines counted, nothing parsed
//	CLI.ParseThroughput     the adapter's own stream in this process: framing and parser, no NATS
//	Routers.Route           a batch of fixture runs submitted at once, until every run is routed; checks exactly once
//	RawQueue.Route          the same payloads published to a work queue, until every one is acked
//	Mesh.SessionTurns       ACP sessions over a fake agent: submit → turn 1's first chunk, Send → turn 2's
//
// The benchmarks in bench_test.go, cli_test.go, routing_test.go and
// session_test.go call these and report the figures with
// testing.B.ReportMetric; TestMeasurementsComplete,
// TestCLIMeasurementsComplete, TestRoutingMeasurementsComplete and
// TestSessionMeasurementsComplete run each once at a tiny size so that
// `go test ./bench` exercises them without timing anything. The test
// binary's TestMain runs FakeCLI instead of the tests when FakeCLIEnv is
// set, the fake ACP agent (acpfake.Main, for NewACP) when ACPFakeEnv is
// set, and ServeNATS (a JetStream server for StartServerProcess) when
// NATSServerEnv is set. TestScale1000Runs (build tag scale, make scale)
// runs 1,000 followed runs at once and fails on a MaxWaiting or
// consumer-limit log line (LogRecorder, Limits).
package bench
