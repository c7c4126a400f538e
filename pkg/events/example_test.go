package events_test

import (
	"context"
	"errors"
	"fmt"

	"github.com/agentmesh/agentmesh/pkg/events"
	"github.com/agentmesh/agentmesh/pkg/natstest"
	"github.com/agentmesh/agentmesh/pkg/subject"
	"github.com/agentmesh/agentmesh/pkg/topology"
	"github.com/agentmesh/agentmesh/pkg/wire"
)

// One run's events as its writers publish them: the router's accepted and
// routed in one fenced message, then the runner's fenced claim and first
// output, its further chunks batched, and its fenced terminal status. A
// writer that is not the run's last one cannot end it.
func ExampleWriter() {
	ctx := context.Background()
	names := subject.Names{}
	_, js, stop := natstest.Start()
	defer stop()
	if err := topology.Ensure(ctx, js, topology.Config{Names: names}); err != nil {
		fmt.Println(err)
		return
	}
	log, _ := events.NewLog(ctx, js, names)

	// The router, on a run with no events yet.
	router := log.New("acme", "run-1")
	stale := log.New("acme", "run-1") // a second writer that also thinks the run is new
	fmt.Println("accepted and routed:", router.StatusesFenced(ctx, wire.Status{State: wire.StateAccepted}, wire.Status{State: wire.StateRouted}))

	// The runner continues after the run's last event.
	runner, _ := log.Open(ctx, "acme", "run-1")
	runner.Author("runner-a", "epoch-1", 1)
	fmt.Println("running:", runner.StatusFenced(ctx, wire.Status{State: wire.StateRunning, Attempt: 1}))
	fmt.Println("first output:", runner.ChunkFenced(ctx, wire.Chunk{Type: wire.ChunkText, Content: "hel", IsDelta: true}))
	for _, s := range []string{"lo", " wor", "ld"} {
		_ = runner.ChunkAsync(ctx, wire.Chunk{Type: wire.ChunkText, Content: s, IsDelta: true})
	}
	tail, _ := log.Tail(ctx, "acme", "run-1")
	fmt.Println("before the end:", tail.Runner, "attempt", tail.Attempt, "has output", tail.HasOutput())

	err := stale.Terminal(ctx, wire.Status{State: wire.StateCancelled})
	fmt.Println("stale writer:", errors.Is(err, events.ErrFenced))
	fmt.Println("succeeded:", runner.Terminal(ctx, wire.Status{State: wire.StateSucceeded, Summary: &wire.Summary{Chunks: 4}}))
	_, err = log.Open(ctx, "acme", "run-1")
	fmt.Println("open after the end:", errors.Is(err, events.ErrEnded))

	// A reader of the raw stream expands batches: one event per seq,
	// gapless.
	stream, _ := js.Stream(ctx, names.EventsStream())
	for sseq, done := uint64(1), false; !done; sseq++ {
		msg, err := stream.GetMsg(ctx, sseq)
		if err != nil {
			fmt.Println(err)
			return
		}
		ev, _ := wire.Decode[wire.Event](msg.Data)
		for e := range ev.Expand() {
			if e.Kind == wire.KindStatus {
				fmt.Println(e.Seq, e.Status.State)
			} else {
				fmt.Printf("%d %s %q\n", e.Seq, e.Chunk.Type, e.Chunk.Content)
			}
			done = e.Terminal()
		}
	}
	// Output:
	// accepted and routed: <nil>
	// running: <nil>
	// first output: <nil>
	// before the end: runner-a attempt 1 has output true
	// stale writer: true
	// succeeded: <nil>
	// open after the end: true
	// 1 accepted
	// 2 routed
	// 3 running
	// 4 text "hel"
	// 5 text "lo"
	// 6 text " wor"
	// 7 text "ld"
	// 8 succeeded
}
