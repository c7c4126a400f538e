package subject_test

import (
	"fmt"

	"github.com/agentmesh/agentmesh/pkg/subject"
)

func ExampleNames() {
	n := subject.Names{Prefix: "acme"}
	fmt.Println(n.Submit("tenant-1"))
	fmt.Println(n.Events("tenant-1", "run-42"))
	fmt.Println(n.RunsBucket())
	fmt.Println(subject.ValidToken("run_id", "a.b") != nil)
	// Output:
	// acme.agentmesh.submit.tenant-1
	// acme.agentmesh.events.tenant-1.run-42
	// acme_agentmesh_runs
	// true
}
