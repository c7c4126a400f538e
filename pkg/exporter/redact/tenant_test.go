package redact

import "testing"

// TestTenantFindMatchesRegexp checks the prefiltered search against the
// regexp on the whole text, for the shapes it treats differently.
func TestTenantFindMatchesRegexp(t *testing.T) {
	texts := []string{
		"ACME-123456 xACME-123456 ACME-12 ACME-1234567",
		"mail Jane.Doe@corp.example.com, bob@CORP.example.com; x@corp.example.comz",
		"078-05-1120 and 078-05-11201 and a-078-05-1120-b task-list 1-2",
		"Project FALCON meets falcon, Falconry, xfalcon; OSPREY osprey Kelvin: \u212Aelvin kelvin",
		"line one\nSECRET:ABCD\nSECRET:ABCDE\n",
		"colour color colouur",
		"é€ ACME-000001€ naïve",
		"",
	}
	patterns := []string{
		`ACME-[0-9]{6}`,
		`\bACME-[0-9]{6}\b`,
		`[a-z0-9._]+@corp\.example\.com`,
		`(?i)[a-z0-9._]+@corp\.example\.com`,
		`\b[0-9]{3}-[0-9]{2}-[0-9]{4}\b`,
		`(?i)\bfalcon\b`,
		`(?i)osprey|falcon`,
		`(?i)kelvin`,
		`(?m)^SECRET:[A-Z]{4}$`,
		`colou?r`,
		`[^ ]{3}-[0-9]{6}`,
		`\pL+`,
		`ACME.[0-9]{6}`,
		`\Bon\B`,
	}
	for _, p := range patterns {
		for _, text := range texts {
			checkTenantFind(t, p, text)
		}
	}
}

func TestTenantPrefilter(t *testing.T) {
	tests := []struct {
		in       string
		req      string
		fold     bool
		segments bool
	}{
		{`ACME-[0-9]{6}`, "ACME-", false, true},
		{`(?i)\bfalcon\b`, "falcon", true, true},
		{`(?i)osprey`, "prey", true, true}, // no s: ſ folds to s
		{`[a-z0-9._]+@corp\.example\.com`, "@corp.example.com", false, true},
		{`(?m)^SECRET:[A-Z]{4}$`, "SECRET:", false, false}, // anchors: whole text
		{`ACME.[0-9]{6}`, "ACME", false, true},             // segments are lines
		{`[0-9]{4}`, "", false, false},
	}
	for _, tt := range tests {
		tree, reason := parsePattern(tt.in)
		if reason != "" {
			t.Fatal(reason)
		}
		tr := compileTenant(tt.in, tree)
		if tr.req != tt.req || tr.fold != tt.fold || (tr.seps != nil) != tt.segments {
			t.Errorf("%s: req %q fold %v segments %v, want %q %v %v", tt.in, tr.req, tr.fold, tr.seps != nil, tt.req, tt.fold, tt.segments)
		}
	}
}
