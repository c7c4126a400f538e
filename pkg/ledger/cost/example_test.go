package cost_test

import (
	"fmt"

	"github.com/agentmesh/agentmesh/pkg/ledger/cost"
	"github.com/agentmesh/agentmesh/pkg/wire"
)

func ExampleOf() {
	pricing := map[string]string{"input": "3", "output": "15", "cache_read": "0.30"} // USD per million tokens
	c, err := cost.Of(pricing, wire.Usage{InputTokens: 1200, OutputTokens: 350, CacheReadTokens: 10000})
	fmt.Println(c, err)
	// Output: 0.01185 <nil>
}
