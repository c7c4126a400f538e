package codex

import (
	"regexp"
	"testing"
)

// TestIsUUID: the hand-written check accepts exactly what the UUID
// pattern it replaced accepts.
func TestIsUUID(t *testing.T) {
	re := regexp.MustCompile(`^[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}$`)
	for _, s := range []string{
		"01a22a8b-564f-7be0-9f56-beadbebf0082", "F9F8D0CE-8F8E-497E-B1F8-E1B327E8AF6E", "",
		"01a22a8b-564f-7be0-9f56-beadbebf008", "01a22a8b-564f-7be0-9f56-beadbebf00822", "01a22a8b_564f-7be0-9f56-beadbebf0082",
		"01a22a8g-564f-7be0-9f56-beadbebf0082", "01a22a8b-564f-7be0-9f56-beadbebf008\n", "01a22a8b-564f-7be0-9f5-6beadbebf0082",
		"0000000000000000000000000000000000000", "01a22a8b-564f-7be0-9f56-beadbebf00é",
	} {
		if got, want := isUUID(s), re.MatchString(s); got != want {
			t.Errorf("isUUID(%q) = %t, want %t", s, got, want)
		}
	}
}
