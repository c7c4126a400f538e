package wire_test

import (
	"errors"
	"fmt"

	"github.com/agentmesh/agentmesh/pkg/wire"
)

func ExampleDecode() {
	b, err := wire.Marshal(wire.Lease{V: wire.Version, RunID: "run-1", Tenant: "acme", Owner: "runner-a"})
	if err != nil {
		fmt.Println(err)
		return
	}
	lease, err := wire.Decode[wire.Lease](b)
	fmt.Println(lease.Owner, err)

	_, err = wire.Decode[wire.Lease](b[:len(b)-1]) // truncated
	fmt.Println(errors.Is(err, wire.ErrMalformed))
	_, err = wire.Decode[wire.Event](b) // a lease is not an event
	fmt.Println(errors.Is(err, wire.ErrMalformed))
	// Output:
	// runner-a <nil>
	// true
	// true
}

func ExampleClass() {
	rc := 1
	err := fmt.Errorf("attempt 1: %w", &wire.Error{Class: wire.ProviderProcessError, Message: "exit status 1", ReturnCode: &rc})
	fmt.Println(errors.Is(err, wire.ProviderTransportError))
	fmt.Println(errors.Is(err, wire.ProviderQuotaError))
	fmt.Println(wire.AsError(err))
	// Output:
	// true
	// false
	// ProviderProcessError: exit status 1 (returncode 1)
}

func ExampleRedact() {
	fmt.Println(wire.Redact("401 for Authorization: Bearer eyJhbGciOi.abc with key sk-proj-0123456789abcdef"))
	// Output:
	// 401 for Authorization: [REDACTED] with key [REDACTED]
}
