package reqfield_test

import (
	"errors"
	"fmt"
	"math"
	"reflect"
	"regexp"
	"strings"
	"testing"

	"github.com/agentmesh/agentmesh/pkg/adapter/reqfield"
	"github.com/agentmesh/agentmesh/pkg/wire"
)

func decode(t *testing.T, in map[string]any) *reqfield.Decoder {
	t.Helper()
	b, err := wire.Marshal(in)
	if err != nil {
		t.Fatal(err)
	}
	d, err := reqfield.Decode("test", b)
	if err != nil {
		t.Fatalf("Decode: %v", err)
	}
	return d
}

// message returns the problems of err, without the class and the
// "test request: " prefix, or "" for nil.
func message(t *testing.T, err error) string {
	t.Helper()
	if err == nil {
		return ""
	}
	var we *wire.Error
	if !errors.As(err, &we) || !errors.Is(err, wire.AgenticRequestValidationError) || we.Retryable {
		t.Fatalf("err = %#v, want a non-retryable *wire.Error of class AgenticRequestValidationError", err)
	}
	msg, ok := strings.CutPrefix(we.Message, "test request: ")
	if !ok {
		t.Fatalf("message %q does not begin with the adapter's name", we.Message)
	}
	return msg
}

func TestGetters(t *testing.T) {
	tests := []struct {
		name    string
		in      map[string]any
		read    func(d *reqfield.Decoder) any // reads the fields, returns what the getters gave
		want    any
		wantErr string // every problem, in order; "" for none
	}{
		{name: "string", in: map[string]any{"k": "v"}, read: func(d *reqfield.Decoder) any { return d.String("k") }, want: "v"},
		{name: "string absent", in: map[string]any{}, read: func(d *reqfield.Decoder) any { return d.String("k") }, want: ""},
		{name: "string nil", in: map[string]any{"k": nil}, read: func(d *reqfield.Decoder) any { return d.String("k") }, want: ""},
		{name: "string keeps a NUL byte", in: map[string]any{"k": "a\x00b"}, read: func(d *reqfield.Decoder) any { return d.String("k") }, want: "a\x00b"},
		{name: "string of an integer", in: map[string]any{"k": 7}, read: func(d *reqfield.Decoder) any { return d.String("k") },
			want: "", wantErr: `field "k": want a string, got an integer`},
		{name: "string of binary", in: map[string]any{"k": []byte("v")}, read: func(d *reqfield.Decoder) any { return d.String("k") },
			want: "", wantErr: `field "k": want a string, got binary`},

		{name: "arg", in: map[string]any{"k": "--x"}, read: func(d *reqfield.Decoder) any { return d.Arg("k") }, want: "--x"},
		{name: "arg with a NUL byte", in: map[string]any{"k": "a\x00b"}, read: func(d *reqfield.Decoder) any { return d.Arg("k") },
			want: "", wantErr: `field "k": contains a NUL byte, which no argv element can carry`},
		{name: "arg of a map", in: map[string]any{"k": map[string]any{}}, read: func(d *reqfield.Decoder) any { return d.Arg("k") },
			want: "", wantErr: `field "k": want a string, got a map`},

		{name: "strings", in: map[string]any{"k": []any{"a", "", "c"}}, read: func(d *reqfield.Decoder) any { return d.Strings("k") },
			want: []string{"a", "", "c"}},
		{name: "strings empty", in: map[string]any{"k": []any{}}, read: func(d *reqfield.Decoder) any { return d.Strings("k") }, want: []string{}},
		{name: "strings nil", in: map[string]any{"k": nil}, read: func(d *reqfield.Decoder) any { return d.Strings("k") }, want: []string(nil)},
		{name: "strings of a string", in: map[string]any{"k": "a"}, read: func(d *reqfield.Decoder) any { return d.Strings("k") },
			want: []string(nil), wantErr: `field "k": want an array of strings, got a string`},
		{name: "strings naming each bad element", in: map[string]any{"k": []any{"a", 1, true}}, read: func(d *reqfield.Decoder) any { return d.Strings("k") },
			want: []string(nil), wantErr: `field "k"[1]: want a string, got an integer; field "k"[2]: want a string, got a boolean`},
		{name: "args", in: map[string]any{"k": []any{"a", "b"}}, read: func(d *reqfield.Decoder) any { return d.Args("k") }, want: []string{"a", "b"}},
		{name: "args with a NUL byte", in: map[string]any{"k": []any{"a", "b\x00", 1.5}}, read: func(d *reqfield.Decoder) any { return d.Args("k") },
			want: []string(nil), wantErr: `field "k"[1]: contains a NUL byte, which no argv element can carry; field "k"[2]: want a string, got a float`},

		{name: "bool", in: map[string]any{"k": true}, read: func(d *reqfield.Decoder) any { return d.Bool("k") }, want: true},
		{name: "bool absent", in: map[string]any{}, read: func(d *reqfield.Decoder) any { return d.Bool("k") }, want: false},
		{name: "bool of a string", in: map[string]any{"k": "yes"}, read: func(d *reqfield.Decoder) any { return d.Bool("k") },
			want: false, wantErr: `field "k": want a boolean, got a string`},

		{name: "int", in: map[string]any{"k": 300}, read: func(d *reqfield.Decoder) any { return d.Int("k", 0, 1000) }, want: 300},
		{name: "int at the bounds", in: map[string]any{"lo": -5, "hi": uint64(5)},
			read: func(d *reqfield.Decoder) any { return [2]int{d.Int("lo", -5, 5), d.Int("hi", -5, 5)} }, want: [2]int{-5, 5}},
		{name: "int absent", in: map[string]any{}, read: func(d *reqfield.Decoder) any { return d.Int("k", 1, 2) }, want: 0},
		{name: "int below", in: map[string]any{"k": -1}, read: func(d *reqfield.Decoder) any { return d.Int("k", 0, 10) },
			want: 0, wantErr: `field "k": -1 is out of range [0, 10]`},
		{name: "int above", in: map[string]any{"k": int64(1) << 40}, read: func(d *reqfield.Decoder) any { return d.Int("k", 0, 10) },
			want: 0, wantErr: `field "k": 1099511627776 is out of range [0, 10]`},
		{name: "int beyond int64", in: map[string]any{"k": uint64(1) << 63}, read: func(d *reqfield.Decoder) any { return d.Int("k", 0, 10) },
			want: 0, wantErr: `field "k": 9223372036854775808 is out of range [0, 10]`},
		{name: "int of a whole float", in: map[string]any{"k": 2.0}, read: func(d *reqfield.Decoder) any { return d.Int("k", 0, 10) },
			want: 0, wantErr: `field "k": want an integer, got a float`},
		{name: "int of an array", in: map[string]any{"k": []any{1}}, read: func(d *reqfield.Decoder) any { return d.Int("k", 0, 10) },
			want: 0, wantErr: `field "k": want an integer, got an array`},

		{name: "value", in: map[string]any{"k": map[string]any{"a": 1}}, read: func(d *reqfield.Decoder) any { return d.Value("k") },
			want: map[string]any{"a": int8(1)}},
		{name: "value absent", in: map[string]any{}, read: func(d *reqfield.Decoder) any { return d.Value("k") }, want: nil},
		{name: "value claims the field", in: map[string]any{"k": []byte{1}}, read: func(d *reqfield.Decoder) any { d.Value("k"); return nil }, want: nil},

		{name: "float", in: map[string]any{"k": 0.5}, read: func(d *reqfield.Decoder) any { return d.Float("k", 0, 1) }, want: 0.5},
		{name: "float of an integer", in: map[string]any{"k": 2}, read: func(d *reqfield.Decoder) any { return d.Float("k", 0, 2) }, want: 2.0},
		{name: "float of a float32", in: map[string]any{"k": float32(0.25)}, read: func(d *reqfield.Decoder) any { return d.Float("k", 0, 1) }, want: 0.25},
		{name: "float at the bounds", in: map[string]any{"lo": -1.5, "hi": uint64(3)},
			read: func(d *reqfield.Decoder) any { return [2]float64{d.Float("lo", -1.5, 3), d.Float("hi", -1.5, 3)} }, want: [2]float64{-1.5, 3}},
		{name: "float absent", in: map[string]any{}, read: func(d *reqfield.Decoder) any { return d.Float("k", 1, 2) }, want: 0.0},
		{name: "float nil", in: map[string]any{"k": nil}, read: func(d *reqfield.Decoder) any { return d.Float("k", 1, 2) }, want: 0.0},
		{name: "float above", in: map[string]any{"k": 2.5}, read: func(d *reqfield.Decoder) any { return d.Float("k", 0, 2) },
			want: 0.0, wantErr: `field "k": 2.5 is out of range [0, 2]`},
		{name: "float below, an integer", in: map[string]any{"k": -3}, read: func(d *reqfield.Decoder) any { return d.Float("k", 0, 0.5) },
			want: 0.0, wantErr: `field "k": -3 is out of range [0, 0.5]`},
		{name: "float NaN", in: map[string]any{"k": math.NaN()}, read: func(d *reqfield.Decoder) any { return d.Float("k", 0, 2) },
			want: 0.0, wantErr: `field "k": NaN is out of range [0, 2]`},
		{name: "float of a string", in: map[string]any{"k": "hot"}, read: func(d *reqfield.Decoder) any { return d.Float("k", 0, 2) },
			want: 0.0, wantErr: `field "k": want a number, got a string`},

		{name: "maps", in: map[string]any{"k": []any{map[string]any{"a": "x"}, map[string]any{}}},
			read: func(d *reqfield.Decoder) any { return d.Maps("k") }, want: []map[string]any{{"a": "x"}, {}}},
		{name: "maps empty", in: map[string]any{"k": []any{}}, read: func(d *reqfield.Decoder) any { return d.Maps("k") }, want: []map[string]any{}},
		{name: "maps absent", in: map[string]any{}, read: func(d *reqfield.Decoder) any { return d.Maps("k") }, want: []map[string]any(nil)},
		{name: "maps nil", in: map[string]any{"k": nil}, read: func(d *reqfield.Decoder) any { return d.Maps("k") }, want: []map[string]any(nil)},
		{name: "maps of a map", in: map[string]any{"k": map[string]any{}}, read: func(d *reqfield.Decoder) any { return d.Maps("k") },
			want: []map[string]any(nil), wantErr: `field "k": want an array of maps, got a map`},
		{name: "maps naming each bad element", in: map[string]any{"k": []any{"a", map[string]any{"b": true}, nil}},
			read: func(d *reqfield.Decoder) any { return d.Maps("k") }, want: []map[string]any{nil, {"b": true}, nil},
			wantErr: `field "k"[0]: want a map, got a string; field "k"[2]: want a map, got nil`},

		{name: "required present", in: map[string]any{"p": "x"}, read: func(d *reqfield.Decoder) any { d.Require("p"); return d.String("p") }, want: "x"},
		{name: "required absent", in: map[string]any{}, read: func(d *reqfield.Decoder) any { d.Require("p"); return d.String("p") },
			want: "", wantErr: `field "p": required, a non-empty string`},
		{name: "required nil", in: map[string]any{"p": nil}, read: func(d *reqfield.Decoder) any { d.Require("p"); return d.String("p") },
			want: "", wantErr: `field "p": required, a non-empty string`},
		{name: "required empty", in: map[string]any{"p": ""}, read: func(d *reqfield.Decoder) any { d.Require("p"); return d.String("p") },
			want: "", wantErr: `field "p": required, a non-empty string`},
		{name: "required, wrong type named once", in: map[string]any{"p": 1}, read: func(d *reqfield.Decoder) any { d.Require("p"); return d.String("p") },
			want: "", wantErr: `field "p": want a string, got an integer`},
		{name: "required, NUL named once", in: map[string]any{"p": "\x00"}, read: func(d *reqfield.Decoder) any { s := d.Arg("p"); d.Require("p"); return s },
			want: "", wantErr: `field "p": contains a NUL byte, which no argv element can carry`},
		{name: "required unless, neither", in: map[string]any{"p": ""}, read: func(d *reqfield.Decoder) any { d.RequireUnless("p", "o"); return d.String("p") },
			want: "", wantErr: `field "p": required, a non-empty string, unless o is given`},
		{name: "required unless, the other given, even a bad one", in: map[string]any{"o": 1},
			read: func(d *reqfield.Decoder) any { d.RequireUnless("p", "o"); d.String("o"); return d.String("p") },
			want: "", wantErr: `field "o": want a string, got an integer`},
		{name: "required unless, wrong type named once", in: map[string]any{"p": 1}, read: func(d *reqfield.Decoder) any { d.RequireUnless("p", "o"); return d.String("p") },
			want: "", wantErr: `field "p": want a string, got an integer`},
		{name: "required unless alone claims the field", in: map[string]any{"p": "x"}, read: func(d *reqfield.Decoder) any { d.RequireUnless("p", "o"); return nil }, want: nil},
		{name: "required alone claims the field", in: map[string]any{"p": "x"}, read: func(d *reqfield.Decoder) any { d.Require("p"); return nil }, want: nil},

		{name: "unknown fields in key order", in: map[string]any{"c": 1, "a": 1, "b": "x"}, read: func(d *reqfield.Decoder) any { return d.String("b") },
			want: "x", wantErr: `unknown field "a"; unknown field "c"`},
		{name: "long unknown field cut", in: map[string]any{strings.Repeat("x", 100): 1}, read: func(d *reqfield.Decoder) any { return nil },
			want: nil, wantErr: `unknown field "` + strings.Repeat("x", 64) + `"`},
		{name: "problems sorted by field, in order within one", in: map[string]any{"b": "x", "a": 1, "z": 1},
			read: func(d *reqfield.Decoder) any {
				d.Bad("b", "second")
				d.BadElem("b", 3, "third %d", 3)
				d.Bad("a", "last")
				return d.String("b") + d.String("a")
			},
			want: "x", wantErr: `field "a": last; field "a": want a string, got an integer; field "b": second; field "b"[3]: third 3; unknown field "z"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d := decode(t, tt.in)
			got := tt.read(d)
			if !reflect.DeepEqual(got, tt.want) {
				t.Errorf("got %#v, want %#v", got, tt.want)
			}
			if msg := message(t, d.Err()); msg != tt.wantErr {
				t.Errorf("Err:\n got %q\nwant %q", msg, tt.wantErr)
			}
		})
	}
}

func TestDecodeRefusesWhatIsNotAMap(t *testing.T) {
	tests := []struct {
		name    string
		in      []byte
		wantErr string
	}{
		{name: "empty", in: nil, wantErr: "malformed"},
		{name: "nil", in: []byte{0xc0}, wantErr: "top level is not a map"},
		{name: "array", in: []byte{0x91, 0xa1, 'x'}, wantErr: "top level is not a map"},
		{name: "string", in: []byte{0xa2, 'h', 'i'}, wantErr: "top level is not a map"},
		{name: "truncated map", in: []byte{0x81, 0xa1}, wantErr: "malformed"},
		{name: "integer key", in: []byte{0x81, 0x01, 0xa1, 'x'}, wantErr: "malformed"},
		{name: "trailing bytes", in: []byte{0x80, 0x80}, wantErr: "malformed"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d, err := reqfield.Decode("test", tt.in)
			if d != nil {
				t.Errorf("Decode returned a Decoder with its error")
			}
			if msg := message(t, err); !strings.Contains(msg, tt.wantErr) {
				t.Errorf("Decode(% x) = %v, want it to say %q", tt.in, err, tt.wantErr)
			}
		})
	}
}

func TestHas(t *testing.T) {
	d := decode(t, map[string]any{"s": "", "n": nil, "bad": 1, "late": "x"})
	d.String("s")
	d.String("n")
	d.String("bad")
	d.String("late")
	d.Bad("late", "refused")
	for k, want := range map[string]bool{"s": true, "n": false, "absent": false, "bad": false, "late": false} {
		if got := d.Has(k); got != want {
			t.Errorf("Has(%q) = %v, want %v", k, got, want)
		}
	}
	if msg := message(t, d.Err()); msg != `field "bad": want a string, got an integer; field "late": refused` {
		t.Errorf("Has claimed or recorded something: %q", msg)
	}
}

func TestErrIsIdempotent(t *testing.T) {
	d := decode(t, map[string]any{"x": 1})
	d.Require("p")
	first, second := d.Err(), d.Err()
	if first.Error() != second.Error() {
		t.Errorf("Err changed between calls:\n%v\n%v", first, second)
	}
	if want := `field "p": required, a non-empty string; unknown field "x"`; message(t, first) != want {
		t.Errorf("Err = %q, want %q", message(t, first), want)
	}
	if err := decode(t, map[string]any{}).Err(); err != nil {
		t.Errorf("Err of a clean request = %#v, want nil", err)
	}
}

// TestErrBounded: a request with thousands of unknown fields gives a
// message within wire.MaxErrorText that counts what it leaves out.
func TestErrBounded(t *testing.T) {
	in := make(map[string]any)
	for i := range 5000 {
		in[fmt.Sprintf("field-%04d", i)] = i
	}
	err := decode(t, in).Err()
	msg := message(t, err)
	if n := len(err.(*wire.Error).Message); n > wire.MaxErrorText {
		t.Errorf("message of %d bytes, want at most %d", n, wire.MaxErrorText)
	}
	if !strings.HasPrefix(msg, `unknown field "field-0000"; unknown field "field-0001"; `) {
		t.Errorf("message begins %.80q, want the first fields in order", msg)
	}
	var more int
	if i := strings.LastIndex(msg, "; and "); i < 0 {
		t.Fatalf("message ends %q, want a count of the problems left out", msg[max(0, len(msg)-80):])
	} else if _, err := fmt.Sscanf(msg[i:], "; and %d more", &more); err != nil {
		t.Fatalf("message ends %q: %v", msg[i:], err)
	}
	if named := strings.Count(msg, "unknown field"); named+more != len(in) {
		t.Errorf("%d named + %d counted, want %d", named, more, len(in))
	}
}

func TestErrRedacts(t *testing.T) {
	secret := "sk-ant-api03-" + strings.Repeat("A", 40)
	d := decode(t, map[string]any{"model": secret})
	d.Bad("model", "%q is not a model name", d.String("model"))
	if msg := message(t, d.Err()); strings.Contains(msg, secret) {
		t.Errorf("message %q carries the secret", msg)
	}
}

// TestIsUUID: the hand-written check accepts exactly what the UUID pattern
// accepts.
func TestIsUUID(t *testing.T) {
	re := regexp.MustCompile(`^[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}$`)
	for _, s := range []string{
		"01a22a8b-564f-7be0-9f56-beadbebf0082", "F9F8D0CE-8F8E-497E-B1F8-E1B327E8AF6E", "",
		"01a22a8b-564f-7be0-9f56-beadbebf008", "01a22a8b-564f-7be0-9f56-beadbebf00822", "01a22a8b_564f-7be0-9f56-beadbebf0082",
		"01a22a8g-564f-7be0-9f56-beadbebf0082", "01a22a8b-564f-7be0-9f56-beadbebf008\n", "01a22a8b-564f-7be0-9f5-6beadbebf0082",
		"0000000000000000000000000000000000000", "01a22a8b-564f-7be0-9f56-beadbebf00é",
	} {
		if got, want := reqfield.IsUUID(s), re.MatchString(s); got != want {
			t.Errorf("IsUUID(%q) = %t, want %t", s, got, want)
		}
	}
}
