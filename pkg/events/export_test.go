package events

import "time"

// SetBatching sets the batch window and size of the writers l opens.
func SetBatching(l *Log, window time.Duration, bytes int) { l.window, l.batchBytes = window, bytes }
