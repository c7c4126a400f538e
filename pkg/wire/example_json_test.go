package wire_test

import (
	"errors"
	"fmt"

	"github.com/agentmesh/agentmesh/pkg/wire"
	"github.com/nats-io/nats.go"
)

func ExampleJSON() {
	b, err := wire.Marshal(wire.Lease{V: wire.Version, Owner: "runner-a", Epoch: "e-7"})
	if err != nil {
		fmt.Println(err)
		return
	}
	t, err := wire.Sniff(b) // the type from the keys alone
	fmt.Println(t, err)
	js, err := wire.JSON(t, b)
	fmt.Println(string(js), err)

	_, err = wire.JSON(wire.TypeEvent, b) // a lease is not an event
	fmt.Println(errors.Is(err, wire.ErrMalformed))
	// Output:
	// lease <nil>
	// {"v":1,"run_id":"","tenant":"","owner":"runner-a","epoch":"e-7"} <nil>
	// true
}

func ExampleContentType() {
	msg := nats.NewMsg("agentmesh.events.acme.run-1")
	wire.TypeEvent.ContentType().Set(msg.Header) // shares one prebuilt value
	fmt.Println(msg.Header.Get(wire.ContentTypeHeader))
	t, err := wire.ParseMessageType(msg.Header.Get(wire.ContentTypeHeader))
	fmt.Println(t, err)
	// Output:
	// application/vnd.agentmesh.event+msgpack
	// event <nil>
}
