// Package trajstore keeps redacted trajectory bytes under content-derived
// names (docs/contract.md §7 and §10.6): one narrow Store interface, with
// a JetStream object store implementation for the mesh (NewObjectStore,
// over agentmesh_trajectories) and a local directory implementation for
// single-host installs (NewDirStore, over AGENT_ARTIFACT_ROOT).
//
// An object's name is "<tenant>/<run_id>/<sha256>.json" (Name): the tenant
// and run id are single subject tokens and the sha256 is that of the
// redacted bytes, so the same run exported twice gives the same name, and
// putting it again is a no-op. Both implementations pass the shared suite
// in package storetest.
//
// The package stores bytes; it does not decide what a trajectory holds,
// when it expires or who may read it.
package trajstore
