package fakemodel_test

import (
	"bufio"
	"fmt"
	"net/http"
	"strings"

	"github.com/agentmesh/agentmesh/pkg/adapter/cli/fakemodel"
)

// A fake on a free loopback port answers an Anthropic Messages stream; a
// marker in the prompt would select another scenario.
func Example() {
	s := fakemodel.New(fakemodel.Auto)
	if err := s.Start("127.0.0.1:0"); err != nil {
		panic(err)
	}
	defer s.Close()

	body := `{"model":"claude-sonnet-4-5","stream":true,"max_tokens":1024,
	  "messages":[{"role":"user","content":"What is the answer?"}]}`
	tr := &http.Transport{}
	defer tr.CloseIdleConnections()
	resp, err := (&http.Client{Transport: tr}).Post(s.URL()+"/v1/messages", "application/json", strings.NewReader(body))
	if err != nil {
		panic(err)
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		if name, ok := strings.CutPrefix(sc.Text(), "event: "); ok {
			fmt.Println(name)
		}
	}
	r := s.Requests()[0]
	fmt.Println(r.API, r.Model, r.Reply, r.LatestUserText())
	fmt.Println(fakemodel.Marker(fakemodel.ToolCall))
	// Output:
	// message_start
	// ping
	// content_block_start
	// content_block_delta
	// content_block_delta
	// content_block_stop
	// message_delta
	// message_stop
	// anthropic-messages claude-sonnet-4-5 text What is the answer?
	// [[fakemodel:tool]]
}
