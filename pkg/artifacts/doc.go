// Package artifacts provides the mesh's general artifact store: the
// workspace snapshots clients push, the artifacts a run leaves (its patch
// and its archive of changed files), and the head of each conversation,
// what its next turn starts from. Everything is tenant-scoped and kept in
// JetStream (pkg/topology creates the buckets, subject.Names names them).
//
// A snapshot is content-addressed: its id is "sha256:<hex>" of its bytes,
// and it is kept for the artifact retention from its last push (the
// snapshots' object store has it as its max age). A head is kept for the
// retention from its last write (the heads bucket's max age).
//
// A run's artifact is written in two phases, as trajectory exports are
// (pkg/exports): its record is written unstored, then its bytes, then the
// record is marked stored with the time it expires. Its bytes are removed
// in the same order reversed, by the sweeper (Sweeper): the bytes are
// deleted and checked gone before the record is deleted, so a record
// never claims bytes that are gone and a failed byte delete is retried by
// the next sweep. Withdraw marks a run's artifacts for that sweep.
package artifacts
