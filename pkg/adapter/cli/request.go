package cli

import "github.com/agentmesh/agentmesh/pkg/adapter/reqfield"

// DecodeRequest decodes a CLI adapter's msgpack request strictly, as each
// CLI's Decode does (reqfield.Read): the field "prompt" is required, read
// takes the fields from d into an R and records each problem with d.Bad or
// d.BadElem, and every problem (not a map, an unknown field, a wrong type,
// a missing prompt, what read found) is named in one *wire.Error of class
// AgenticRequestValidationError. It starts nothing; it is safe for
// concurrent use when read is.
func DecodeRequest[R any](adapter string, b []byte, read func(d *reqfield.Decoder) R) (R, error) {
	return reqfield.Read(adapter, b, func(d *reqfield.Decoder) R {
		d.Require("prompt")
		return read(d)
	})
}
