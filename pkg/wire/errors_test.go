package wire

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"testing"
	"unicode/utf8"
)

var allClasses = []Class{
	ProviderError, ProviderQuotaError, ProviderAuthError, ProviderContextError, ProviderTransportError,
	ProviderExecutableNotFound, ProviderProcessError, ProviderProtocolError, ProviderStreamError, ProviderStallError,
	AgenticRequestValidationError, AgenticHandlerError, AgenticOperationUnsupported, AdmissionRejected, BudgetExceeded,
	DeadlineExceeded, ProfileError, PinMismatch, ProviderUnavailable,
}

func TestClassKnown(t *testing.T) {
	for _, c := range allClasses {
		if !c.Known() {
			t.Errorf("%s.Known() = false", c)
		}
	}
	for _, c := range []Class{"", "providererror", "ProviderQuota", "TimeoutError"} {
		if c.Known() {
			t.Errorf("%q.Known() = true", c)
		}
	}
}

func TestClassIsA(t *testing.T) {
	tests := []struct {
		c, ancestor Class
		want        bool
	}{
		{ProviderProcessError, ProviderProcessError, true},
		{ProviderProcessError, ProviderTransportError, true},
		{ProviderProcessError, ProviderError, true},
		{ProviderExecutableNotFound, ProviderTransportError, true},
		{ProviderExecutableNotFound, ProviderError, true},
		{ProviderQuotaError, ProviderError, true},
		{ProviderAuthError, ProviderError, true},
		{ProviderContextError, ProviderError, true},
		{ProviderProtocolError, ProviderError, true},
		{ProviderStreamError, ProviderError, true},
		{ProviderStallError, ProviderTransportError, true},
		{ProviderTransportError, ProviderError, true},
		{ProviderQuotaError, ProviderTransportError, false},
		{ProviderTransportError, ProviderProcessError, false},
		{ProviderError, ProviderTransportError, false},
		{ProviderProtocolError, ProviderTransportError, false},
		{ProviderProcessError, ProviderExecutableNotFound, false},
		{AgenticRequestValidationError, ProviderError, false},
		{ProviderUnavailable, ProviderError, false},
		{DeadlineExceeded, ProviderError, false},
		{AgenticHandlerError, AgenticRequestValidationError, false},
		{"Unknown", ProviderError, false},
		{"", ProviderError, false},
	}
	for _, tt := range tests {
		if got := tt.c.IsA(tt.ancestor); got != tt.want {
			t.Errorf("%q.IsA(%s) = %t, want %t", tt.c, tt.ancestor, got, tt.want)
		}
	}
	// Only the provider family has parents; every other class is a root.
	for _, c := range allClasses {
		if c != ProviderError && strings.HasPrefix(string(c), "Provider") && c != ProviderUnavailable {
			if !c.IsA(ProviderError) {
				t.Errorf("%s is not a ProviderError", c)
			}
		} else if c != ProviderError && c.IsA(ProviderError) {
			t.Errorf("%s is a ProviderError", c)
		}
	}
}

func TestErrorIs(t *testing.T) {
	rc := 137
	proc := &Error{Class: ProviderProcessError, Message: "killed", ReturnCode: &rc}
	wrapped := fmt.Errorf("attempt 2: %w", proc)
	tests := []struct {
		name   string
		err    error
		target error
		want   bool
	}{
		{name: "process is transport", err: proc, target: ProviderTransportError, want: true},
		{name: "process is provider", err: proc, target: ProviderError, want: true},
		{name: "process is itself", err: proc, target: ProviderProcessError, want: true},
		{name: "wrapped process is transport", err: wrapped, target: ProviderTransportError, want: true},
		{name: "process is not quota", err: proc, target: ProviderQuotaError},
		{name: "process is not validation", err: proc, target: AgenticRequestValidationError},
		{name: "same class error", err: proc, target: &Error{Class: ProviderProcessError}, want: true},
		{name: "parent class error is not equal", err: proc, target: &Error{Class: ProviderTransportError}},
		{name: "validation", err: Errorf(AgenticRequestValidationError, "prompt: required"), target: AgenticRequestValidationError, want: true},
		{name: "plain error", err: io.EOF, target: ProviderError},
	}
	for _, tt := range tests {
		if got := errors.Is(tt.err, tt.target); got != tt.want {
			t.Errorf("%s: errors.Is = %t, want %t", tt.name, got, tt.want)
		}
	}
	var we *Error
	if !errors.As(wrapped, &we) || we != proc {
		t.Errorf("errors.As(wrapped) = %v, want the *Error", we)
	}
}

