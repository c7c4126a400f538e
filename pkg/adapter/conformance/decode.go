package conformance

import (
	"errors"
	"reflect"
	"strings"
	"testing"

	"github.com/agentmesh/agentmesh/pkg/wire"
)

// DecodeCase is one row of an adapter's Decode table: In, msgpack-encoded,
// either decodes to Want, or (when WantErr is set) is refused with one
// AgenticRequestValidationError whose message contains every WantErr
// string.
type DecodeCase[R any] struct {
	Name    string
	In      any
	Want    R
	WantErr []string
}

// Decoding runs each case as a subtest of t against decode, an adapter's
// Decode.
func Decoding[R any](t *testing.T, decode func([]byte) (R, error), cases []DecodeCase[R]) {
	t.Helper()
	for _, tc := range cases {
		t.Run(tc.Name, func(t *testing.T) {
			b, err := wire.Marshal(tc.In)
			if err != nil {
				t.Fatal(err)
			}
			got, err := decode(b)
			if len(tc.WantErr) > 0 {
				if !errors.Is(err, wire.AgenticRequestValidationError) {
					t.Fatalf("err = %v, want an AgenticRequestValidationError", err)
				}
				for _, w := range tc.WantErr {
					if !strings.Contains(err.Error(), w) {
						t.Errorf("err = %v\nwant it to contain %q", err, w)
					}
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got, tc.Want) {
				t.Errorf("got %+v\nwant %+v", got, tc.Want)
			}
		})
	}
}

// DecodeRefuses checks that decode refuses each of ins (payloads that are
// not one msgpack map) with an AgenticRequestValidationError.
func DecodeRefuses[R any](t *testing.T, decode func([]byte) (R, error), ins [][]byte) {
	t.Helper()
	for _, in := range ins {
		if _, err := decode(in); !errors.Is(err, wire.AgenticRequestValidationError) {
			t.Errorf("Decode(% x) = %v, want an AgenticRequestValidationError", in, err)
		}
	}
}
