// Package trajectory provides schema version 1 of the exported trajectory
// (docs/contract.md §7) and its canonical builder: Build turns one finished
// run (its record, request, labels and every event from seq 1 to the
// terminal status) into the redacted, canonical JSON bytes the exporter
// stores, and their sha256.
//
// The JSON Schema document (draft 2020-12) is
// schema/trajectory-v1.schema.json, embedded and returned by Schema.
// Trajectory is its Go form; Decode reads stored bytes back, strictly.
//
// Redaction is the caller's: Build passes every string that came from the
// request, the labels, a chunk or an error (map keys included) through a
// Redactor before any byte is written, and records which rules fired and
// how often. What Build does not pass through it is mesh-generated and
// stored as it is: the identity tokens, the pin, closed-set values (chunk
// type, state, error class, transport), exact costs and tool schema hashes.
//
// The same run always gives the same bytes. Closed objects are written in
// the field order of the Go types (the schema's order), maps sorted by key,
// with no insignificant whitespace, no HTML escaping and one trailing
// newline. Numbers decoded from msgpack (int8 … uint64, float32, float64)
// are normalised first: integers become int64 (uint64 above its range),
// float32 becomes the float64 of its shortest decimal form, and -0 becomes
// 0, so a logical value is always written the same way.
package trajectory
