package wire

// Limits on a run request's labels (RunRequest.Labels).
const (
	MaxLabels     = 32
	MaxLabelKey   = 64  // bytes
	MaxLabelValue = 256 // bytes
)

// CheckLabels checks a run request's labels against the limits, as the
// router does before it accepts a run: an AgenticRequestValidationError
// naming the first label out of bounds, or nil.
func CheckLabels(labels map[string]string) error {
	if len(labels) > MaxLabels {
		return Errorf(AgenticRequestValidationError, "labels: %d entries, at most %d", len(labels), MaxLabels)
	}
	for k, v := range labels {
		if k == "" || len(k) > MaxLabelKey || len(v) > MaxLabelValue {
			return Errorf(AgenticRequestValidationError, "label %.64q: key must be 1 to %d bytes and value at most %d", k, MaxLabelKey, MaxLabelValue)
		}
	}
	return nil
}
