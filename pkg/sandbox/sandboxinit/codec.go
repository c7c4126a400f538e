package sandboxinit

import (
	"errors"
	"io"
	"strconv"
	"time"
)

// The config's wire form, a frame of its own so that the init decodes
// it without encoding/json (whose reflection and size cost the init's
// start-up): a 4-byte big-endian length, then the fields in order, each
// number 8 bytes big-endian, each string a 4-byte length and its bytes,
// each list a 4-byte count and its items.

// maxFrame bounds a config the init accepts.
const maxFrame = 16 << 20

// ErrConfig is the error Decode and ReadConfig wrap for a config they
// cannot read.
var ErrConfig = errors.New("sandbox init config")

// Encode returns cfg's frame.
func Encode(cfg Config) []byte {
	var e encoder
	e.b = make([]byte, 4, 4096)
	e.num(int64(cfg.V))
	for _, s := range []string{cfg.Root, cfg.Socket, cfg.Dir, cfg.Path} {
		e.str(s)
	}
	e.strs(cfg.Args)
	e.strs(cfg.Env)
	e.num(int64(cfg.Procs))
	e.num(cfg.Memory)
	e.num(int64(cfg.WallTime))
	e.u32(len(cfg.Mounts))
	for _, m := range cfg.Mounts {
		e.str(m.Kind)
		e.str(m.Src)
		e.str(m.Dst)
		e.str(m.Data)
		ro := int64(0)
		if m.RO {
			ro = 1
		}
		e.num(ro)
	}
	e.u32(len(cfg.Listen))
	for _, l := range cfg.Listen {
		e.str(l.Addr)
		e.str(l.Target)
	}
	e.u32(len(cfg.Seccomp))
	for _, f := range cfg.Seccomp {
		e.num(int64(f.Code)<<48 | int64(f.Jt)<<40 | int64(f.Jf)<<32 | int64(f.K))
	}
	n := len(e.b) - 4
	e.b[0], e.b[1], e.b[2], e.b[3] = byte(n>>24), byte(n>>16), byte(n>>8), byte(n)
	return e.b
}

// ReadConfig reads one frame from r, exactly, and decodes it.
func ReadConfig(r io.Reader) (Config, error) {
	var h [4]byte
	if _, err := io.ReadFull(r, h[:]); err != nil {
		return Config{}, errors.Join(ErrConfig, err)
	}
	n := int(h[0])<<24 | int(h[1])<<16 | int(h[2])<<8 | int(h[3])
	if n > maxFrame {
		return Config{}, errors.Join(ErrConfig, errors.New("a frame of "+strconv.Itoa(n)+" bytes, over the limit"))
	}
	b := make([]byte, 4+n)
	copy(b, h[:])
	if _, err := io.ReadFull(r, b[4:]); err != nil {
		return Config{}, errors.Join(ErrConfig, err)
	}
	return Decode(b)
}

// Decode reads a frame Encode made.
func Decode(b []byte) (Config, error) {
	d := decoder{b: b}
	n := d.u32()
	if d.err == nil && n != len(b)-4 {
		d.fail("the frame says " + strconv.Itoa(n) + " bytes and holds " + strconv.Itoa(len(b)-4))
	}
	var cfg Config
	cfg.V = int(d.num())
	cfg.Root, cfg.Socket, cfg.Dir, cfg.Path = d.str(), d.str(), d.str(), d.str()
	cfg.Args, cfg.Env = d.strs(), d.strs()
	cfg.Procs, cfg.Memory, cfg.WallTime = int(d.num()), d.num(), time.Duration(d.num())
	for range d.count(4*4 + 8) {
		m := Mount{Kind: d.str(), Src: d.str(), Dst: d.str(), Data: d.str()}
		switch d.num() {
		case 0:
		case 1:
			m.RO = true
		default:
			d.fail("a mount's ro flag is neither 0 nor 1")
		}
		cfg.Mounts = append(cfg.Mounts, m)
	}
	for range d.count(2 * 4) {
		cfg.Listen = append(cfg.Listen, Listener{Addr: d.str(), Target: d.str()})
	}
	for range d.count(8) {
		n := d.num()
		cfg.Seccomp = append(cfg.Seccomp, BPF{Code: uint16(n >> 48), Jt: uint8(n >> 40), Jf: uint8(n >> 32), K: uint32(n)})
	}
	if d.err == nil && len(d.b) != 0 {
		d.fail(strconv.Itoa(len(d.b)) + " bytes after the last field")
	}
	if d.err != nil {
		return Config{}, d.err
	}
	return cfg, nil
}

type encoder struct{ b []byte }

func (e *encoder) u32(n int) { e.b = append(e.b, byte(n>>24), byte(n>>16), byte(n>>8), byte(n)) }

func (e *encoder) num(n int64) {
	for i := 56; i >= 0; i -= 8 {
		e.b = append(e.b, byte(n>>i))
	}
}

func (e *encoder) str(s string) {
	e.u32(len(s))
	e.b = append(e.b, s...)
}

func (e *encoder) strs(ss []string) {
	e.u32(len(ss))
	for _, s := range ss {
		e.str(s)
	}
}

type decoder struct {
	b   []byte
	err error
}

func (d *decoder) fail(why string) {
	if d.err == nil {
		d.err = errors.Join(ErrConfig, errors.New(why))
	}
	d.b = nil
}

func (d *decoder) take(n int) []byte {
	if d.err != nil {
		return nil
	}
	if n < 0 || n > len(d.b) {
		d.fail("truncated: " + strconv.Itoa(n) + " bytes wanted, " + strconv.Itoa(len(d.b)) + " left")
		return nil
	}
	out := d.b[:n]
	d.b = d.b[n:]
	return out
}

func (d *decoder) u32() int {
	b := d.take(4)
	if b == nil {
		return 0
	}
	return int(b[0])<<24 | int(b[1])<<16 | int(b[2])<<8 | int(b[3])
}

func (d *decoder) num() int64 {
	b := d.take(8)
	var n int64
	for _, c := range b {
		n = n<<8 | int64(c)
	}
	return n
}

func (d *decoder) str() string { return string(d.take(d.u32())) }

// count reads a list's length, which each item of at least min bytes
// must fit in what is left.
func (d *decoder) count(min int) int {
	n := d.u32()
	if d.err == nil && n*min > len(d.b) {
		d.fail("a list of " + strconv.Itoa(n) + " items in " + strconv.Itoa(len(d.b)) + " bytes")
		return 0
	}
	return n
}

func (d *decoder) strs() []string {
	n := d.count(4)
	var out []string
	for range n {
		out = append(out, d.str())
	}
	return out
}
