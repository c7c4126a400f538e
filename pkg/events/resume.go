package events

// Resume returns a writer that continues a run's events after seq, its
// last event, stored at stream sequence last, without reading them: for a
// writer handed the run's position by the one before it (the router hands
// it to the runner of the first delivery). If the position is stale,
// another writer's event is after it: the first fenced publish fails with
// ErrFenced and an unfenced one with ErrDuplicate, as for any writer whose
// idea of the run is out of date.
func (l *Log) Resume(tenant, runID string, seq, last uint64) *Writer {
	w := l.New(tenant, runID)
	w.seq, w.last = seq, last
	return w
}

// Last is the stream sequence of the last event this writer knows stored:
// the one its next fenced publish expects to follow.
func (w *Writer) Last() uint64 {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.last
}
