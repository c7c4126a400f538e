package artifacts_test

import (
	"context"
	"fmt"
	"io"
	"strings"

	"github.com/agentmesh/agentmesh/pkg/artifacts"
	"github.com/agentmesh/agentmesh/pkg/natstest"
	"github.com/agentmesh/agentmesh/pkg/subject"
	"github.com/agentmesh/agentmesh/pkg/topology"
)

// A client pushes a snapshot, a run stores its patch, and a client reads
// it back.
func ExampleStore() {
	_, js, stop := natstest.Start()
	defer stop()
	ctx := context.Background()
	if err := topology.Ensure(ctx, js, topology.Config{}); err != nil {
		fmt.Println(err)
		return
	}
	s, err := artifacts.Open(ctx, js, subject.Names{})
	if err != nil {
		fmt.Println(err)
		return
	}
	id, _ := s.PushSnapshot(ctx, "acme", strings.NewReader("a workspace"))
	fmt.Println(id)
	ref, _ := s.Put(ctx, "acme", "run-1", "patch", strings.NewReader("diff --git a/x b/x\n"))
	fmt.Println(ref.Size, ref.Name[:len("acme/run-1/patch/")])
	rc, rec, _ := s.Open(ctx, "acme", "run-1", "patch")
	b, _ := io.ReadAll(rc)
	_ = rc.Close()
	fmt.Printf("%s %q\n", rec.Name, b)
	// Output:
	// sha256:18243a896222edfe4dd25dae23aef4ad71f6b7f5401d8688332e0fc3fdacd4b5
	// 19 acme/run-1/patch/
	// patch "diff --git a/x b/x\n"
}
