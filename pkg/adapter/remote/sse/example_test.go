package sse_test

import (
	"fmt"
	"strings"

	"github.com/agentmesh/agentmesh/pkg/adapter/remote/sse"
)

func ExampleReader() {
	body := "event: content_block_delta\ndata: {\"text\":\"Hi\"}\n\n: keep-alive\n\nevent: message_stop\ndata: {}\n\n"
	r := sse.NewReader(strings.NewReader(body))
	for {
		ev, err := r.Next()
		if err != nil {
			break
		}
		fmt.Println(ev.Event, string(ev.Data))
	}
	// Output:
	// content_block_delta {"text":"Hi"}
	// message_stop {}
}
