package topology_test

import (
	"context"
	"fmt"
	"slices"

	"github.com/agentmesh/agentmesh/pkg/natstest"
	"github.com/agentmesh/agentmesh/pkg/subject"
	"github.com/agentmesh/agentmesh/pkg/topology"
)

// Every service calls Ensure at start; the first creates the resources,
// the others find them as they are. Here a deployment prefixed "acme".
func ExampleEnsure() {
	_, js, stop := natstest.Start()
	defer stop()
	ctx := context.Background()

	cfg := topology.Config{Names: subject.Names{Prefix: "acme"}}
	for range 2 { // idempotent: the second call changes nothing
		if err := topology.Ensure(ctx, js, cfg); err != nil {
			fmt.Println(err)
			return
		}
	}
	names := js.StreamNames(ctx)
	var streams []string
	for n := range names.Name() {
		streams = append(streams, n)
	}
	slices.Sort(streams)
	for _, n := range streams {
		fmt.Println(n)
	}
	ttl, _ := topology.LeaseTTL(ctx, js, cfg.Names)
	retention, _ := topology.RunRetention(ctx, js, cfg.Names)
	fmt.Println("lease TTL", ttl, "ended runs kept", retention)
	// Output:
	// KV_acme_agentmesh_apikeys
	// KV_acme_agentmesh_artifacts
	// KV_acme_agentmesh_checkpoints
	// KV_acme_agentmesh_consent
	// KV_acme_agentmesh_conversations
	// KV_acme_agentmesh_exports
	// KV_acme_agentmesh_heads
	// KV_acme_agentmesh_leases
	// KV_acme_agentmesh_ledger
	// KV_acme_agentmesh_limits
	// KV_acme_agentmesh_redaction
	// KV_acme_agentmesh_runs
	// KV_acme_agentmesh_sessions
	// KV_acme_agentmesh_spend
	// KV_acme_agentmesh_turns
	// OBJ_acme_agentmesh_artifact_bytes
	// OBJ_acme_agentmesh_snapshots
	// OBJ_acme_agentmesh_trajectories
	// acme_AGENTMESH_EVENTS
	// acme_AGENTMESH_SUBMIT
	// acme_AGENTMESH_SUBMIT_ANCHOR
	// acme_AGENTMESH_WORK
	// lease TTL 30s ended runs kept 168h0m0s
}
