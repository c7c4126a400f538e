// Package wire provides the messages that cross a process boundary in
// agentmesh (docs/contract.md §1 and §3): chunks, events, run requests, work
// items, statuses, run records, leases and typed errors, together with their
// msgpack codec.
//
// Every message carries its schema version in the field v. Decode is strict:
// unknown fields, a wrong version, oversized, truncated or over-nested input
// return an error matching ErrMalformed, ErrTooLarge or ErrVersion and never
// panic.
package wire