func TestErrorString(t *testing.T) {
	rc := 2
	tests := []struct {
		in   *Error
		want string
	}{
		{in: &Error{Class: ProviderQuotaError, Message: "rate limited"}, want: "ProviderQuotaError: rate limited"},
		{in: &Error{Class: ProviderProcessError, Message: "exit", ReturnCode: &rc}, want: "ProviderProcessError: exit (returncode 2)"},
	}
	for _, tt := range tests {
		if got := tt.in.Error(); got != tt.want {
			t.Errorf("Error() = %q, want %q", got, tt.want)
		}
	}
}

func TestErrorfAndRetry(t *testing.T) {
	e := Errorf(AgenticRequestValidationError, "field %q: key %s", "prompt", "sk-abcdefghijklmnop")
	if e.Class != AgenticRequestValidationError || e.Retryable {
		t.Errorf("Errorf: got class %s retryable %t", e.Class, e.Retryable)
	}
	if want := `field "prompt": key [REDACTED]`; e.Message != want {
		t.Errorf("Errorf message = %q, want %q", e.Message, want)
	}
	if got := Errorf(ProviderTransportError, "reset").Retry(); !got.Retryable {
		t.Error("Retry() did not mark the error retryable")
	}
	long := Errorf(ProviderError, "%s", strings.Repeat("x", 3*MaxErrorText))
	if len(long.Message) != MaxErrorText {
		t.Errorf("Errorf message length = %d, want %d", len(long.Message), MaxErrorText)
	}
}

func TestAsError(t *testing.T) {
	proc := &Error{Class: ProviderProcessError, Message: "x", Retryable: true}
	tests := []struct {
		name      string
		in        error
		wantClass Class
		wantSame  bool
	}{
		{name: "wire error", in: proc, wantClass: ProviderProcessError, wantSame: true},
		{name: "wrapped wire error", in: fmt.Errorf("run: %w", proc), wantClass: ProviderProcessError, wantSame: true},
		{name: "deadline", in: fmt.Errorf("wait: %w", context.DeadlineExceeded), wantClass: DeadlineExceeded},
		{name: "other", in: io.ErrUnexpectedEOF, wantClass: ProviderError},
	}
	for _, tt := range tests {
		got := AsError(tt.in)
		if got.Class != tt.wantClass {
			t.Errorf("%s: class %s, want %s", tt.name, got.Class, tt.wantClass)
		}
		if (got == proc) != tt.wantSame {
			t.Errorf("%s: returned the same *Error = %t, want %t", tt.name, got == proc, tt.wantSame)
		}
		if !tt.wantSame && got.Retryable {
			t.Errorf("%s: converted error is retryable", tt.name)
		}
	}
	if AsError(nil) != nil {
		t.Error("AsError(nil) != nil")
	}
}

func TestErrorBound(t *testing.T) {
	tests := []struct {
		name string
		in   string // repeated to well over MaxErrorText
	}{
		{name: "ascii", in: "abcdefg"},
		{name: "two-byte runes", in: "é"},
		{name: "three-byte runes", in: "€"},
		{name: "four-byte runes", in: "𝄞"},
		{name: "mixed", in: "a€𝄞é"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			// Offsets shift where the 4 KiB boundary falls inside a rune.
			for off := range 4 {
				s := strings.Repeat("z", off) + strings.Repeat(tt.in, 3*MaxErrorText/len(tt.in))
				e := &Error{Class: ProviderProcessError, Message: s, StderrTail: s}
				e.Bound()
				for field, got := range map[string]string{"Message": e.Message, "StderrTail": e.StderrTail} {
					if len(got) > MaxErrorText || len(got) < MaxErrorText-utf8.UTFMax+1 {
						t.Errorf("offset %d: %s has %d bytes, want (%d, %d]", off, field, len(got), MaxErrorText-utf8.UTFMax, MaxErrorText)
					}
					if !utf8.ValidString(got) {
						t.Errorf("offset %d: %s is not valid UTF-8 at its ends: %q...%q", off, field, got[:8], got[len(got)-8:])
					}
				}
				if !strings.HasPrefix(s, e.Message) {
					t.Errorf("offset %d: Message is not the head of the text", off)
				}
				if !strings.HasSuffix(s, e.StderrTail) {
					t.Errorf("offset %d: StderrTail is not the tail of the text", off)
				}
				// Bound is idempotent.
				m, st := e.Message, e.StderrTail
				e.Bound()
				if e.Message != m || e.StderrTail != st {
					t.Errorf("offset %d: a second Bound changed the error", off)
				}
			}
		})
	}
}

