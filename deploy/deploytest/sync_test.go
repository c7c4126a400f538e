package deploytest

import (
	"testing"

	agentmesh "github.com/agentmesh/agentmesh/pkg/mesh"
)

// TestClusterConfSyncsAlways reads back the sync policy of a node started
// from deploy/nats/cluster.conf, as the running server reports it: every
// write on the disk before it is acknowledged (docs/operating.md, "Sync
// policy").
func TestClusterConfSyncsAlways(t *testing.T) {
	m := startServer(t)
	if got := agentmesh.ServerSync(m.srv); !got.Always {
		t.Errorf("%s: the server syncs %s, want always", clusterConf, got)
	}
}
