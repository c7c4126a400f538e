// Package bench provides the measurements behind `make bench`: the mesh's
// chunk throughput and submit→first-chunk latency, each against a raw
// JetStream baseline measured in the same run on the same embedded server,
// so that the benchmarks report ratios rather than absolute figures that
// only hold on one machine.
//
// StartMesh runs a router, a runner host and a sweeper (mesh.Run) with the
// fixture adapter; StartRaw opens plain JetStream publishers and ordered
// consumers. Each offers one method per measurement:
//
//	Mesh.Throughput         many fixture runs at once, chunks received by clients
//	Raw.Throughput          the same count of same-size messages, async publish + ordered consume
//	Mesh.FirstChunkLatency  client.Submit → first chunk event from client.Events
//	Raw.HopLatency          one publish → an already-running ordered consumer
//
// The benchmarks in bench_test.go call these and report the figures with
// testing.B.ReportMetric; TestMeasurementsComplete runs each once at a tiny
// size so that `go test ./bench` exercises them without timing anything.
package bench