func TestErrorBoundShort(t *testing.T) {
	e := &Error{Class: ProviderError, Message: "short", StderrTail: strings.Repeat("é", MaxErrorText/2)}
	e.Bound()
	if e.Message != "short" || len(e.StderrTail) != MaxErrorText {
		t.Errorf("Bound changed text within the limit: %q, %d bytes", e.Message, len(e.StderrTail))
	}
}

func TestErrorBoundKeepsStderrTail(t *testing.T) {
	// The useful part of stderr is its end: the final panic or message.
	stderr := strings.Repeat("progress line\n", 1000) + "fatal: cannot open config\n"
	e := &Error{Class: ProviderProcessError, StderrTail: stderr}
	e.Bound()
	if !strings.HasSuffix(e.StderrTail, "fatal: cannot open config\n") {
		t.Errorf("StderrTail lost the end of stderr: ...%q", e.StderrTail[len(e.StderrTail)-40:])
	}
}

func TestRedact(t *testing.T) {
	tests := []struct {
		name   string
		in     string
		want   string
		secret string // must not survive, when want is not given exactly
	}{
		{name: "openai key", in: "using key sk-proj-Abc123def456GHI789 now", want: "using key [REDACTED] now"},
		{name: "anthropic key", in: "x-key sk-ant-api03-AbCdEfGhIjKlMnOp", want: "x-key [REDACTED]"},
		{name: "google key", in: "key=AIzaSyA1234567890abcdefghijkLMNOP", secret: "AIzaSyA1234567890"},
		{name: "bearer header", in: "Authorization: Bearer xyz0123456789abcdefXYZ", want: "Authorization: [REDACTED]"},
		{name: "bearer header, short token", in: "Authorization: Bearer xyz12", want: "Authorization: [REDACTED]"},
		{name: "basic header", in: "authorization: Basic dXNlcjpwYXNzd29yZA==", want: "authorization: [REDACTED]"},
		{name: "bearer json", in: `{"Authorization":"Bearer xyz0123456789abcdef"}`, secret: "xyz0123456789abcdef"},
		{name: "bare bearer", in: "sent bearer abcdefghijklmnop to upstream", want: "sent bearer [REDACTED] to upstream"},
		{name: "x-api-key header", in: "x-api-key: 0123456789abcdef", want: "x-api-key: [REDACTED]"},
		{name: "env assignment", in: "OPENAI_API_KEY=abc123 GITHUB_TOKEN=ghp_xxx next", want: "OPENAI_API_KEY=[REDACTED] GITHUB_TOKEN=[REDACTED] next"},
		{name: "nothing secret", in: "task-assessment risk-free 42", want: "task-assessment risk-free 42"},
		{name: "empty", in: "", want: ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := Redact(tt.in)
			if tt.secret != "" {
				if strings.Contains(got, tt.secret) || !strings.Contains(got, "[REDACTED]") {
					t.Errorf("Redact(%q) = %q, still holds %q", tt.in, got, tt.secret)
				}
				return
			}
			if got != tt.want {
				t.Errorf("Redact(%q) = %q, want %q", tt.in, got, tt.want)
			}
			if again := Redact(got); again != got {
				t.Errorf("Redact is not idempotent: %q then %q", got, again)
			}
		})
	}
}

func TestBoundRedactsBeforeCutting(t *testing.T) {
	// A key straddling the cut must not leave a usable fragment behind.
	key := "sk-" + strings.Repeat("A", 40)
	s := strings.Repeat("x", MaxErrorText-10) + " " + key
	e := &Error{Class: ProviderError, Message: s, StderrTail: key + " " + strings.Repeat("y", MaxErrorText)}
	e.Bound()
	if strings.Contains(e.Message, "AAAA") || strings.Contains(e.StderrTail, "AAAA") {
		t.Errorf("a fragment of the key survived Bound")
	}
}

func TestRedactKeepsErrorCodes(t *testing.T) {
	got := Redact("invalid_api_key: Incorrect API key provided; x-api-key: sk-ant-abcdefgh12345")
	if !strings.Contains(got, "invalid_api_key: Incorrect") || strings.Contains(got, "abcdefgh12345") {
		t.Fatalf("Redact = %q", got)
	}
}
