//go:build linux

package mesh_test

import (
	"testing"
	"time"
)

// quorumLoss is how long TestChaosClusterQuorumLoss leaves the cluster
// without a quorum: the 15 s, inside the bound a run with output
// survives (docs/operating.md, "Faults and what they take"): the lease's
// TTL (30 s) less a renewal period (10 s) and the election after it.
const quorumLoss = 15 * time.Second

// TestChaosClusterQuorumLoss freezes two of the three servers (SIGSTOP)
// for 15 s while runs of three tenants are going, then resumes them: no
// stream or bucket has a quorum meanwhile, so no lease is renewed, no
// event stored and no run ended. Every run must still succeed with all
// its output: the runners hold their runs' output while their leases are
// stale and go on once a renewal is stored (no failure is justified).
// Trials freeze the servers other than each in turn. It runs only in
// make chaos.
func TestChaosClusterQuorumLoss(t *testing.T) {
	trials := chaosOnly(t)
	cc := newChaosCluster(t)
	var counts chaosCounts
	for trial := range trials {
		cc.trial(t, "quorum loss", trial, &counts, func(l *chaosLoad) {
			keep := trial % cc.cluster.Len()
			var paused []int
			for j := range cc.cluster.Len() {
				if j != keep {
					cc.cluster.Pause(j)
					paused = append(paused, j)
				}
			}
			ended := l.finished.Load()
			time.Sleep(quorumLoss)
			for _, j := range paused {
				cc.cluster.Resume(j)
			}
			resumed := time.Now()
			if err := l.waitFinished(l.finished.Load()+1, time.Minute); err != nil {
				t.Fatal(err)
			}
			t.Logf("trial %d: froze servers %v for %s with %d runs ended; the first run ended %s after the resume",
				trial, paused, quorumLoss, ended, time.Since(resumed).Round(10*time.Millisecond))
		})
	}
	counts.report(t, "quorum loss")
}
