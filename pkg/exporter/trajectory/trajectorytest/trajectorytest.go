// Package trajectorytest provides test helpers for trajectories: Validate
// checks a stored trajectory against the schema v1 JSON Schema document
// with a JSON Schema validator (github.com/santhosh-tekuri/jsonschema,
// draft 2020-12), not by hand.
package trajectorytest

import (
	"bytes"
	"fmt"
	"sync"
	"testing"

	"github.com/santhosh-tekuri/jsonschema/v6"

	"github.com/agentmesh/agentmesh/pkg/exporter/trajectory"
)

// schemaURL is the document's $id; the compiler finds it among its own
// resources, so nothing is fetched.
const schemaURL = "https://github.com/agentmesh/agentmesh/pkg/exporter/trajectory/schema/trajectory-v1.schema.json"

var compiled = sync.OnceValues(func() (*jsonschema.Schema, error) {
	doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(trajectory.Schema()))
	if err != nil {
		return nil, fmt.Errorf("parse the trajectory schema: %w", err)
	}
	c := jsonschema.NewCompiler()
	c.DefaultDraft(jsonschema.Draft2020)
	if err := c.AddResource(schemaURL, doc); err != nil {
		return nil, fmt.Errorf("add the trajectory schema: %w", err)
	}
	s, err := c.Compile(schemaURL)
	if err != nil {
		return nil, fmt.Errorf("compile the trajectory schema: %w", err)
	}
	return s, nil
})

// Check validates data against the schema v1 document and returns the
// validator's error, which names each failing keyword and its location.
// The schema is compiled (and itself checked against the draft 2020-12
// meta-schema) once per process. Check is safe for concurrent use.
func Check(data []byte) error {
	s, err := compiled()
	if err != nil {
		return err
	}
	inst, err := jsonschema.UnmarshalJSON(bytes.NewReader(data))
	if err != nil {
		return fmt.Errorf("trajectory is not JSON: %w", err)
	}
	return s.Validate(inst)
}

// Validate fails t, with the validator's message, unless data is valid
// under the schema v1 document.
func Validate(t testing.TB, data []byte) {
	t.Helper()
	if err := Check(data); err != nil {
		t.Fatalf("trajectory does not validate against schema v%d: %v", trajectory.SchemaVersion, err)
	}
}
