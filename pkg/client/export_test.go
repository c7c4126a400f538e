package client

// Behind reports whether an iterator of runID on t has fallen more than
// MaxTenantQueue messages behind, so that it will read on through a
// consumer of its own: tests wait for it instead of assuming the
// follower's deliveries kept up with their stores.
func (t *TenantFollower) Behind(runID string) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	for _, s := range t.runs[runID] {
		if s.over {
			return true
		}
	}
	return false
}
